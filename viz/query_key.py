"""The query·key view's figure: one head's query against every key, from the vectors to the probabilities."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz._style import ACCENT, TITLED_COLORBAR_PX, base_layout, clean_axis
from viz._text import escape_all, position_labels, shown_escaped
from viz.heatmap import MIN_TICK_PX, _label_px

if TYPE_CHECKING:  # for the annotations only: viz needs no torch at run time
    from attention.analysis.query_key import QueryKey

DIVERGING = "RdBu_r"  # vector components and products: red above zero, blue below, white at zero
SCORE_COLOUR, PROB_COLOUR = "#9e9e9e", ACCENT
MAX_ROWS_PX = 1100  # token rows beyond this height get thinner, and only every k-th is labelled


def query_key_figure(
    qk: "QueryKey",
    tokens: Sequence[str],
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """The query·key view of one head and one query (an attention.analysis.query_key.QueryKey), at
    most ``width`` px wide and ``height`` px tall when given (the bars and rows give way), its row
    labels at least ``min_label`` px when given (every k-th token on thin rows).

    Four panels share the key-token rows (first token on top): the key vectors k (S × d), the
    products q × k (S × d) under the query vector q as a 1 × d strip, the scaled scores
    Σ (q × k) · scaling, and the softmax probabilities. k and q share one symmetric colour
    scale, q × k another. Rows are categorical "token·i" labels (the raw pieces, named in the hover), so repeated
    tokens keep their own rows; their labels and the title show the pieces as text (``readable``, half a character
    of a ``byte_level`` tokenizer's as its bytes), escaped.
    """
    S, d = qk.k.shape
    if len(tokens) != S:
        raise ValueError(f"{len(tokens)} tokens given for {S} keys")
    rows = position_labels(escape_all(tokens))
    names = shown_escaped(escape_all(tokens), byte_level)  # as drawn: what is sized is what is shown
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
    title = (
        f"Layer {qk.layer}, head {qk.head}: query “{names[qk.query].strip()}” (position {qk.query}) against every key"
    )
    _query_key_layout(fig, qk, rows, names, (row_px, plot_w, plot_h), margin, title, font_size, min_label)
    return fig


def _query_key_margin(names: list[str], row_px: float, font_size: int, min_label: int | None) -> dict:
    """Room for the row labels, the colour bars, the title and the panel titles (up to three lines) under the
    panels."""
    size = _row_ticks(row_px, font_size, min_label)[1]
    return {
        "l": _label_px(names, size) + 10,
        "r": TITLED_COLORBAR_PX,
        "t": round(font_size * 1.8) + 16,
        "b": round(font_size * 6.3),
    }


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
        tickmode="array",
        tickvals=rows[::stride],
        ticktext=names[::stride],
        tickfont=dict(size=tick_size),
        row=2,
        col=1,
    )
    fig.update_yaxes(
        clean_axis(type="category", tickmode="array", tickvals=[rows[qk.query]], ticktext=["q"]), row=1, col=2
    )
    # short lines: side by side, a longer line ran into its neighbour's ("…scalingprobability" on narrow bars)
    titles = ["k: key vectors<br>(dims)", "q × k<br>(dims)", "score:<br>Σ q × k<br>· scaling", "softmax<br>probability"]
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


def _row_px(n_rows: int, font_size: int) -> float:
    """Height of one token row: room for a label, thinner when the rows would pass MAX_ROWS_PX."""
    return min(float(max(14, round(font_size * 1.5))), MAX_ROWS_PX / max(n_rows, 1))
