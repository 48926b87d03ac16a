"""Coreference scores per head: a layer × head grid, a ranking against baselines, twin flips."""

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import HIGHLIGHT, SEQUENTIAL, base_layout, clean_axis, legend_swatch
from viz._text import escape, head_label
from viz.heatmap import FIGURE_PX

DIVERGING = "RdBu"  # red below zero, blue above: blue means "towards the answer" as in accuracy
MIN_MARGIN_RANGE = 0.05
BASELINE_COLOURS = ("#d95f02", "#54278f", "#1b7837", "#333333")
BASELINE_DASHES = ("dash", "dot", "dashdot", "longdash")  # two equal baselines both show
_RANK_PLOT_PX = 560  # width of the bars' plot area
MIN_RANK_PLOT_PX = 160  # in a narrower column the figure is drawn wider than it and scaled down
MIN_GRID_CELL_PX = 38  # holds "+0.41" in 10 px text
BAR_COLOUR = "#9ecae1"
ERROR_COLOUR = "#3f3f3f"  # light, so the dashed baselines show across the bars
# flip_grid classes, in z order: (name, colour)
FLIP_CLASSES = (
    ("same choice", "#dcdcdc"),
    ("choice flips", "#9ecae1"),
    ("choice flips, right on both", "#08519c"),
)
SCALE_TITLES = {"accuracy": "accuracy", "margin": "margin", "difference": "A − B", "correlation": "r"}
KINDS = tuple(SCALE_TITLES)
_KEEP_OPACITY = dict(selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)))
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
    (blue: more attention to the answer than to any other candidate);
    ``kind="difference"`` (two accuracies, A − B) likewise, blue where A is
    higher; ``kind="correlation"`` colours [−1, 1] on the diverging scale.
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
    if height is not None:  # a height budget (presentation mode): cells shrink to fit it too
        top = round(font_size * 1.7) + (round(font_size * 1.6) + 16 if title else 8)
        cell_px = int(max(MIN_GRID_CELL_PX, min(cell_px, (height - top - 10) // max(n_layers, 1))))
    traces = [_value_heatmap(values, labels, kind, font_size, _cell_font(font_size, cell_px))]
    if marked is not None:
        traces.append(_marks(np.asarray(marked, dtype=bool), cell_px))
    hovers = [
        [
            f"{head_label(layer, head)}: {kind} {labels[layer][head]}"
            + ("" if notes is None else f", {notes[layer][head]}")
            for head in range(n_heads)
        ]
        for layer in range(n_layers)
    ]
    traces.append(_click_markers(hovers, cell_px))
    layout = _grid_layout(n_layers, n_heads, cell_px, title, font_size, right=right)
    if highlight is not None:  # crimson would hide among the red cells of a margin grid
        layout["shapes"] = _outline(*highlight, colour=HIGHLIGHT if kind == "accuracy" else "#111111")
    return go.Figure(traces, layout)


def ranked_heads(
    ranked: Sequence[tuple[int, int, float]],
    baselines: Mapping[str, float],
    top: int = 15,
    font_size: int = 14,
    title: str | None = None,
    intervals: np.ndarray | None = None,
    width: int | None = None,
) -> go.Figure:
    """The ``top`` heads of ``ranked`` ((layer, head, accuracy), best first) as bars.

    ``width`` (px) is the figure's width, the column it is drawn in (default: a
    plot area of ``_RANK_PLOT_PX``); the baseline labels are placed for it.

    ``intervals`` (low, high), each ``[n_layers, n_heads]`` (e.g. a 95%
    Clopper-Pearson interval), draws each bar's interval as an error bar
    and names it in the hover.

    The best head is the top bar, labelled "L3 H1", its accuracy written at
    the bar end. Each baseline ({name: accuracy}) is a dashed vertical line
    labelled "name 0.47" above the bars; close labels go on separate rows.
    Bars carry ``customdata=[layer, head]`` for click selection.
    """
    shown = list(ranked)[:top]
    names = [head_label(layer, head) for layer, head, _ in shown]
    accuracies = [float(acc) for _, _, acc in shown]
    extra: dict[str, object] = {"hovertemplate": "%{y}: accuracy %{x:.2f}<extra></extra>"}
    highs = None
    if intervals is not None:
        low, high = (np.asarray(a, dtype=float) for a in intervals)
        lows = [float(low[layer, head]) for layer, head, _ in shown]
        highs = [float(high[layer, head]) for layer, head, _ in shown]
        extra = dict(
            error_x=dict(
                type="data",
                symmetric=False,
                array=[h - a for h, a in zip(highs, accuracies)],
                arrayminus=[a - lo for a, lo in zip(accuracies, lows)],
                color=ERROR_COLOUR,
                thickness=1.5,
                width=max(3, font_size // 3),
            ),
            hovertext=[f"95% interval {lo:.2f}–{h:.2f}" for lo, h in zip(lows, highs)],
            hovertemplate="%{y}: accuracy %{x:.2f}, %{hovertext}<extra></extra>",
        )
    bars = go.Bar(
        x=accuracies,
        y=names,
        orientation="h",
        marker=dict(color=BAR_COLOUR),
        customdata=[[int(layer), int(head)] for layer, head, _ in shown],
        showlegend=False,
        **_KEEP_OPACITY,  # a clicked bar leaves the others as they are
        **extra,
    )
    top_px = round(font_size * 1.6) + 24 if title else 16
    left = round(font_size * 0.6 * max((len(n) for n in names), default=5) + font_size / 2) + 16
    right, bottom = round(font_size * 3), round(font_size * 3.5)  # room for "1.00", the axis title
    plot_px = _RANK_PLOT_PX if width is None else max(MIN_RANK_PLOT_PX, width - left - right)
    lines, notes, rows = _baselines(baselines, font_size, plot_px, left, right)
    top_px += rows * round(font_size * 1.5)
    layout = base_layout(font_size, escape(title) if title else None)
    layout.update(
        width=plot_px + left + right,
        height=len(shown) * max(26, round(font_size * 2)) + top_px + bottom,
        margin=dict(l=left, r=right, t=top_px, b=bottom),
        bargap=0.25,
        clickmode="event+select",
        dragmode=False,
        shapes=lines,
        annotations=notes + _bar_values(names, accuracies, font_size, highs),
        xaxis=clean_axis(range=[0, 1], dtick=0.2, showgrid=True, title=dict(text="accuracy")),
        yaxis=clean_axis(type="category", autorange="reversed", ticklabelstandoff=round(font_size / 2)),
    )
    return go.Figure([bars], layout)


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


def _cell_font(font_size: int, cell_px: int | None = None) -> int:
    """The value's font: 0.8 of the text, and small enough for "+0.41" (5 glyphs) to fit the cell."""
    size = max(10, round(font_size * 0.8))
    return size if cell_px is None else max(10, min(size, int((cell_px - 8) / (5 * 0.6))))


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
    if kind == "accuracy":
        return f"{value:.2f}"
    return f"{value:+.2f}".replace("-", "−")  # a real minus, as wide as the plus


def _colour_range(values: np.ndarray, kind: str) -> dict:
    if kind == "accuracy":
        return dict(colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0)
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
        **_KEEP_OPACITY,
    )


def _outline(layer: int, head: int, colour: str) -> list[dict]:
    """A frame around one cell on a white halo, so it stands out on dark cells too."""
    box = dict(type="rect", xref="x", yref="y", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5)
    return [{**box, "line": dict(color="white", width=7)}, {**box, "line": dict(color=colour, width=3)}]


def _grid_layout(n_layers: int, n_heads: int, cell_px: int, title: str | None, font_size: int, right: int) -> dict:
    """Square cells, heads labelled on top, layers down the side, layer 0 first."""
    layout = base_layout(font_size, escape(title) if title else None)
    top = round(font_size * 1.7) + (round(font_size * 1.6) + 16 if title else 8)
    left = _left_px(font_size)
    layout.update(
        width=n_heads * cell_px + left + right + 10,
        height=n_layers * cell_px + top + 10,
        margin=dict(l=left, r=right, t=top, b=10),
        clickmode="event+select",
        dragmode=False,
        xaxis=clean_axis(
            tickmode="array",
            tickvals=list(range(n_heads)),
            ticktext=[f"H{h}" for h in range(n_heads)],
            side="top",
            range=[-0.5, n_heads - 0.5],
            constrain="domain",
        ),
        yaxis=clean_axis(
            tickmode="array",
            tickvals=list(range(n_layers)),
            ticktext=[f"L{layer}" for layer in range(n_layers)],
            range=[n_layers - 0.5, -0.5],  # reversed: layer 0 on top
            ticklabelstandoff=round(font_size / 3),
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
        ),
    )
    return layout


# ---- ranked_heads helpers ---------------------------------------------------


def _bar_values(
    names: list[str], accuracies: list[float], font_size: int, ends: list[float] | None = None
) -> list[dict]:
    """Each value just past its bar end (or its interval's end), on white so a baseline crossing it
    leaves it legible."""
    return [
        dict(
            x=end,
            xref="x",
            y=name,
            yref="y",
            xanchor="left",
            xshift=2 if end == acc else 5,
            text=f"{acc:.2f}",
            showarrow=False,
            font=dict(size=font_size),
            bgcolor="rgba(255,255,255,0.85)",
            borderpad=1,
        )
        for name, acc, end in zip(names, accuracies, ends or accuracies)
    ]


def _baselines(
    baselines: Mapping[str, float], font_size: int, plot_px: int, left: int, right: int
) -> tuple[list[dict], list[dict], int]:
    """Dashed lines with labels above the plot, and the number of label rows.

    A label is centred on its line, slid sideways to stay inside the figure,
    and moved up a row when it would come within half a character of a label
    already placed (its width estimated generously: a label drawn over
    another is unreadable, an extra row costs little).
    """
    lines: list[dict] = []
    notes: list[dict] = []
    row_ends: list[float] = []  # right edge (px) of the last label of each row
    order = sorted(baselines.items(), key=lambda item: item[1])
    styles = {name: i for i, name in enumerate(baselines)}
    for name, value in order:
        value, style = float(value), styles[name]
        colour = BASELINE_COLOURS[style % len(BASELINE_COLOURS)]
        shown = f"{name} {value:.2f}"  # as drawn: measure before escaping
        half = len(shown) * 0.65 * font_size / 2 + font_size / 4  # half-width of the label and a gap, px
        centre = value * plot_px
        shift = max(half - left - centre, min(0.0, plot_px + right - half - centre))  # px, keeps it in the figure
        row = next((i for i, end in enumerate(row_ends) if centre + shift - half > end), len(row_ends))
        if row == len(row_ends):
            row_ends.append(-np.inf)
        row_ends[row] = centre + shift + half
        lines.append(
            dict(
                type="line",
                xref="x",
                yref="paper",
                x0=value,
                x1=value,
                y0=0,
                y1=1,
                layer="above",
                line=dict(color=colour, width=3, dash=BASELINE_DASHES[style % len(BASELINE_DASHES)]),
            )
        )
        notes.append(
            dict(
                x=value,
                xref="x",
                y=1,
                yref="paper",
                yanchor="bottom",
                xshift=shift,
                yshift=4 + row * round(font_size * 1.5),
                text=escape(shown),
                showarrow=False,
                font=dict(color=colour, size=font_size),
            )
        )
    return lines, notes, max(1, len(row_ends))
