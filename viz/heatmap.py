"""One attention head as a heatmap: queries on rows, keys on columns."""

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import SEQUENTIAL, base_layout, clean_axis
from viz._text import escape_all, position_labels

# Axes are categorical with one "token·i" label per position, so the hover
# names both tokens without a per-cell array: L² strings would be several MB
# of JSON at 512 tokens, the two axes' labels are 2L.
HOVER = "%{y} → %{x}: %{z:.3f}<extra></extra>"
MIN_PLOT_PX, MAX_PLOT_PX, PX_PER_TOKEN = 440, 900, 28
MIN_TICK_PX = 12  # closer labels are too small to read; show every k-th instead
CHAR_WIDTH = 0.6  # average glyph width as a fraction of the font size
COLORBAR_PX, SLACK_PX = 90, 16  # right margin for the colour bar; spare width of the plot area


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
) -> go.Figure:
    """Heatmap of one head's map ``[query_pos, key_pos]``.

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
            f"map shape {z.shape} does not match {len(query_tokens)} query "
            f"and {len(key_tokens)} key tokens"
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
    return go.Figure(heatmap, token_grid_layout(queries, keys, title, font_size))


def token_grid_layout(
    queries: list[str], keys: list[str], title: str | None, font_size: int
) -> dict:
    """Square cells, keys along the top, first query at the top.

    ``queries`` and ``keys`` are escaped tokens; the axes' categories are
    their ``position_labels``. When rows are thinner than ``MIN_TICK_PX``
    only every k-th token is labelled; hover still names every cell. The
    margins are sized for the labels and title, and the plot area is a
    little wider than the cells, so the cells fill its height and a colour
    bar (which spans that height) ends level with them.
    """
    n_q, n_k = len(queries), len(keys)
    cell_px = _plot_px(max(n_q, n_k), font_size) / max(n_q, n_k)
    stride = max(1, int(np.ceil(MIN_TICK_PX / cell_px)))  # label every stride-th token
    tick_size = max(6, min(font_size, int(cell_px * stride * 0.8)))
    key_angle = _tick_angle(keys, cell_px * stride, tick_size)
    x_label_px = int(_label_px(keys, tick_size) * 0.75) if key_angle else tick_size * 2
    y_label_px = _label_px(queries, tick_size)
    axis_title_px = int(font_size * 2)
    title_px = int(font_size * 1.2 * 1.5) + 12 if title else 0

    layout = base_layout(font_size, title)
    margin = dict(
        l=y_label_px + axis_title_px + 10,
        r=COLORBAR_PX,
        t=title_px + x_label_px + axis_title_px + 10,
        b=10,
    )
    layout.update(
        margin=margin,
        width=int(cell_px * n_k) + SLACK_PX + margin["l"] + margin["r"],
        height=int(cell_px * n_q) + margin["t"] + margin["b"],
        xaxis=clean_axis(
            type="category",
            tickmode="array",
            tickvals=position_labels(keys)[::stride],
            ticktext=keys[::stride],
            side="top",
            tickangle=key_angle,
            tickfont=dict(size=tick_size),
            title=dict(text="key"),
            constrain="domain",
            constraintoward="left",
        ),
        yaxis=clean_axis(
            type="category",
            tickmode="array",
            tickvals=position_labels(queries)[::stride],
            ticktext=queries[::stride],
            autorange="reversed",
            tickfont=dict(size=tick_size),
            title=dict(text="query"),
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
            constraintoward="top",
        ),
    )
    return layout


def head_view(attn: np.ndarray, tokens: Sequence[str], *, font_size: int = 14) -> go.Figure:
    """Heatmap of one head over one sentence, like bertviz's ``head_view``."""
    return head_heatmap(attn, tokens, font_size=font_size)


def _plot_px(n_tokens: int, font_size: int = 14) -> int:
    """Side of the cell area in pixels: grows with tokens, within bounds, and with the font
    (a presentation's larger text gets larger cells)."""
    scale = max(1.0, font_size / 14)
    return int(np.clip(n_tokens * PX_PER_TOKEN * scale, MIN_PLOT_PX * scale, MAX_PLOT_PX * scale))


def _label_px(labels: Sequence[str], font_size: int) -> int:
    """Approximate pixel width of the longest (escaped) label as shown."""
    longest = max((len(html.unescape(label)) for label in labels), default=0)
    return int(longest * font_size * CHAR_WIDTH) + 10


def _tick_angle(labels: Sequence[str], cell_px: float, font_size: int) -> int:
    """Tilt column labels when the longest would overflow its cell."""
    return -45 if _label_px(labels, font_size) > cell_px else 0
