"""The token-to-token lines view: queries on the left, keys on the right.

A line joins query i to key j with opacity given by the weight. A plotly
trace has a single opacity, so drawing one trace per line would make
L² traces. Instead the weights of each head are cut into ``n_bins`` equal
bins on [0, 1]; each non-empty bin becomes one trace of NaN-separated
segments whose opacity is the bin's midpoint (at most 1 / (2 n_bins) from
the true weight). A figure therefore has at most n_heads × n_bins line
traces plus two token columns.
"""

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from viz._style import base_layout, clean_axis
from viz._text import escape, escape_all

X_QUERY, X_KEY = 0.0, 1.0
LINE_AREA_PX = 300
PALETTE = qualitative.Plotly


def opacity_bins(attn: np.ndarray, threshold: float, n_bins: int) -> dict[int, np.ndarray]:
    """Group the drawn (query, key) pairs of one map by opacity bin.

    Bin b holds weights in [b / n_bins, (b + 1) / n_bins), the last bin
    also holding 1. A pair is drawn when its weight is positive and at
    least ``threshold``. Returns {bin: array of (query, key) rows}, only
    for non-empty bins.
    """
    attn = np.asarray(attn)
    drawn = (attn > 0) & (attn >= threshold)
    bins = np.minimum((np.clip(attn, 0.0, 1.0) * n_bins).astype(int), n_bins - 1)
    groups = {}
    for b in range(n_bins):
        pairs = np.argwhere(drawn & (bins == b))  # (n_pairs, 2)
        if len(pairs):
            groups[b] = pairs
    return groups


def bin_opacity(b: int, n_bins: int) -> float:
    """Opacity used for bin ``b``: the midpoint of its weight range."""
    return (b + 0.5) / n_bins


def lines_view(
    attentions_for_heads: np.ndarray,
    tokens: Sequence[str],
    heads: Sequence[str] | None = None,
    threshold: float = 0.0,
    *,
    n_bins: int = 8,
    font_size: int = 14,
    key_tokens: Sequence[str] | None = None,
) -> go.Figure:
    """Lines from each query token (left) to each key token (right).

    ``attentions_for_heads`` is ``[n_selected, L, L]`` (or one ``[L, L]``
    map); ``heads`` names them in the legend (default "head 0", ...). Each
    head has its own colour. Weights below ``threshold`` are not drawn.
    ``key_tokens``: the keys on the right when they are not the queries (an encoder-decoder's
    cross-attention: the decoder's tokens on the left, the encoder's on the right); maps are then
    ``[n_selected, len(tokens), len(key_tokens)]``.
    """
    keys = tokens if key_tokens is None else key_tokens
    maps = np.asarray(attentions_for_heads)
    maps = maps[None] if maps.ndim == 2 else maps
    if maps.ndim != 3 or maps.shape[1:] != (len(tokens), len(keys)):
        raise ValueError(
            f"expected maps [n_selected, {len(tokens)}, {len(keys)}] for "
            f"{len(tokens)} query and {len(keys)} key tokens, got shape {np.shape(attentions_for_heads)}"
        )
    heads = [f"head {i}" for i in range(len(maps))] if heads is None else list(heads)
    if len(heads) != len(maps):
        raise ValueError(f"{len(heads)} head names given for {len(maps)} maps")

    traces: list[go.Scatter] = []
    for index, (attn, name) in enumerate(zip(maps, heads)):
        colour = PALETTE[index % len(PALETTE)]
        traces += _head_traces(attn, escape(name), colour, threshold, n_bins)
    names, key_names = escape_all(tokens), escape_all(keys)
    traces.append(_token_column(names, X_QUERY, "middle left", "query"))
    traces.append(_token_column(key_names, X_KEY, "middle right", "key"))
    return go.Figure(traces, _layout([*names, *key_names], max(len(names), len(key_names)), len(maps) > 1, font_size))


def _head_traces(attn, name: str, colour: str, threshold: float, n_bins: int) -> list:
    traces: list[go.Scatter] = []
    for b, pairs in opacity_bins(attn, threshold, n_bins).items():
        x, y = _segments(pairs)
        traces.append(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                line=dict(color=colour, width=2),
                opacity=bin_opacity(b, n_bins),
                name=name,
                legendgroup=name,
                showlegend=not traces,  # one legend entry per head
                hoverinfo="skip",
            )
        )
    return traces


def _segments(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and y of NaN-separated segments, one per (query, key) pair."""
    n = len(pairs)
    gaps = np.full(n, np.nan)
    x = np.tile([X_QUERY, X_KEY, np.nan], n)
    y = np.column_stack([pairs[:, 0], pairs[:, 1], gaps]).ravel()  # (3n,)
    return x, y


def _token_column(names: list[str], x: float, position: str, role: str) -> go.Scatter:
    return go.Scatter(
        x=[x] * len(names),
        y=list(range(len(names))),
        text=names,
        mode="markers+text",
        textposition=position,
        marker=dict(size=6, color="rgba(0,0,0,0)"),
        hovertemplate=f"%{{text}}<extra>{role} %{{y}}</extra>",
        showlegend=False,
    )


def _layout(names: list[str], n: int, show_legend: bool, font_size: int) -> dict:
    """``names``: every label drawn (their longest sets the margins); ``n``: the longer column's rows."""
    label_px = int(max((len(t) for t in names), default=0) * font_size * 0.6) + 16
    pad = label_px / LINE_AREA_PX  # label width in x data units
    layout = base_layout(font_size)
    layout.update(
        width=LINE_AREA_PX + 2 * label_px + 40,
        height=max(250, int(n * font_size * 1.6) + (110 if show_legend else 70)),
        showlegend=show_legend,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        xaxis=clean_axis(visible=False, range=[X_QUERY - pad, X_KEY + pad], fixedrange=True),
        yaxis=clean_axis(visible=False, range=[n - 0.5, -0.5], fixedrange=True),
        hovermode="closest",
    )
    return layout
