"""The tensor of one shape-flow step: a 2-D slice of a recorded tensor as a heatmap, sized to its column."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import SEQUENTIAL, TITLE_GLYPH, base_layout, clean_axis, title_room
from viz._text import escape, escape_all, position_labels, shown_escaped
from viz.heatmap import FIGURE_PX, MIN_CELL_PX, SLACK_PX, row_ticks, token_grid_layout

DIVERGING = "RdBu_r"
EMPTY = "#d1d5db"  # cells of −∞ (dropped by the mask)


def tensor_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str | None = None,
    font_size: int = 14,
    kind: str = "values",
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """One 2-D slice of a recorded tensor; rows top to bottom; ``width`` px wide (default ``FIGURE_PX``)
    and, when ``height`` is given, at most that tall (rows thin to fit it). With ``min_label`` (a
    presentation) every row is labelled whose label fits at ``min_label`` px or more, as the head
    view decides (``viz.heatmap.row_ticks``). A title too wide for ``width`` breaks after its commas,
    and a part still too wide is set smaller (never under ``min_label``, or 12 px).

    ``kind="values"``: a diverging scale centred on 0 (Q, K, V, scores, outputs);
    ``kind="probs"``: a sequential [0, 1] scale (probabilities, the mask). −∞ (masked scores)
    is drawn as an empty grey cell, named in the colour bar's title. Labels default to indexes
    "0".."n-1", shown as text (``readable``: "Ġthe" as " the", half a character of a ``byte_level``
    tokenizer's as its bytes); each row and column is its own category "label·i" (the raw piece, in the
    hover), so repeated tokens keep their own
    row or column and the hover names both. Labels are thinned for the cells' width and height, so
    no two touch. Nothing is sent per cell but the value (float32, base64 in the JSON): a 512 × 512
    map stays about 1 MB.
    """
    if kind not in ("values", "probs"):
        raise ValueError(f'kind must be "values" or "probs", got {kind!r}')
    raw = np.asarray(matrix, dtype=float)
    if raw.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {raw.shape}")
    n_rows, n_cols = raw.shape
    rows = escape_all(row_labels) if row_labels is not None else [str(i) for i in range(n_rows)]
    cols = escape_all(col_labels) if col_labels is not None else [str(i) for i in range(n_cols)]
    if (len(rows), len(cols)) != raw.shape:
        raise ValueError(f"matrix {raw.shape} does not match {len(rows)} row and {len(cols)} column labels")
    dropped = np.isneginf(raw)
    z = np.where(dropped, np.nan, raw).astype(np.float32)  # 4 bytes a cell; −∞ an empty cell
    row_cats, col_cats = position_labels(rows), position_labels(cols)  # the raw pieces, for the hover
    row_text, col_text = shown_escaped(rows, byte_level), shown_escaped(cols, byte_level)  # sized as drawn
    heatmap = go.Heatmap(
        z=z,
        x=col_cats,
        y=row_cats,
        hoverongaps=False,
        hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>",
        colorbar=dict(thickness=14, title=dict(text=_legend_title(kind, bool(dropped.any())))),
        **_colour_scale(z, kind),
    )
    width = FIGURE_PX if width is None else width
    left, right = tensor_margins(row_text, font_size)
    x_ticks = _ticks(col_text, width - left - right, font_size, across=True, categories=col_cats)
    row_px = min(28.0, max(3.0, 700 / n_rows))
    lines, title_size = fitted_title(title, width, font_size, min_label) if title else ([], 0)
    top = (title_size * 1.35 * len(lines) + 0.6 * font_size if title else 0) + x_ticks.pop("label_px") + 10
    if height is not None:
        row_px = max(1.0, min(row_px, (height - top - 20) / n_rows))
    layout = base_layout(font_size, "<br>".join(escape(line) for line in lines) if title else None)
    if title:
        # plotly sets each line of a title of several lines at its own baseline, and puts the first on the
        # anchor (a one-line title hangs from it): lower it by a line's ascent, or its top is cut off
        layout["title"].update(
            font={"size": title_size},
            x=0,
            xref="container",
            automargin=False,
            pad={"t": 8 + (title_size if len(lines) > 1 else 0), "l": 8},
        )
    if min_label is None:
        y_ticks = _ticks(row_text, n_rows * row_px, font_size, across=False, categories=row_cats)
        y_ticks.pop("label_px")
    else:
        fit = row_ticks(row_text, row_px, font_size, min_label)
        y_ticks = {
            "tickmode": "array",
            "tickvals": row_cats[:: fit.stride],
            "ticktext": row_text[:: fit.stride],
            "tickfont": {"size": fit.size},
            "range": [n_rows - 0.5, -0.5],
        }
    # a short figure's colour bar keeps its tick labels a line and a half apart
    heatmap.colorbar.nticks = max(4, int(n_rows * row_px / (1.5 * font_size)))
    layout.update(
        width=width,
        height=int(n_rows * row_px + top + 20),
        margin=dict(l=left, r=right, t=int(top), b=10),
        plot_bgcolor=EMPTY,  # shows through the empty (−∞) cells only
        xaxis=clean_axis(side="top", type="category", **x_ticks),
        yaxis=clean_axis(type="category", **y_ticks),
    )
    return go.Figure(heatmap, layout)


def fitted_title(title: str, width: int, font_size: int, min_label: int | None = None) -> tuple[list[str], int]:
    """A title's lines (unescaped) and font size for a figure ``width`` px wide: broken after its
    commas where a line would not fit, and set smaller while its widest part does not."""
    size = round(font_size * 1.2)
    room = max(1, title_room(width) / (size * TITLE_GLYPH))
    lines: list[str] = []
    for part in title.split(", "):
        if lines and len(lines[-1]) + 2 + len(part) <= room:
            lines[-1] += ", " + part
        else:
            lines.append(part)
    if len(lines) > 1:
        lines = [line + ("," if k < len(lines) - 1 else "") for k, line in enumerate(lines)]
    widest = max(len(line) for line in lines)
    if widest > room:
        size = max(min_label or 12, int(title_room(width) / (widest * TITLE_GLYPH)))
    return lines, size


def tensor_margins(row_labels: Sequence[str], font_size: int) -> tuple[int, int]:
    """Left margin (the row labels) and right margin (the colour bar and its title) in px."""
    longest = max((len(html.unescape(s)) for s in row_labels), default=1)
    return int(longest * 0.62 * font_size) + 20, int(font_size * 4.5) + 25


def tensor_fits(tokens: Sequence[str], font_size: int, width: int) -> bool:
    """Whether a token × token tensor keeps columns of at least ``MIN_CELL_PX`` in ``width`` px."""
    left, right = tensor_margins(escape_all(tokens), font_size)
    return (width - left - right) / max(len(tokens), 1) >= MIN_CELL_PX


def _colour_scale(z: np.ndarray, kind: str) -> dict:
    if kind == "probs":
        return dict(colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0)
    bound = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 0.0
    bound = bound or 1.0
    return dict(colorscale=DIVERGING, zmid=0.0, zmin=-bound, zmax=bound)


def _legend_title(kind: str, dropped: bool) -> str:
    return ("weight" if kind == "probs" else "value") + ("<br>grey: −∞" if dropped else "")


def _ticks(labels: list[str], px: float, fs: int, across: bool, categories: list[str] | None = None) -> dict:
    """``labels`` (escaped, as shown) at positions every k-th (k = 1, 2, 5, 10, 20...) so that labels do not
    collide; the tick values are the axis's `categories` when it has them, else integer positions.

    Row labels are stacked; column labels stand side by side when short (indexes) and are
    tilted when long (tokens), so each needs about one line height.
    """
    longest = max((len(html.unescape(s)) for s in labels), default=1)
    tilted = across and longest > 3
    # flat: the label's width; tilted by 45°: neighbours' gap across the text is spacing · sin 45°,
    # which must hold a line; stacked rows: one line
    per_label = (longest * 0.62 + 0.8) * fs if across and not tilted else (1.75 if tilted else 1.3) * fs
    room = max(1.0, px / per_label)
    stride = next(k for k in (m * 10**e for e in range(7) for m in (1, 2, 5)) if len(labels) / k <= room)
    positions = list(range(0, len(labels), stride))
    end = len(labels) - 0.5
    label_px = (longest * 0.62 * 0.71 + 1.2) * fs if tilted else 1.5 * fs  # height taken above the cells
    values = positions if categories is None else [categories[i] for i in positions]
    return dict(
        tickmode="array",
        tickvals=values,
        ticktext=[labels[i] for i in positions],
        tickangle=-45 if tilted else 0,
        range=[-0.5, end] if across else [end, -0.5],
        label_px=label_px,
    )


CLICKABLE_CELLS = 128 * 128  # a grid larger than this stays without its click layer (a point per cell)


def clickable_cells(fig: go.Figure) -> go.Figure:
    """Make a heatmap figure's cells clickable: plotly selects no heatmap cell on a click, so an invisible
    marker sits on each cell (a point that a click selects) and takes over the heatmap's hover, which it
    shows as the heatmap did. A grid of more than ``CLICKABLE_CELLS`` cells is left as it is."""
    heatmap = fig.data[0]
    z = np.asarray(heatmap.z, dtype=np.float32)
    if z.size > CLICKABLE_CELLS:
        return fig
    rows, cols = np.meshgrid(np.arange(z.shape[0]), np.arange(z.shape[1]), indexing="ij")
    cell = max(4.0, min(40.0, (fig.layout.width or FIGURE_PX) / max(z.shape[1], 1) / 2))
    x, y = np.array(heatmap.x, dtype=object)[cols.ravel()], np.array(heatmap.y, dtype=object)[rows.ravel()]
    fig.add_scatter(
        x=x,
        y=y,
        customdata=np.stack([y, x, z.ravel().astype(object)], axis=1),
        mode="markers",
        marker=dict(size=cell, symbol="square", opacity=0),
        hovertemplate=(heatmap.hovertemplate or "")
        .replace("%{y}", "%{customdata[0]}")
        .replace("%{x}", "%{customdata[1]}")
        .replace("%{z", "%{customdata[2]"),
        showlegend=False,
        name="cells",
    )
    # the markers must not widen the axes (autorange pads for them): the cells' own ranges, as drawn
    fig.update_xaxes(range=[-0.5, z.shape[1] - 0.5], autorange=False)
    fig.update_yaxes(range=[z.shape[0] - 0.5, -0.5], autorange=False)  # the first row at the top
    heatmap.hoverinfo = "skip"
    heatmap.hovertemplate = None
    return fig


def cell_px(fig: go.Figure) -> float:
    """The side of a token grid's cell as laid out (``viz.heatmap.token_grid_layout``)."""
    layout = fig.layout
    return (layout.width - layout.margin.l - layout.margin.r - SLACK_PX) / max(len(fig.data[0].x), 1)


BAR_PX = 46  # under the cells: a horizontal colour bar, its ticks and its title


def bar_under(fig: go.Figure, queries: Sequence[str], keys: Sequence[str], font_size: int, **size) -> go.Figure:
    """A token grid (``viz.head_heatmap``'s) laid out again for a narrow column: its colour bar laid flat
    under the cells instead of beside them, so the cells take the width the bar took. ``size``: the
    ``width``, ``height`` and ``min_label`` the grid was drawn for."""
    height = size.pop("height", None)
    title = fig.layout.title.text if fig.layout.title else None
    layout = token_grid_layout(
        escape_all(queries),
        escape_all(keys),
        title,
        font_size,
        right=0,  # the plot area's slack is room enough beside the last column
        height=None if height is None else height - BAR_PX,
        **size,
    )
    layout["margin"]["b"] += BAR_PX
    layout["height"] += BAR_PX
    fig.update_layout(layout)
    fig.update_traces(
        colorbar=dict(
            orientation="h",
            thickness=10,
            len=1,
            lenmode="fraction",
            x=0,
            xanchor="left",
            y=-0.02,
            yanchor="top",
            title=dict(text="weight", side="right"),
        ),
        selector=dict(type="heatmap"),
    )
    return fig
