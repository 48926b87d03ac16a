"""One attention head as a heatmap: queries on rows, keys on columns."""

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz._style import MODEBAR_PX, SEQUENTIAL, TITLE_GLYPH, base_layout, clean_axis
from viz._text import escape_all, position_labels, shown_escaped

# Axes are categorical with one "token·i" label per position, so the hover
# names both tokens without a per-cell array: L² strings would be several MB
# of JSON at 512 tokens, the two axes' labels are 2L.
HOVER = "%{y} → %{x}: %{z:.3f}<extra></extra>"
MIN_PLOT_PX, MAX_PLOT_PX, PX_PER_TOKEN = 440, 900, 28
MIN_TICK_PX = 12  # closer labels are too small to read; show every k-th instead
MIN_CELL_PX = 8  # thinner cells are slivers: such a grid is drawn across the page, not in a column
LABEL_FILL = 0.75  # a label's font size as a share of the spacing between labels (its box is ~1.2 em)
LINE_EM = 1.2  # height of a label's box, in font sizes
CHAR_WIDTH = 0.6  # average glyph width as a fraction of the font size
COLORBAR_PX, SLACK_PX = 90, 16  # right margin for the colour bar; spare width of the plot area
# The widest a figure may be when its caller does not say: the page's main column at the narrowest
# window the app is laid out for (1280 px, sidebar open), less room for a scroll bar.
FIGURE_PX = 800


@dataclass(frozen=True)
class Ticks:
    """How one axis of token cells is labelled: every ``stride``-th position, in ``size`` px text,
    at ``angle`` (column labels only), taking ``depth`` px beside the cells."""

    stride: int
    size: int
    angle: int
    depth: int


def _stride(cell_px: float, min_label: int | None) -> int:
    """Label every k-th cell: their spacing at least ``MIN_TICK_PX``, and room for ``min_label`` px text."""
    least = max(MIN_TICK_PX, (min_label or 0) / LABEL_FILL)
    return max(1, int(np.ceil(least / cell_px - 1e-9)))


def stacked_stride(cell_px: float, label_px: float) -> int:
    """Label every k-th of cells ``cell_px`` high, for labels of ``label_px`` stacked one over the next: their
    spacing at least a label's box (``LINE_EM`` of it) and ``MIN_TICK_PX``."""
    return max(1, int(np.ceil(max(MIN_TICK_PX, LINE_EM * label_px) / cell_px - 1e-9)))


def row_ticks(labels: Sequence[str], cell_px: float, font_size: int, min_label: int | None = None) -> Ticks:
    """Labels stacked down the side, never closer than ``MIN_TICK_PX`` and never taller than their spacing;
    with ``min_label`` (a presentation), every row at least as tall as a ``min_label`` px label's box
    (``LINE_EM`` of it) keeps its label, at that size or more (a stacked label needs its box's height, not
    the ``LABEL_FILL`` spacing of a tilted one)."""
    if min_label:
        stride = stacked_stride(cell_px, min_label)
        size = max(min_label, _fitted_size(cell_px * stride, font_size))
    else:
        stride = _stride(cell_px, None)
        size = _fitted_size(cell_px * stride, font_size)
    return Ticks(stride, size, 0, _label_px(labels, size))


def column_ticks(labels: Sequence[str], cell_px: float, font_size: int, min_label: int | None = None) -> Ticks:
    """Labels along the top or bottom: flat when the longest fits its spacing, else tilted by 45°
    when tilted neighbours stay apart (their gap across the text is spacing · sin 45°) and as many are
    labelled as upright, else upright, a label's box apart as rows are (``row_ticks``)."""
    stride = _stride(cell_px, min_label)
    spacing = cell_px * stride
    size = _fitted_size(spacing, font_size)
    text = _label_px(labels, size) - 10
    if text + 4 <= spacing:
        return Ticks(stride, size, 0, size * 2)
    upright = row_ticks(labels, cell_px, font_size, min_label)  # side by side, as rows stack: a box's height apart
    if spacing * 0.7 >= LINE_EM * size and stride <= upright.stride:
        return Ticks(stride, size, -45, int((text + size) * 0.75) + 10)
    return Ticks(upright.stride, upright.size, -90, _label_px(labels, upright.size))


def _fitted_size(spacing: float, font_size: int) -> int:
    return max(6, min(font_size, int(spacing * LABEL_FILL)))


def head_heatmap(
    attn: np.ndarray,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    title: str | None = None,
    *,
    zmin: float = 0.0,
    zmax: float = 1.0,
    colorscale: str = SEQUENTIAL,
    font_size: int = 14,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
    title_size: int | None = None,
    square: bool = True,
    byte_level: bool = False,
) -> go.Figure:
    """Heatmap of one head's map ``[query_pos, key_pos]``, at most ``width`` px wide
    (default ``FIGURE_PX``) and, when given, ``height`` px tall; tick labels of at least
    ``min_label`` px when given (fewer of them on small cells), half a character of a ``byte_level``
    tokenizer's labelled as its bytes (``readable``); the title in ``title_size`` px text
    (default 1.2 × ``font_size``); with ``square=False`` the columns keep the width's room where the
    height leaves the rows shorter (a map with more rows than columns, drawn across a wide screen).

    The first query is the top row. Each axis is categorical with one
    "token·i" category per position, so repeated tokens keep their own row
    and column; tick labels show only the tokens. Hover reads
    "query·i → key·j: weight". Every cell is drawn; the map is sent as
    float32. ``title`` is plotly markup and is not escaped (what-if views
    pass titles such as "What-if: causal"); tokens are.
    """
    key_tokens = query_tokens if key_tokens is None else key_tokens
    z = np.asarray(attn, dtype=np.float32)  # 4 bytes a cell, base64 in the JSON
    if z.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"map shape {z.shape} does not match {len(query_tokens)} query and {len(key_tokens)} key tokens"
        )
    queries, keys = escape_all(query_tokens), escape_all(key_tokens)
    heatmap = go.Heatmap(
        z=z,
        x=position_labels(keys),
        y=position_labels(queries),
        hovertemplate=HOVER,
        colorscale=colorscale,
        zmin=zmin,
        zmax=zmax,
        colorbar=dict(title=dict(text="weight"), thickness=14),
    )
    return go.Figure(
        heatmap,
        token_grid_layout(
            queries,
            keys,
            title,
            font_size,
            width,
            height=height,
            min_label=min_label,
            title_size=title_size,
            square=square,
            byte_level=byte_level,
        ),
    )


def token_grid_layout(
    queries: list[str],
    keys: list[str],
    title: str | None,
    font_size: int,
    width: int | None = None,
    right: int = COLORBAR_PX,
    height: int | None = None,
    min_label: int | None = None,
    title_size: int | None = None,
    square: bool = True,
    byte_level: bool = False,
) -> dict:
    """Square cells, keys along the top, first query at the top, the whole at most ``width`` px wide
    and, when given, ``height`` px tall; labels of at least ``min_label`` px when given (a presentation).

    ``queries`` and ``keys`` are escaped tokens; the axes' categories are
    their ``position_labels`` (the raw pieces, named in the hover), their labels the pieces as text
    (byte-level BPE's "Ġthe" as " the": ``readable``). Cells shrink to fit ``width`` (see
    ``grid_cell_px``); when they are thinner than ``MIN_TICK_PX`` only every
    k-th token is labelled, and column labels tilt or stand upright so that
    no two touch (``column_ticks``); hover still names every cell. ``right``
    is the margin for the colour bar or legend. The margins are sized for
    the labels and title, and the plot area is a little wider than the
    cells, so the cells fill its height and a colour bar (which spans that
    height) ends level with them. With ``square`` False, only the rows shrink to fit ``height``.
    """
    n_q, n_k = len(queries), len(keys)
    # the labels as shown (byte-level pieces as text, half a character as bytes): what is sized is what is drawn
    query_text, key_text = shown_escaped(queries, byte_level), shown_escaped(keys, byte_level)
    cell_px = col_px = grid_cell_px(query_text, key_text, font_size, width, right)  # rows' height, columns' width
    axis_title_px = int(font_size * 2)
    title_size = title_size or round(font_size * 1.2)
    title_px = int(title_size * 1.5) + 12 if title else 0
    for _ in range(12):  # the top labels' depth depends on the cells: shrink until the whole fits ``height``
        x_ticks = column_ticks(key_text, col_px, font_size, min_label)
        top = title_px + x_ticks.depth + axis_title_px + 10
        if height is None or cell_px * n_q + top + 10 <= height:
            break
        cell_px = max(0.25, min(cell_px * 0.995, (height - top - 10) / max(n_q, 1)))
        col_px = cell_px if square else col_px
    y_ticks = row_ticks(query_text, cell_px, font_size, min_label)

    layout = base_layout(font_size, title)
    if title:
        layout["title"]["font"]["size"] = title_size
    margin = dict(
        l=y_ticks.depth + axis_title_px + 10,
        r=right,
        t=title_px + x_ticks.depth + axis_title_px + 10,
        b=10,
    )
    layout.update(
        margin=margin,
        width=int(col_px * n_k) + SLACK_PX + margin["l"] + margin["r"],
        height=int(cell_px * n_q) + margin["t"] + margin["b"],
        xaxis=clean_axis(
            type="category",
            tickmode="array",
            tickvals=position_labels(keys)[:: x_ticks.stride],
            ticktext=key_text[:: x_ticks.stride],
            side="top",
            tickangle=x_ticks.angle,
            tickfont=dict(size=x_ticks.size),
            title=dict(text="key"),
            constrain="domain",
            constraintoward="left",
        ),
        yaxis=clean_axis(
            type="category",
            tickmode="array",
            tickvals=position_labels(queries)[:: y_ticks.stride],
            ticktext=query_text[:: y_ticks.stride],
            autorange="reversed",
            tickfont=dict(size=y_ticks.size),
            title=dict(text="query"),
            scaleanchor="x",
            scaleratio=cell_px / col_px,
            constrain="domain",
            constraintoward="top",
        ),
    )
    if title and _title_px(title, layout["title"]["font"]["size"]) > layout["width"] - margin["l"] - MODEBAR_PX:
        layout["title"].update(xref="container", pad=dict(t=8, l=8))  # from the figure's left edge: it fits there
    return layout


def _title_px(title: str, size: int) -> float:
    """Approximate width of a one-line title (plotly markup) as drawn."""
    return len(html.unescape(re.sub(r"<[^>]+>", "", title))) * size * TITLE_GLYPH


def grid_cell_px(
    queries: Sequence[str],
    keys: Sequence[str],
    font_size: int,
    width: int | None = None,
    right: int = COLORBAR_PX,
) -> float:
    """Side of one cell of a token grid at most ``width`` px wide (default ``FIGURE_PX``): it grows
    with the font and shrinks with the tokens (``_plot_px``), and shrinks further to fit ``width``
    less the row labels (measured at the largest font they may have), the axis title and ``right``."""
    width = FIGURE_PX if width is None else width
    n = max(len(queries), len(keys), 1)
    fixed = _label_px(queries, font_size) + int(font_size * 2) + 10 + right + SLACK_PX
    room = (width - fixed) / max(len(keys), 1)
    return max(0.25, min(_plot_px(n, font_size) / n, room))


def grid_fits(tokens: Sequence[str], font_size: int, width: int, right: int = COLORBAR_PX) -> bool:
    """Whether a square grid over ``tokens`` keeps its cells readable (``MIN_CELL_PX``, or the size
    it would have anyway) within ``width`` px; if not, draw it across the page instead."""
    names = escape_all(tokens)
    n = max(len(names), 1)
    natural = _plot_px(n, font_size) / n
    return grid_cell_px(names, names, font_size, width, right) >= min(MIN_CELL_PX, natural)


def grid_width(
    queries: Sequence[str],
    keys: Sequence[str],
    font_size: int,
    width: int,
    height: int | None = None,
    min_label: int | None = None,
    byte_level: bool = False,
) -> int:
    """Width in px of a titled heatmap over ``queries`` × ``keys`` (tokens) drawn within ``width`` (and ``height``)
    px, as ``head_heatmap`` lays it out (a ``byte_level`` tokenizer's labels as they are shown): what it leaves
    beside it on the page."""
    layout = token_grid_layout(
        escape_all(queries),
        escape_all(keys),
        "title",
        font_size,
        width,
        height=height,
        min_label=min_label,
        byte_level=byte_level,
    )
    return int(layout["width"])


def _plot_px(n_tokens: int, font_size: int = 14) -> int:
    """Side of the cell area in pixels: grows with tokens, within bounds, and with the font
    (a presentation's larger text gets larger cells)."""
    scale = max(1.0, font_size / 14)
    return int(np.clip(n_tokens * PX_PER_TOKEN * scale, MIN_PLOT_PX * scale, MAX_PLOT_PX * scale))


def _label_px(labels: Sequence[str], font_size: int) -> int:
    """Approximate pixel width of the longest (escaped) label as shown."""
    longest = max((len(html.unescape(label)) for label in labels), default=0)
    return int(longest * font_size * CHAR_WIDTH) + 10


MARK_COLOUR = "#e8590c"  # an outline that stands out on the sequential scale's pale and dark cells
DIVIDER = dict(color="#c8610c", width=2)  # where sentence B, or what a model wrote, starts


def mark_token(fig: go.Figure, index: int) -> go.Figure:
    """Outline row `index` (the token as a query) and column `index` (as a key) of a token grid over its
    cells: no fill, so every weight stays readable, and nothing over the labels."""
    n_q, n_k = (len(axis) for axis in (fig.data[0].y, fig.data[0].x))
    if not (0 <= index < n_q and index < n_k):
        raise ValueError(f"token {index} is not in a map of {n_q} × {n_k} tokens")
    line = dict(color=MARK_COLOUR, width=2)
    for name, x, y in (
        ("marked query", (-0.5, n_k - 0.5), (index - 0.5, index + 0.5)),
        ("marked key", (index - 0.5, index + 0.5), (-0.5, n_q - 0.5)),
    ):
        fig.add_shape(type="rect", name=name, x0=x[0], x1=x[1], y0=y[0], y1=y[1], line=line, layer="above")
    return fig


def dividers(first: int, n_tokens: int) -> list[dict]:
    """Two lines across a token grid of ``n_tokens`` before position ``first``: where sentence B, or what a model
    wrote, starts (as a query and as a key)."""
    edge = first - 0.5
    line = dict(type="line", xref="x", yref="y", line=DIVIDER, layer="above")
    return [
        line | dict(x0=edge, x1=edge, y0=-0.5, y1=n_tokens - 0.5),
        line | dict(x0=-0.5, x1=n_tokens - 0.5, y0=edge, y1=edge),
    ]


def mark_prompt_end(fig: go.Figure, first_new: int) -> go.Figure:
    """A head's grid of a continuation: the lines where the prompt ends and the tokens the model wrote start
    (row and column ``first_new``), named for readers of the figure."""
    n = len(fig.data[0].y)
    for shape in dividers(first_new, n):
        fig.add_shape(shape, name="prompt ends")
    return fig
