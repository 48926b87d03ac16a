"""One attention head as a heatmap: queries on rows, keys on columns."""

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import SEQUENTIAL, base_layout, clean_axis
from viz._text import escape_all

HOVER = "%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>"
MIN_PLOT_PX, MAX_PLOT_PX, PX_PER_TOKEN = 300, 900, 24
MIN_TICK_PX = 9  # closer labels overlap; show every k-th instead
CHAR_WIDTH = 0.6  # average glyph width as a fraction of the font size


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

    The first query is the top row. Axes use integer positions labelled
    with the tokens, so repeated tokens keep their own row and column.
    Hover reads "query → key: weight". ``title`` is plotly markup and is
    not escaped; tokens are.
    """
    key_tokens = query_tokens if key_tokens is None else key_tokens
    attn = np.asarray(attn)
    if attn.shape != (len(query_tokens), len(key_tokens)):
        raise ValueError(
            f"map shape {attn.shape} does not match {len(query_tokens)} query "
            f"and {len(key_tokens)} key tokens"
        )
    queries, keys = escape_all(query_tokens), escape_all(key_tokens)
    n_q, n_k = attn.shape

    pairs = np.empty((n_q, n_k, 2), dtype=object)  # (Q, K, [query, key])
    pairs[..., 0] = np.array(queries, dtype=object)[:, None]
    pairs[..., 1] = np.array(keys, dtype=object)[None, :]

    heatmap = go.Heatmap(
        z=attn,
        customdata=pairs,
        hovertemplate=HOVER,
        colorscale=colorscale,
        zmin=zmin,
        zmax=zmax,
        colorbar=dict(title=dict(text="weight"), thickness=14),
    )
    return go.Figure(heatmap, _heatmap_layout(queries, keys, title, font_size))


def _heatmap_layout(queries: list[str], keys: list[str], title: str | None, font_size: int) -> dict:
    """Square cells, keys along the top, first query at the top.

    When rows are thinner than ``MIN_TICK_PX`` only every k-th token is
    labelled; hover still names every cell.
    """
    n_q, n_k = len(queries), len(keys)
    cell_px = _plot_px(max(n_q, n_k)) / max(n_q, n_k)
    stride = max(1, int(np.ceil(MIN_TICK_PX / cell_px)))  # label every stride-th token
    tick_size = max(6, min(font_size, int(cell_px * stride * 0.8)))
    key_angle = _tick_angle(keys, cell_px * stride, tick_size)
    x_label_px = _label_px(keys, tick_size) if key_angle else tick_size * 2
    y_label_px = _label_px(queries, tick_size)

    layout = base_layout(font_size, title)
    layout.update(
        width=int(cell_px * n_k + y_label_px + 120),
        height=int(cell_px * n_q + x_label_px + (90 if title else 40)),
        xaxis=clean_axis(
            tickmode="array",
            tickvals=list(range(0, n_k, stride)),
            ticktext=keys[::stride],
            side="top",
            tickangle=key_angle,
            tickfont=dict(size=tick_size),
            title=dict(text="key"),
            constrain="domain",
        ),
        yaxis=clean_axis(
            tickmode="array",
            tickvals=list(range(0, n_q, stride)),
            ticktext=queries[::stride],
            autorange="reversed",
            tickfont=dict(size=tick_size),
            title=dict(text="query"),
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
        ),
    )
    return layout


def head_view(attn: np.ndarray, tokens: Sequence[str], *, font_size: int = 14) -> go.Figure:
    """Heatmap of one head over one sentence, like bertviz's ``head_view``."""
    return head_heatmap(attn, tokens, font_size=font_size)


def _plot_px(n_tokens: int) -> int:
    """Side of the cell area in pixels: grows with tokens, within bounds."""
    return int(np.clip(n_tokens * PX_PER_TOKEN, MIN_PLOT_PX, MAX_PLOT_PX))


def _label_px(labels: Sequence[str], font_size: int) -> int:
    """Approximate pixel width of the longest label."""
    longest = max((len(label) for label in labels), default=0)
    return int(longest * font_size * CHAR_WIDTH) + 10


def _tick_angle(labels: Sequence[str], cell_px: float, font_size: int) -> int:
    """Tilt column labels when the longest would overflow its cell."""
    return -45 if _label_px(labels, font_size) > cell_px else 0
