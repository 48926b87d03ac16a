"""The rollout view's figure: a layer's raw attention beside its rollout or flow, on one colour scale."""

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz._style import SEQUENTIAL, TITLED_COLORBAR_PX, base_layout, clean_axis
from viz._text import escape_all, position_labels, shown_escaped
from viz.heatmap import FIGURE_PX, MIN_CELL_PX, _label_px, column_ticks, row_ticks


def attention_pair(
    raw: np.ndarray,
    derived: np.ndarray,
    labels: Sequence[str],
    derived_title: str,
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
    raw_title: str = "Attention, mean over heads",
    byte_level: bool = False,
) -> go.Figure:
    """A layer's head-averaged attention (or what ``raw_title`` names) beside rollout or flow, on the same token
    axes.

    raw and derived are (T, T) with rows = positions (first on top) and columns = tokens; both
    maps share one colour scale from 0 to the larger maximum, so equal colours mean equal values.
    Axes are categorical "token·i" labels (the raw pieces, named in the hover), so repeated tokens stay distinct;
    their tick labels the pieces as text (``readable``, half a character of a ``byte_level`` tokenizer's as its
    bytes), escaped.
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
    cats = position_labels(escape_all(labels))
    names = shown_escaped(escape_all(labels), byte_level)  # as drawn: what is sized is what is shown
    stacked = height is None and pair_stacked(labels, font_size, width, byte_level)
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
        subplot_titles=[raw_title, derived_title],
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


def pair_stacked(labels: Sequence[str], font_size: int, width: int | None = None, byte_level: bool = False) -> bool:
    """Whether ``attention_pair`` draws its maps one above the other: side by side within ``width``,
    their cells would be thinner than ``MIN_CELL_PX`` (or than they would be anyway)."""
    names = shown_escaped(escape_all(labels), byte_level)
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
    fixed = _label_px(names, font_size) + font_size * 2 + 10 + TITLED_COLORBAR_PX
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
        "r": TITLED_COLORBAR_PX,
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
