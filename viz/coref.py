"""Coreference scores per head on the layer × head grid: one value per head, or which heads flip between twins
(the ranking against baselines is viz/coref_ranking.py)."""

import numpy as np
import plotly.graph_objects as go

from viz._style import HIGHLIGHT, KEEP_OPACITY, SEQUENTIAL, base_layout, layer_head_axes, legend_swatch
from viz._text import escape, head_label
from viz.heatmap import FIGURE_PX, stacked_stride

DIVERGING = "RdBu"  # red below zero, blue above: blue means "towards the answer" as in accuracy
MIN_MARGIN_RANGE = 0.05
MIN_GRID_CELL_PX = 38  # holds "+0.41" in 10 px text
# a row of a grid drawn to a height budget (presentation mode: a 30-layer model's grid on the first screen), still
# holding a 10 px value; where rows are shorter than a layer's label, every k-th layer is labelled
MIN_GRID_ROW_PX = 14
# flip_grid classes, in z order: (name, colour)
FLIP_CLASSES = (
    ("same choice", "#dcdcdc"),
    ("choice flips", "#9ecae1"),
    ("choice flips, right on both", "#08519c"),
)
SCALE_TITLES = {
    "accuracy": "accuracy",
    "margin": "margin",
    "specificity": "specificity",
    "difference": "A − B",
    "correlation": "r",
    "share": "share of texts",
    "entropy": "entropy (nats)",
}
KINDS = tuple(SCALE_TITLES)
UNSIGNED = ("accuracy", "share", "entropy")  # written without a sign
_HIDDEN = dict(selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0)))


def head_grid(
    values: np.ndarray,
    title: str | None = None,
    *,
    kind: str = "accuracy",
    highlight: tuple[int, int] | None = None,
    marked: np.ndarray | None = None,
    font_size: int = 14,
    width: int | None = None,
    height: int | None = None,
    notes: np.ndarray | None = None,
) -> go.Figure:
    """One value per head of ``values [n_layers, n_heads]`` as a labelled heatmap.

    Rows are layers ("L0" on top), columns heads ("H0", ...); each cell shows
    its value. ``kind="accuracy"`` colours [0, 1] on a sequential scale;
    ``kind="margin"`` colours a range symmetric about 0 on a diverging scale
    (blue: more attention to the answer than to any other candidate), and
    ``kind="specificity"`` (the margin once each candidate's attention from the
    average token is taken off) the same way;
    ``kind="difference"`` (two accuracies, A − B) likewise, blue where A is
    higher; ``kind="correlation"`` colours [−1, 1] on the diverging scale;
    ``kind="share"`` (a share of texts) colours [0, 1] as accuracy does, and
    ``kind="entropy"`` (nats) from 0 to its largest value, sequentially.
    ``highlight`` outlines one head, ``marked`` (bool, same shape) puts a
    star in the corner of its True cells. An invisible marker per cell
    carries ``customdata=[layer, head]`` for click selection. Cells shrink,
    down to ``MIN_GRID_CELL_PX``, for the figure to fit ``width`` px
    (default ``FIGURE_PX``); their text shrinks with them. ``notes`` (str,
    same shape) follow each head's value in its hover, e.g. "6 of 9, [0.35, 0.88]".
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"expected values [n_layers, n_heads], got shape {values.shape}")
    if kind not in KINDS:
        raise ValueError(f"kind should be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    n_layers, n_heads = values.shape
    _check_head(highlight, n_layers, n_heads)
    if marked is not None and np.shape(marked) != values.shape:
        raise ValueError(f"marked has shape {np.shape(marked)}, values {values.shape}")

    labels = [[_format(v, kind) for v in row] for row in values]
    right = _colorbar_px(font_size)
    cell_px = _fitted_cell_px(n_heads, font_size, width, _left_px(font_size) + right)
    row_px = cell_px
    if height is not None:  # a height budget (presentation mode): the rows shrink to fit it, the columns stay
        row_px = int(max(MIN_GRID_ROW_PX, min(cell_px, (height - _top_px(font_size, title) - 10) // max(n_layers, 1))))
    traces = [_value_heatmap(values, labels, kind, font_size, _cell_font(font_size, cell_px, row_px))]
    if marked is not None:
        traces.append(_marks(np.asarray(marked, dtype=bool), min(cell_px, row_px)))
    hovers = [
        [
            f"{head_label(layer, head)}: {kind} {labels[layer][head]}"
            + ("" if notes is None else f", {notes[layer][head]}")
            for head in range(n_heads)
        ]
        for layer in range(n_layers)
    ]
    traces.append(_click_markers(hovers, min(cell_px, row_px)))
    layout = _grid_layout(n_layers, n_heads, cell_px, title, font_size, right=right, row_px=row_px)
    if highlight is not None:  # crimson would hide among the red cells of a margin grid
        layout["shapes"] = _outline(*highlight, colour=HIGHLIGHT if kind == "accuracy" else "#111111")
    return go.Figure(traces, layout)


def flip_grid(
    flips: np.ndarray,
    right_a: np.ndarray,
    right_b: np.ndarray,
    font_size: int = 14,
    title: str | None = None,
    width: int | None = None,
) -> go.Figure:
    """Which heads change their choice between two twin sentences.

    All arrays are bool ``[n_layers, n_heads]``. Each head falls in one of
    three classes (``FLIP_CLASSES``): "choice flips, right on both", "choice
    flips" (right on at most one twin) and "same choice". Layout and click
    markers as in ``head_grid``; the legend names the classes, beside the
    grid, or under it when the figure would be wider than ``width`` px
    (default ``FIGURE_PX``).
    """
    flips, right_a, right_b = (np.asarray(a, dtype=bool) for a in (flips, right_a, right_b))
    if flips.ndim != 2 or not flips.shape == right_a.shape == right_b.shape:
        raise ValueError(
            f"expected three [n_layers, n_heads] arrays, got {flips.shape}, {right_a.shape}, {right_b.shape}"
        )
    n_layers, n_heads = flips.shape
    classes = flips.astype(int) + (flips & right_a & right_b)  # 0 same, 1 flips, 2 flips and right
    colours = [colour for _, colour in FLIP_CLASSES]
    cell_px = _fitted_cell_px(n_heads, font_size, width, _left_px(font_size) + 10)
    heatmap = go.Heatmap(
        z=classes,
        x=list(range(n_heads)),
        y=list(range(n_layers)),
        zmin=0,
        zmax=len(FLIP_CLASSES) - 1,
        colorscale=[[i / (len(colours) - 1), c] for i, c in enumerate(colours)],
        showscale=False,
        hoverinfo="skip",
        xgap=2,
        ygap=2,
    )
    hovers = [
        [f"{head_label(layer, head)}: {FLIP_CLASSES[c][0]}" for head, c in enumerate(row)]
        for layer, row in enumerate(classes)
    ]
    swatches = [
        legend_swatch(name, colour, colour, size=font_size)
        for name, colour in reversed(FLIP_CLASSES)  # strongest first
    ]
    legend_px = round(font_size * 0.6 * max(len(n) for n, _ in FLIP_CLASSES)) + 3 * font_size
    width = FIGURE_PX if width is None else width
    below = n_heads * cell_px + _left_px(font_size) + legend_px + 10 > width
    layout = _grid_layout(n_layers, n_heads, cell_px, title, font_size, right=10 if below else legend_px)
    legend = dict(x=1, xanchor="left", y=1, yanchor="top", itemclick=False, itemdoubleclick=False)
    if below:  # one row per class under the grid
        legend.update(x=0, y=0, yanchor="top", xanchor="left")
        rows_px = round(font_size * 1.6) * len(FLIP_CLASSES) + 10
        layout["margin"]["b"] += rows_px
        layout["height"] += rows_px
    layout.update(showlegend=True, legend=legend)
    return go.Figure([heatmap, *swatches, _click_markers(hovers, cell_px)], layout)


# ---- shared by the grids -----------------------------------------------------


def _cell_px(font_size: int) -> int:
    """Cells wide enough for a signed value like "+0.41" in the cell font."""
    return max(46, round(font_size * 3.3))


def _fitted_cell_px(n_heads: int, font_size: int, width: int | None, margins: int) -> int:
    """``_cell_px``, or less (not under ``MIN_GRID_CELL_PX``) for ``n_heads`` cells and ``margins`` to fit ``width``."""
    room = ((FIGURE_PX if width is None else width) - margins - 10) // max(n_heads, 1)
    return int(max(MIN_GRID_CELL_PX, min(_cell_px(font_size), room)))


def _cell_font(font_size: int, cell_px: int | None = None, row_px: int | None = None) -> int:
    """The value's font: 0.8 of the text, and small enough for "+0.41" (5 glyphs) to fit the cell (``cell_px`` wide,
    ``row_px`` high)."""
    size = max(10, round(font_size * 0.8))
    if cell_px is not None:
        size = max(10, min(size, int((cell_px - 8) / (5 * 0.6))))
    return size if row_px is None else max(10, min(size, row_px - 4))


def _top_px(font_size: int, title: str | None) -> int:
    """Room above a grid: the heads' labels, and the title's line where there is one."""
    return round(font_size * 1.7) + (round(font_size * 1.6) + 16 if title else 8)


def _left_px(font_size: int) -> int:
    return round(font_size * 2.5) + 10


def _colorbar_px(font_size: int) -> int:
    return round(font_size * 5.5) + 20


def _value_heatmap(
    values: np.ndarray, labels: list[list[str]], kind: str, font_size: int, cell_font: int
) -> go.Heatmap:
    n_layers, n_heads = values.shape
    return go.Heatmap(
        z=values,
        x=list(range(n_heads)),
        y=list(range(n_layers)),
        text=labels,
        texttemplate="%{text}",  # plotly picks dark or light text per cell colour
        textfont=dict(size=cell_font),
        hoverinfo="skip",  # the click markers above carry the hover
        xgap=2,
        ygap=2,
        # title on the side: on top it meets the top tick label
        colorbar=dict(title=dict(text=SCALE_TITLES[kind], side="right"), thickness=max(12, font_size)),
        **_colour_range(values, kind),
    )


def _format(value: float, kind: str) -> str:
    if np.isnan(value):
        return "n/a"
    if kind in UNSIGNED:
        return f"{value:.2f}"
    return f"{value:+.2f}".replace("-", "−")  # a real minus, as wide as the plus


def _colour_range(values: np.ndarray, kind: str) -> dict:
    if kind in ("accuracy", "share"):
        return dict(colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0)
    if kind == "entropy":
        finite = values[np.isfinite(values)]
        top = float(finite.max()) if finite.size else 0.0
        return dict(colorscale=SEQUENTIAL, zmin=0.0, zmax=max(MIN_MARGIN_RANGE, top))
    if kind == "correlation":
        return dict(colorscale=DIVERGING, zmid=0.0, zmin=-1.0, zmax=1.0)
    finite = np.abs(values[np.isfinite(values)])
    m = max(MIN_MARGIN_RANGE, float(finite.max()) if finite.size else 0.0)
    return dict(colorscale=DIVERGING, zmid=0.0, zmin=-m, zmax=m)


def _check_head(head: tuple[int, int] | None, n_layers: int, n_heads: int) -> None:
    if head is not None and not (0 <= head[0] < n_layers and 0 <= head[1] < n_heads):
        raise ValueError(f"head {tuple(head)} is outside {n_layers} layers × {n_heads} heads")


def _click_markers(hovers: list[list[str]], cell_px: int) -> go.Scatter:
    """Invisible square markers covering each cell, carrying ``[layer, head]``."""
    heads = [(layer, head) for layer, row in enumerate(hovers) for head in range(len(row))]
    return go.Scatter(
        x=[head for _, head in heads],
        y=[layer for layer, _ in heads],
        customdata=[[layer, head] for layer, head in heads],  # plain lists for click events
        hovertext=[hovers[layer][head] for layer, head in heads],
        hovertemplate="%{hovertext}<extra></extra>",
        mode="markers",
        marker=dict(symbol="square", size=cell_px * 0.9, color="rgba(0,0,0,0)"),
        showlegend=False,
        **_HIDDEN,  # a click selects a head without dimming or drawing anything
    )


def _marks(marked: np.ndarray, cell_px: int) -> go.Scatter:
    """A small star in the top-right corner of each marked cell, clear of its value."""
    layers, heads = np.nonzero(marked)
    return go.Scatter(
        x=heads + 0.35,
        y=layers - 0.33,
        mode="markers",
        marker=dict(symbol="star", size=max(9, cell_px * 0.2), color="#111111", line=dict(color="white", width=1)),
        hoverinfo="skip",  # clicks go to the cell's own marker
        showlegend=False,
        **KEEP_OPACITY,
    )


def _outline(layer: int, head: int, colour: str) -> list[dict]:
    """A frame around one cell on a white halo, so it stands out on dark cells too."""
    box = dict(type="rect", xref="x", yref="y", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5)
    return [{**box, "line": dict(color="white", width=7)}, {**box, "line": dict(color=colour, width=3)}]


def _grid_layout(
    n_layers: int, n_heads: int, cell_px: int, title: str | None, font_size: int, right: int, row_px: int | None = None
) -> dict:
    """Cells ``cell_px`` wide and ``row_px`` high (square by default), heads labelled on top, layers down the side,
    layer 0 first; where a row is lower than a label's line, every k-th layer is labelled (the hover names each)."""
    row_px = cell_px if row_px is None else row_px
    layout = base_layout(font_size, escape(title) if title else None)
    top = _top_px(font_size, title)
    left = _left_px(font_size)
    every = stacked_stride(row_px, font_size)
    y: dict[str, object] = dict(ticklabelstandoff=round(font_size / 3), scaleratio=row_px / cell_px)
    if every > 1:
        y.update(tickvals=list(range(0, n_layers, every)), ticktext=[f"L{la}" for la in range(0, n_layers, every)])
    layout.update(
        width=n_heads * cell_px + left + right + 10,
        height=n_layers * row_px + top + 10,
        margin=dict(l=left, r=right, t=top, b=10),
        clickmode="event+select",
        dragmode=False,
        **layer_head_axes(n_layers, n_heads, y=y),
    )
    return layout
