"""A long text's maps: one head's block map (its exact means over blocks of rows and keys, the axes in token
positions), a query's whole row as a line over every key, and where a tile sits on the block map."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ._style import SEQUENTIAL, base_layout
from ._text import escape, readable
from .heatmap import CHAR_WIDTH

BAR_PX = 10  # the colour bar's thickness: drawn across, under the map, so that the map takes the column's width
MARK_SHARE = 0.02  # the tile's outline on the block map: at least this share of its side


def block_edges(length: int, n: int) -> np.ndarray:
    """Where numpy.array_split's n pieces of `length` start, and the length: (n + 1,) positions."""
    q, r = divmod(length, n)
    sizes = [q + 1] * r + [q] * (n - r)
    return np.concatenate([[0], np.cumsum(sizes)])


def block_figure(
    blocks: np.ndarray,
    tokens: Sequence[str],
    title: str,
    *,
    font_size: int = 14,
    width: int = 560,
    height: int = 560,
) -> go.Figure:
    """`blocks` (n, n): a head's map's mean over each block of rows and keys, drawn with each block at the token
    positions it covers, as large a square as `width` × `height` holds (the figure then as wide as it needs); the
    hover names its rows and keys, their first tokens, and its mean."""
    n, L = blocks.shape[0], len(tokens)
    edges = block_edges(L, n)
    centres = (edges[:-1] + edges[1:] - 1) / 2
    first = [escape(readable(tokens[int(e)])) for e in edges[:-1]]
    spans = [f"{int(a)}–{int(b) - 1}" for a, b in zip(edges[:-1], edges[1:])]
    rows, cols = (grid.ravel() for grid in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    custom = np.stack(
        [np.array(spans)[rows], np.array(spans)[cols], np.array(first)[rows], np.array(first)[cols],
         np.char.mod("%.2e", blocks.ravel())], axis=1,
    )  # fmt: skip
    tick = round(font_size * 0.85)  # positions ("2k") and the colour bar's numbers, a little smaller than the text
    left = int(tick * CHAR_WIDTH * 4) + int(font_size * 1.6) + 14  # "8.2k" and the axis title
    axis_px = tick + int(font_size * 1.6) + 12  # the key positions and their title, under the square
    top, bottom = int(font_size * 1.5) + 16, axis_px + BAR_PX + tick + 16  # the colour bar across, under them
    side = max(120, min(width - left - 16, height - top - bottom))  # the square's side
    fig = go.Figure(
        go.Heatmap(
            z=blocks,
            x=centres,
            y=centres,
            colorscale=SEQUENTIAL,
            zmin=0.0,
            colorbar=dict(
                orientation="h",
                thickness=BAR_PX,
                len=1.0,
                y=-axis_px / side,
                yanchor="top",
                ypad=0,
                tickfont=dict(size=tick),
                tickformat=".2g",
            ),  # fmt: skip
            hoverinfo="skip",
        )
    )
    # plotly selects no heatmap cell on a click: an invisible marker on each block takes the click, the drag and
    # the hover
    fig.add_trace(
        go.Scattergl(
            x=centres[cols],
            y=centres[rows],
            customdata=custom,
            mode="markers",
            marker=dict(size=max(2.0, side / n), symbol="square", opacity=0),
            hovertemplate="queries %{customdata[0]} (from “%{customdata[2]}”)<br>"
            "keys %{customdata[1]} (from “%{customdata[3]}”)<br>mean weight %{customdata[4]}<extra></extra>",
            showlegend=False,
            name="blocks",
        )
    )
    axis = dict(tickformat="~s", tickfont=dict(size=tick), nticks=6, autorange=False, constrain="domain")
    fig.update_layout(
        **{**base_layout(font_size, title), "margin": dict(l=left, r=16, t=top, b=bottom)},
        width=left + side + 16,
        height=top + side + bottom,
        xaxis=dict(axis, title="key position", range=[-0.5, L - 0.5]),
        yaxis=dict(axis, title="query position", range=[L - 0.5, -0.5], scaleanchor="x"),
    )
    return fig


def mark_tile(fig: go.Figure, rows: range, cols: range) -> go.Figure:
    """Outline the rectangle of rows and keys that the tile beside the block map shows, drawn at least
    MARK_SHARE of the map's side (a 16-token tile of 8,000 would be a dot)."""
    length = fig.layout.xaxis.range[1] + 0.5
    grow = max(0.0, MARK_SHARE * length - len(rows)) / 2, max(0.0, MARK_SHARE * length - len(cols)) / 2
    fig.add_shape(
        type="rect",
        x0=cols.start - 0.5 - grow[1],
        x1=cols.stop - 0.5 + grow[1],
        y0=rows.start - 0.5 - grow[0],
        y1=rows.stop - 0.5 + grow[0],
        line=dict(color="#e4572e", width=2),
    )
    return fig


def row_figure(row: np.ndarray, query: int, tokens: Sequence[str], *, causal: bool = False, font_size: int = 14,
               width: int = 900, height: int = 260) -> go.Figure:  # fmt: skip
    """Query `query`'s row as a line over the keys it sees (every key; on a `causal` model, those up to itself),
    the query marked: where in a long text the token looks."""
    seen = row[: query + 1] if causal else row
    text = [escape(readable(t)) for t in tokens[: len(seen)]]
    fig = go.Figure(
        go.Scattergl(
            x=np.arange(len(seen)),
            y=seen,
            mode="lines",
            line=dict(width=1.5, color="#2a6f97"),
            customdata=text,
            hovertemplate="key %{x}: “%{customdata}”<br>weight %{y:.3e}<extra></extra>",
        )
    )
    fig.add_vline(x=query, line=dict(color="#e4572e", width=1.5, dash="dot"))
    fig.add_annotation(x=query, y=1, yref="paper", text=f"query {query}", showarrow=False, xanchor="right",
                       yanchor="top", font=dict(color="#e4572e"))  # fmt: skip
    keys = f"the {len(seen):,} keys it sees" if causal else "every key"
    word = escape(readable(tokens[query]))
    fig.update_layout(
        **{
            **base_layout(font_size, f"Row of query {query}, “{word}”, over {keys}"),
            "margin": dict(l=70, r=20, t=50, b=45),
        },
        width=width,
        height=height,
        xaxis=dict(title="key position", range=[0, max(len(seen) - 1, 1)]),
        yaxis=dict(title="weight", rangemode="tozero"),
        showlegend=False,
    )
    return fig
