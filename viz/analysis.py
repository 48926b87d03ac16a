"""Figures of the analysis views: one query against every key, attention through the layers,
the heads on a map, what masking heads changes, and a table of per-head statistics."""

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from viz._style import SEQUENTIAL, base_layout, clean_axis
from viz._text import escape, escape_all, head_label, position_labels
from viz.heatmap import FIGURE_PX, MIN_CELL_PX, column_ticks, row_ticks

if TYPE_CHECKING:  # for the annotations only: viz needs no torch at run time, pandas only for the table
    import pandas as pd

    from attention.analysis.query_key import QueryKey

DIVERGING = "RdBu_r"  # vector components and products: red above zero, blue below, white at zero
SCORE_COLOUR, PROB_COLOUR = "#9e9e9e", "#2f6fad"
MARK_COLOUR = "#111111"
LAYER_SCALE = "Viridis"
LAYER_SCALE_END = 0.85  # Viridis' last yellows hardly show on white
MAX_ROWS_PX = 1100  # token rows beyond this height get thinner, and only every k-th is labelled
MIN_TICK_PX = 12  # closer labels are too small to read
CHAR_WIDTH = 0.6  # average glyph width as a fraction of the font size
COLORBAR_PX = 100
STAT_DECIMALS = 3
_KEEP_OPACITY = dict(selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)))


# ---- one query against every key ------------------------------------------------------------------


def query_key_figure(
    qk: "QueryKey",
    tokens: Sequence[str],
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
) -> go.Figure:
    """The query·key view of one head and one query (an attention.analysis.query_key.QueryKey), at
    most ``width`` px wide and ``height`` px tall when given (the bars and rows give way), its row
    labels at least ``min_label`` px when given (every k-th token on thin rows).

    Four panels share the key-token rows (first token on top): the key vectors k (S × d), the
    products q × k (S × d) under the query vector q as a 1 × d strip, the scaled scores
    Σ (q × k) · scaling, and the softmax probabilities. k and q share one symmetric colour
    scale, q × k another. Rows are categorical "token·i" labels, so repeated tokens keep their
    own rows; tokens are escaped.
    """
    S, d = qk.k.shape
    if len(tokens) != S:
        raise ValueError(f"{len(tokens)} tokens given for {S} keys")
    names = escape_all(tokens)
    rows = position_labels(names)
    row_px = _row_px(S, font_size)
    vector_px = float(np.clip(d * 6, 160, 320))
    bar_px, gap_px, strip_gap_px = float(max(140, font_size * 12)), font_size * 3, font_size
    margin = _query_key_margin(names, row_px, font_size, min_label)
    if width is not None:  # the bars give way first, then the vectors
        room = width - margin["l"] - margin["r"] - 3 * gap_px
        bar_px = float(np.clip((room - 2 * vector_px) / 2, 80, bar_px))
        vector_px = float(max(60, min(vector_px, (room - 2 * bar_px) / 2)))
    if height is not None:
        row_px = max(1.0, min(row_px, (height - margin["t"] - margin["b"] - strip_gap_px) / (S + 1)))
        margin = _query_key_margin(names, row_px, font_size, min_label)
    plot_w = 2 * vector_px + 2 * bar_px + 3 * gap_px
    plot_h = row_px * (S + 1) + strip_gap_px
    fig = make_subplots(
        rows=2,
        cols=4,
        specs=[[None, {}, None, None], [{}, {}, {}, {}]],
        shared_yaxes=True,
        shared_xaxes="columns",
        column_widths=[vector_px, vector_px, bar_px, bar_px],
        row_heights=[row_px, row_px * S],
        horizontal_spacing=gap_px / plot_w,
        vertical_spacing=strip_gap_px / plot_h,
    )
    dims = list(range(d))
    query_row = rows[qk.query]
    fig.add_trace(
        go.Heatmap(
            z=qk.q[None, :],
            x=dims,
            y=[query_row],
            coloraxis="coloraxis",
            name="q",
            hovertemplate="q of %{y}, dim %{x}: %{z:.3f}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Heatmap(
            z=qk.k,
            x=dims,
            y=rows,
            coloraxis="coloraxis",
            name="k",
            hovertemplate="k of %{y}, dim %{x}: %{z:.3f}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=qk.product,
            x=dims,
            y=rows,
            coloraxis="coloraxis2",
            name="q × k",
            hovertemplate="%{y}, dim %{x}: q × k %{z:.4f}<extra></extra>",
        ),
        row=2,
        col=2,
    )
    fig.add_trace(
        _bars(
            qk.scores, rows, SCORE_COLOUR, "score", f"%{{y}}: Σ q × k · {qk.scaling:.4g} = %{{x:.3f}}<extra></extra>"
        ),
        row=2,
        col=3,
    )
    fig.add_trace(
        _bars(qk.probs, rows, PROB_COLOUR, "probability", "%{y}: probability %{x:.3f}<extra></extra>"), row=2, col=4
    )
    title = f"Layer {qk.layer}, head {qk.head}: query “{names[qk.query]}” (position {qk.query}) against every key"
    _query_key_layout(fig, qk, rows, names, (row_px, plot_w, plot_h), margin, title, font_size, min_label)
    return fig


def _query_key_margin(names: list[str], row_px: float, font_size: int, min_label: int | None) -> dict:
    """Room for the row labels, the colour bars, the title and the two-line panel titles under the panels."""
    size = _row_ticks(row_px, font_size, min_label)[1]
    return {"l": _label_px(names, size) + 10, "r": COLORBAR_PX, "t": round(font_size * 1.8) + 16, "b": font_size * 5}


def _row_ticks(row_px: float, font_size: int, min_label: int | None) -> tuple[int, int]:
    """Every k-th row labelled, and the labels' size: never closer than MIN_TICK_PX (or room for ``min_label``)."""
    stride = max(1, int(np.ceil(max(MIN_TICK_PX, (min_label or 0) / 0.8) / row_px - 1e-9)))
    return stride, max(min_label or 6, min(font_size, int(row_px * stride * 0.8)))


def _bars(values: np.ndarray, rows: list[str], colour: str, name: str, hover: str) -> go.Bar:
    return go.Bar(
        x=np.asarray(values, dtype=float),
        y=rows,
        orientation="h",
        marker=dict(color=colour),
        name=name,
        hovertemplate=hover,
        showlegend=False,
    )


def _query_key_layout(
    fig: go.Figure,
    qk: "QueryKey",
    rows: list[str],
    names: list[str],
    sizes: tuple,
    margin: dict,
    title: str,
    font_size: int,
    min_label: int | None,
) -> None:
    row_px, plot_w, plot_h = sizes
    stride, tick_size = _row_ticks(row_px, font_size, min_label)
    vector = max(float(np.abs(qk.q).max(initial=0.0)), float(np.abs(qk.k).max(initial=0.0))) or 1.0
    product = float(np.abs(qk.product).max(initial=0.0)) or 1.0
    fig.update_layout(base_layout(font_size, title))
    fig.update_layout(
        margin=margin,
        width=int(plot_w) + margin["l"] + margin["r"],
        height=int(plot_h) + margin["t"] + margin["b"],
        bargap=0.15,
        coloraxis=_vector_scale(vector, "q, k", y=1.0, font_size=font_size),
        coloraxis2=_vector_scale(product, "q × k", y=0.45, font_size=font_size),
    )
    fig.update_yaxes(clean_axis(type="category", autorange="reversed"), row=2)
    fig.update_yaxes(
        tickmode="array", tickvals=rows[::stride], ticktext=names[::stride], tickfont=dict(size=tick_size), row=2, col=1
    )
    fig.update_yaxes(
        clean_axis(type="category", tickmode="array", tickvals=[rows[qk.query]], ticktext=["q"]), row=1, col=2
    )
    # two short lines each: side by side, one line of each ran into its neighbour's
    titles = ["k: key vectors<br>(dims)", "q × k<br>(dims)", "score:<br>Σ q × k · scaling", "softmax<br>probability"]
    for col, text in enumerate(titles, start=1):
        fig.update_xaxes(clean_axis(title=dict(text=text)), row=2, col=col)
    fig.update_xaxes(clean_axis(), row=1, col=2)
    fig.update_xaxes(showgrid=True, zeroline=True, row=2, col=3)
    fig.update_xaxes(showgrid=True, rangemode="tozero", row=2, col=4)


def _vector_scale(bound: float, title: str, y: float, font_size: int) -> dict:
    return dict(
        colorscale=DIVERGING,
        cmin=-bound,
        cmid=0.0,
        cmax=bound,
        colorbar=dict(
            title=dict(text=title), thickness=max(10, font_size), len=0.45, y=y, yanchor="top", outlinewidth=0, ticks=""
        ),
    )


# ---- raw attention beside rollout or flow --------------------------------------------------------


def attention_pair(
    raw: np.ndarray,
    derived: np.ndarray,
    labels: Sequence[str],
    derived_title: str,
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
) -> go.Figure:
    """A layer's head-averaged attention beside rollout or flow, on the same token axes.

    raw and derived are (T, T) with rows = positions (first on top) and columns = tokens; both
    maps share one colour scale from 0 to the larger maximum, so equal colours mean equal values.
    Axes are categorical "token·i" labels, so repeated tokens stay distinct; labels are escaped.
    ``derived_title`` is plotly markup and is not escaped (callers pass "Rollout to layer 3").
    The figure is at most ``width`` px wide (default ``FIGURE_PX``); when the two maps side by side
    would have cells thinner than ``MIN_CELL_PX``, the second is drawn under the first
    (``pair_stacked``), each as wide as the figure allows. With ``height`` (a presentation's first
    screen) the maps stay side by side and shrink to fit it, labelled at ``min_label`` px or more.
    """
    raw, derived = np.asarray(raw, dtype=np.float32), np.asarray(derived, dtype=np.float32)
    T = len(labels)
    if raw.shape != (T, T) or derived.shape != (T, T):
        raise ValueError(f"expected two ({T}, {T}) maps for {T} labels, got {raw.shape} and {derived.shape}")
    names = escape_all(labels)
    cats = position_labels(names)
    stacked = height is None and pair_stacked(labels, font_size, width)
    panel_px = _pair_panel_px(names, font_size, width, stacked)
    for _ in range(3 if height is not None else 0):  # the labels' depth depends on the cells
        margin = _pair_margin(names, panel_px / T, font_size, min_label)[0]
        panel_px = max(float(T), min(panel_px, height - margin["t"] - margin["b"]))
    gap_px = font_size * 3
    rows, cols = (2, 1) if stacked else (1, 2)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        shared_yaxes=not stacked,
        horizontal_spacing=gap_px / (2 * panel_px + gap_px),
        subplot_titles=["Attention, mean over heads", derived_title],
    )
    fig.add_trace(
        go.Heatmap(
            z=raw,
            x=cats,
            y=cats,
            coloraxis="coloraxis",
            name="attention",
            hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=derived,
            x=cats,
            y=cats,
            coloraxis="coloraxis",
            name="derived",
            hovertemplate="%{y} from %{x}: %{z:.3f}<extra></extra>",
        ),
        row=rows,
        col=cols,
    )
    top = float(max(np.nanmax(raw, initial=0.0), np.nanmax(derived, initial=0.0))) or 1.0
    _pair_layout(fig, names, cats, (panel_px, gap_px, top), font_size, stacked, min_label)
    return fig


def pair_stacked(labels: Sequence[str], font_size: int, width: int | None = None) -> bool:
    """Whether ``attention_pair`` draws its maps one above the other: side by side within ``width``,
    their cells would be thinner than ``MIN_CELL_PX`` (or than they would be anyway)."""
    names = escape_all(labels)
    natural = _pair_natural_px(len(names), font_size) / max(len(names), 1)
    beside = _pair_panel_px(names, font_size, width, stacked=False) / max(len(names), 1)
    return beside < min(MIN_CELL_PX, natural)


def _pair_natural_px(n_tokens: int, font_size: int) -> float:
    scale = max(1.0, font_size / 12)
    return float(np.clip(n_tokens * 24 * scale, 300 * scale, 560 * scale))


def _pair_panel_px(names: list[str], font_size: int, width: int | None, stacked: bool) -> float:
    """Side of one map: its natural size, or what ``width`` leaves beside the row labels (at their
    largest font), the axis title, the colour bar and, side by side, the gap and the other map."""
    width = FIGURE_PX if width is None else width
    fixed = _label_px(names, font_size) + font_size * 2 + 10 + COLORBAR_PX
    room = width - fixed if stacked else (width - fixed - font_size * 3) / 2
    return max(float(len(names)), min(_pair_natural_px(len(names), font_size), room))


def _pair_margin(names: list[str], cell_px: float, font_size: int, min_label: int | None) -> tuple:
    """The margins around the maps (the titles above, the column labels and axis title under them) and the
    labels of both axes."""
    x_ticks = column_ticks(names, cell_px, font_size, min_label)
    y_ticks = row_ticks(names, cell_px, font_size, min_label)
    below_px = x_ticks.depth + font_size * 2 + 10  # column labels and the axis title under a map
    margin = {
        "l": y_ticks.depth + font_size * 2 + 10,
        "r": COLORBAR_PX,
        "t": round(font_size * 2.5) + 10,
        "b": below_px,
    }
    return margin, x_ticks, y_ticks


def _pair_layout(
    fig: go.Figure,
    names: list[str],
    cats: list[str],
    sizes: tuple,
    font_size: int,
    stacked: bool,
    min_label: int | None = None,
) -> None:
    panel_px, gap_px, top = sizes
    margin, x_ticks, y_ticks = _pair_margin(names, panel_px / len(names), font_size, min_label)
    title_px, below_px = margin["t"], margin["b"]
    fig.update_layout(base_layout(font_size))
    if stacked:
        between = below_px + title_px
        size = dict(
            width=int(panel_px) + margin["l"] + margin["r"],
            height=int(2 * panel_px + between) + margin["t"] + margin["b"],
        )
        fig.update_yaxes(domain=[0, panel_px / (2 * panel_px + between)], row=2, col=1)
        fig.update_yaxes(domain=[(panel_px + between) / (2 * panel_px + between), 1], row=1, col=1)
    else:
        size = dict(
            width=int(2 * panel_px + gap_px) + margin["l"] + margin["r"],
            height=int(panel_px) + margin["t"] + margin["b"],
        )
    fig.update_layout(
        margin=margin,
        **size,
        coloraxis=dict(
            colorscale=SEQUENTIAL,
            cmin=0.0,
            cmax=top,
            colorbar=dict(
                title=dict(text="weight<br>(one scale<br>for both)"),
                thickness=max(10, font_size),
                outlinewidth=0,
                ticks="",
            ),
        ),
    )
    fig.update_xaxes(
        clean_axis(
            type="category",
            tickmode="array",
            tickvals=cats[:: x_ticks.stride],
            ticktext=names[:: x_ticks.stride],
            tickfont=dict(size=x_ticks.size),
            tickangle=x_ticks.angle,
        )
    )
    fig.update_yaxes(
        clean_axis(
            type="category",
            tickmode="array",
            tickvals=cats[:: y_ticks.stride],
            ticktext=names[:: y_ticks.stride],
            tickfont=dict(size=y_ticks.size),
            autorange="reversed",
        )
    )
    second = dict(row=2, col=1) if stacked else dict(row=1, col=2)
    fig.update_xaxes(title=dict(text="key"), row=1, col=1)
    fig.update_xaxes(title=dict(text="input token"), **second)
    fig.update_yaxes(title=dict(text="query / position"), row=1, col=1)
    if stacked:
        fig.update_yaxes(title=dict(text="position"), matches="y", **second)
        fig.update_xaxes(matches="x", **second)
        _place_titles(fig, panel_px, between=below_px + title_px)


def _place_titles(fig: go.Figure, panel_px: float, between: float) -> None:
    """Subplot titles just above each stacked map (make_subplots spaces rows evenly instead)."""
    for note, top in zip(fig.layout.annotations, (1.0, panel_px / (2 * panel_px + between))):
        note.update(y=top, yanchor="bottom", yshift=4)


# ---- every head on a map ---------------------------------------------------------------------------


def head_scatter(
    coords: np.ndarray,
    layers: np.ndarray,
    heads: np.ndarray,
    labels: Sequence[str] | None = None,
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
) -> go.Figure:
    """A 2-D map of the heads (Clark et al. 2019, fig. 6): close points attend alike; ``width`` and
    ``height`` (px) cap its size (a presentation's first screen).

    coords is (n, 2) (further columns are ignored); layers and heads give each point's layer and
    head. One trace per layer, so the legend names and toggles layers, coloured from early
    (dark) to late (light). Hover reads "L{layer} H{head}" and the pattern label when given
    (escaped); every point carries customdata [layer, head] for click selection.
    """
    coords = np.asarray(coords, dtype=float)
    layers, heads = np.asarray(layers, dtype=int), np.asarray(heads, dtype=int)
    n = len(coords)
    if coords.ndim != 2 or coords.shape[1] < 2 or layers.shape != (n,) or heads.shape != (n,):
        raise ValueError(
            f"expected coords (n, 2) with n layers and heads, got {coords.shape}, {layers.shape}, {heads.shape}"
        )
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels)} labels given for {n} heads")
    hovers = [
        head_label(layer, head) + (f"<br>{escape(labels[i])}" if labels is not None else "")
        for i, (layer, head) in enumerate(zip(layers, heads))
    ]
    present = np.unique(layers)
    top = max(int(present.max(initial=0)), 1)
    colours = sample_colorscale(LAYER_SCALE, [LAYER_SCALE_END * layer / top for layer in present])
    traces = []
    for layer, colour in zip(present, colours):
        picked = np.flatnonzero(layers == layer)
        traces.append(
            go.Scatter(
                x=coords[picked, 0],
                y=coords[picked, 1],
                mode="markers",
                name=f"layer {layer}",
                marker=dict(color=colour, size=max(8, round(font_size * 0.9)), line=dict(color="white", width=1)),
                customdata=[[int(layer), int(heads[i])] for i in picked],
                hovertext=[hovers[i] for i in picked],
                hovertemplate="%{hovertext}<extra></extra>",
                **_KEEP_OPACITY,
            )
        )
    scale = max(1.0, font_size / 12)
    layout = base_layout(font_size)
    layout.update(
        width=min(int(680 * scale), width or 10**6),
        height=min(int(560 * scale), height or 10**6),
        clickmode="event+select",
        legend=dict(title=dict(text="layer"), itemdoubleclick="toggleothers"),
        xaxis=clean_axis(title=dict(text="MDS 1"), showticklabels=False, showgrid=True),
        yaxis=clean_axis(title=dict(text="MDS 2"), showticklabels=False, showgrid=True, scaleanchor="x", scaleratio=1),
    )
    return go.Figure(traces, layout)


# ---- what masking heads changes -------------------------------------------------------------------


def ablation_figure(
    hidden_cosine: np.ndarray,
    attention_change: np.ndarray,
    embedding_cosine: float,
    masked: np.ndarray,
    font_size: int = 12,
) -> go.Figure:
    """Masking heads: how far each layer's hidden states move, and how each head's attention changes.

    hidden_cosine is (n_layers + 1,): the cosine between the masked and unmasked run's hidden
    states after the embeddings (0) and after each layer. attention_change is (n_layers, H): each
    head's mean |Δ attention|. masked is a boolean (n_layers, H) array, or (k, 2) integer
    (layer, head) pairs; masked heads get an X. The title gives embedding_cosine, the cosine of
    the two runs' mean-pooled sentence embeddings.
    """
    hidden_cosine = np.asarray(hidden_cosine, dtype=float)
    change = np.asarray(attention_change, dtype=float)
    if change.ndim != 2 or hidden_cosine.shape != (change.shape[0] + 1,):
        raise ValueError(
            f"expected hidden_cosine (n_layers + 1,) and attention_change (n_layers, H), "
            f"got {hidden_cosine.shape} and {change.shape}"
        )
    n_layers, n_heads = change.shape
    marked_layers, marked_heads = _masked_heads(masked, n_layers, n_heads)
    cell_px = max(28, round(font_size * 2.4))
    line_px, gap_px = max(300, font_size * 26), font_size * 5
    grid_px = n_heads * cell_px
    fig = make_subplots(
        rows=1, cols=2, column_widths=[line_px, grid_px], horizontal_spacing=gap_px / (line_px + gap_px + grid_px)
    )
    stages = ["embeddings"] + [f"after L{layer}" for layer in range(n_layers)]
    fig.add_trace(
        go.Scatter(
            x=list(range(n_layers + 1)),
            y=hidden_cosine,
            mode="lines+markers",
            text=stages,
            name="hidden-state cosine",
            marker=dict(color=PROB_COLOUR),
            hovertemplate="%{text}: cosine %{y:.4f}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    # hover from text, not "L%{y}": %{y} reads the axis's tick label, which is already "L3"
    cells = [
        [f"{head_label(layer, head)}: mean |Δ attention| {change[layer, head]:.4f}" for head in range(n_heads)]
        for layer in range(n_layers)
    ]
    fig.add_trace(
        go.Heatmap(
            z=change,
            x=list(range(n_heads)),
            y=list(range(n_layers)),
            xgap=2,
            ygap=2,
            colorscale=SEQUENTIAL,
            zmin=0.0,
            zmax=float(np.nanmax(change, initial=0.0)) or 1.0,
            name="mean |Δ attention|",
            hovertext=cells,
            hovertemplate="%{hovertext}<extra></extra>",
            colorbar=dict(title=dict(text="mean |Δ attention|", side="right"), thickness=max(10, font_size)),
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=marked_heads,
            y=marked_layers,
            mode="markers",
            name="masked",
            marker=dict(
                symbol="x", size=max(10, round(cell_px * 0.45)), color=MARK_COLOUR, line=dict(color="white", width=1)
            ),
            hovertext=[f"{head_label(layer, head)}: masked" for layer, head in zip(marked_layers, marked_heads)],
            hovertemplate="%{hovertext}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    title = (
        f"{len(marked_heads)} head{'s' if len(marked_heads) != 1 else ''} masked: "
        f"sentence embedding cosine {embedding_cosine:.4f} (mean-pooled)"
    )
    _ablation_layout(fig, n_layers, n_heads, cell_px, line_px + gap_px + grid_px, title, font_size)
    return fig


def _masked_heads(masked: np.ndarray, n_layers: int, n_heads: int) -> tuple[list[int], list[int]]:
    masked = np.asarray(masked)
    if masked.dtype == bool:
        if masked.shape != (n_layers, n_heads):
            raise ValueError(f"a boolean masked must be ({n_layers}, {n_heads}), got {masked.shape}")
        pairs = np.argwhere(masked)
    else:
        pairs = masked.reshape(-1, 2).astype(int) if masked.size else np.zeros((0, 2), dtype=int)
        if masked.size and masked.shape[-1] != 2:
            raise ValueError(f"masked heads must be (k, 2) (layer, head) pairs, got {masked.shape}")
    if ((pairs < 0) | (pairs >= [n_layers, n_heads])).any():
        raise ValueError(f"a masked head is outside {n_layers} layers × {n_heads} heads")
    return pairs[:, 0].tolist(), pairs[:, 1].tolist()


def _ablation_layout(
    fig: go.Figure, n_layers: int, n_heads: int, cell_px: int, plot_w: int, title: str, font_size: int
) -> None:
    margin = dict(l=font_size * 5, r=COLORBAR_PX + font_size, t=round(font_size * 2.2) + 16, b=font_size * 5)
    fig.update_layout(base_layout(font_size, title))
    fig.update_layout(
        margin=margin,
        width=plot_w + margin["l"] + margin["r"],
        height=max(260, n_layers * cell_px) + margin["t"] + margin["b"],
    )
    fig.update_xaxes(
        clean_axis(
            tickmode="array",
            tickvals=list(range(n_layers + 1)),
            ticktext=["emb"] + [f"L{layer}" for layer in range(n_layers)],
            title=dict(text="hidden state after"),
            showgrid=True,
        ),
        row=1,
        col=1,
    )
    fig.update_yaxes(clean_axis(title=dict(text="cosine to the unmasked run"), showgrid=True), row=1, col=1)
    fig.update_xaxes(
        clean_axis(
            tickmode="array",
            tickvals=list(range(n_heads)),
            ticktext=[f"H{head}" for head in range(n_heads)],
            title=dict(text="head"),
            constrain="domain",
        ),
        row=1,
        col=2,
    )
    fig.update_yaxes(
        clean_axis(
            tickmode="array",
            tickvals=list(range(n_layers)),
            ticktext=[f"L{layer}" for layer in range(n_layers)],
            autorange="reversed",
            scaleanchor="x2",
            scaleratio=1,
            constrain="domain",
        ),
        row=1,
        col=2,
    )


# ---- a sortable table of the heads -----------------------------------------------------------------


def stats_frame(stats: dict[str, np.ndarray], labels: np.ndarray | None = None) -> "pd.DataFrame":
    """One row per head (layer-major) with its layer, head, pattern (when labels are given) and
    each statistic of attention.analysis.head_stats, in the dict's order, rounded to
    STAT_DECIMALS places. Every statistic, and labels, is (n_layers, H)."""
    if not stats:
        raise ValueError("stats_frame needs at least one statistic")
    shape = np.shape(next(iter(stats.values())))
    arrays = {name: np.asarray(values, dtype=float) for name, values in stats.items()}
    if len(shape) != 2 or any(a.shape != shape for a in arrays.values()):
        raise ValueError(f"every statistic must be (n_layers, H); got {[a.shape for a in arrays.values()]}")
    if labels is not None and np.shape(labels) != shape:
        raise ValueError(f"labels have shape {np.shape(labels)}, statistics {shape}")
    n_layers, n_heads = shape
    columns = {"layer": np.repeat(np.arange(n_layers), n_heads), "head": np.tile(np.arange(n_heads), n_layers)}
    if labels is not None:
        columns["pattern"] = np.asarray(labels, dtype=str).ravel()
    columns.update({name: values.ravel().round(STAT_DECIMALS) for name, values in arrays.items()})
    import pandas as pd  # here, not at the top: it adds about 0.4 s to the app's cold start

    return pd.DataFrame(columns)


# ---- sizes ------------------------------------------------------------------------------------------


def _row_px(n_rows: int, font_size: int) -> float:
    """Height of one token row: room for a label, thinner when the rows would pass MAX_ROWS_PX."""
    return min(float(max(14, round(font_size * 1.5))), MAX_ROWS_PX / max(n_rows, 1))


def _label_px(labels: Sequence[str], font_size: int) -> int:
    """Approximate pixel width of the longest (escaped) label as shown."""
    longest = max((len(html.unescape(label)) for label in labels), default=0)
    return int(longest * font_size * CHAR_WIDTH) + 10
