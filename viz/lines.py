"""The token-to-token lines view: queries on the left, keys on the right.

A line joins query i to key j with opacity given by the weight. A plotly
trace has a single opacity, so drawing one trace per line would make
L² traces. Instead the weights of each head are cut into ``n_bins`` equal
bins on [0, 1]; each non-empty bin becomes one trace of NaN-separated
segments whose opacity is the bin's midpoint (at most 1 / (2 n_bins) from
the true weight). A figure therefore has at most n_heads × n_bins line
traces plus two token columns.

A figure is sized from its counts before it is built: each head draws at
most its share of MAX_LINES lines, its strongest (a long sentence's
weakest lines are near-transparent, and L² of them would make a message
no browser receives: 12 heads at 512 tokens, 233 MB), and a note under
them says so; a figure whose estimate (``figure_bytes``) is still past the page's
message limit is refused (``TooManyLines``) before it is built.
"""

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from viz._style import base_layout, clean_axis
from viz._text import escape, escape_all, shown_escaped

X_QUERY, X_KEY = 0.0, 1.0
LINE_AREA_PX = 300
PALETTE = qualitative.Plotly
MAX_LINES = 100_000  # the most lines one figure draws, shared by its heads (about 7.5 MB of JSON)
MESSAGE_BYTES = 50 * 2**20  # the page's largest message (.streamlit/config.toml's maxMessageSize)
# a line's JSON at most: x and y, three float64 each, base64 (4/3), every character escaped (\u002f: 6)
LINE_BYTES = 2 * 3 * 8 * 4 // 3 * 6
TRACE_BYTES = 400  # a trace's own settings (name, colour, opacity ...)
NOTE_PX = 60  # the room under the lines for the note that says they were thinned
CHAR_BYTES = 12  # a label's character in JSON at most (a character past the BMP: two \uXXXX escapes)


class TooManyLines(ValueError):
    """A lines figure whose estimated size is past the page's message limit, refused before it is built."""


def figure_bytes(n_lines: int, n_traces: int, labels: Sequence[str]) -> int:
    """At most how many bytes of JSON a lines figure of `n_lines` lines in `n_traces` traces with token
    columns labelled `labels` (each drawn and hovered: twice) takes, from the counts alone."""
    return n_lines * LINE_BYTES + n_traces * TRACE_BYTES + 2 * CHAR_BYTES * sum(len(t) + 8 for t in labels) + 4096


def opacity_bins(attn: np.ndarray, threshold: float, n_bins: int, most: int | None = None) -> dict[int, np.ndarray]:
    """Group the drawn (query, key) pairs of one map by opacity bin.

    Bin b holds weights in [b / n_bins, (b + 1) / n_bins), the last bin
    also holding 1. A pair is drawn when its weight is positive and at
    least ``threshold``, and, given ``most``, among the ``most`` largest
    (``strongest``). Returns {bin: array of (query, key) rows}, only for
    non-empty bins.
    """
    attn = np.asarray(attn)
    drawn = strongest((attn > 0) & (attn >= threshold), attn, most)
    bins = np.minimum((np.clip(attn, 0.0, 1.0) * n_bins).astype(int), n_bins - 1)
    groups = {}
    for b in range(n_bins):
        pairs = np.argwhere(drawn & (bins == b))  # (n_pairs, 2)
        if len(pairs):
            groups[b] = pairs
    return groups


def strongest(drawn: np.ndarray, attn: np.ndarray, most: int | None) -> np.ndarray:
    """`drawn` (a boolean mask over `attn`) cut to its `most` largest weights (all of them when None or no
    more than that); among equal weights at the cut, those first in reading order."""
    n = int(np.count_nonzero(drawn))
    if most is None or n <= most:
        return drawn
    weights = attn[drawn]  # (n,)
    cut = np.partition(weights, n - most)[n - most]  # the most-th largest
    kept = drawn & (attn > cut)
    ties = np.flatnonzero(drawn & (attn == cut))[: most - int(np.count_nonzero(kept))]
    kept.flat[ties] = True
    return kept


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
    max_lines: int = MAX_LINES,
    headings: tuple[str, str] | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """Lines from each query token (left) to each key token (right), each written as text (``readable``: half a
    character of a ``byte_level`` tokenizer's as its bytes), its raw piece in the hover.

    ``attentions_for_heads`` is ``[n_selected, L, L]`` (or one ``[L, L]``
    map); ``heads`` names them in the legend (default "head 0", ...). Each
    head has its own colour. Weights below ``threshold`` are not drawn.
    ``key_tokens``: the keys on the right when they are not the queries (an encoder-decoder's
    cross-attention: the decoder's tokens on the left, the encoder's on the right); maps are then
    ``[n_selected, len(tokens), len(key_tokens)]``.
    ``headings``: what each column is, shown above it (the cross-attention's "decoder (target)" and
    "encoder (source)"); plain text, escaped here.
    Each head draws at most ``max_lines // n_selected`` lines, its strongest (a note under them says so); a
    figure still estimated past MESSAGE_BYTES raises TooManyLines before anything is drawn.
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

    most = max(1, max_lines // len(maps))  # each head's share
    drawn = [int(np.count_nonzero((m > 0) & (m >= threshold))) for m in maps]
    pieces, key_pieces = escape_all(tokens), escape_all(keys)  # the raw pieces, for the hover
    names, key_names = shown_escaped(pieces, byte_level), shown_escaped(key_pieces, byte_level)  # as text
    size = figure_bytes(sum(min(n, most) for n in drawn), len(maps) * n_bins + 2, [*names, *key_names, *heads])
    if size > MESSAGE_BYTES:
        raise TooManyLines(
            f"These lines would make a figure of up to {size / 2**20:,.0f} MB, more than the "
            f"{MESSAGE_BYTES // 2**20} MB the page sends: draw fewer heads or a shorter sentence."
        )
    traces: list[go.Scatter] = []
    for index, (attn, name) in enumerate(zip(maps, heads)):
        colour = PALETTE[index % len(PALETTE)]
        traces += _head_traces(attn, escape(name), colour, threshold, n_bins, most)
    traces.append(_token_column(names, pieces, X_QUERY, "middle left", "query"))
    traces.append(_token_column(key_names, key_pieces, X_KEY, "middle right", "key"))
    labels = [*names, *key_names, *(headings or ())]  # the widest sets the room beside the lines, a heading's too
    layout = _layout(labels, max(len(names), len(key_names)), len(maps) > 1, font_size)
    if headings:
        _add_headings(layout, headings, font_size)
    if max(drawn) > most:  # said under the lines, where the legend leaves room at any width
        each = " of each head" if len(maps) > 1 else ""
        note = f"The {most:,} strongest lines{each}<br>are drawn (of up to {max(drawn):,})."
        layout.update(
            height=layout["height"] + NOTE_PX,
            margin={**layout["margin"], "b": layout["margin"]["b"] + NOTE_PX},
            annotations=layout.get("annotations", [])
            + [
                dict(text=note, x=0, y=0, xref="paper", yref="paper", xanchor="left", yanchor="top", yshift=-4)
                | dict(showarrow=False, align="left", font=dict(size=font_size))
            ],
        )
    return go.Figure(traces, layout)


def _head_traces(attn, name: str, colour: str, threshold: float, n_bins: int, most: int) -> list:
    traces: list[go.Scatter] = []
    for b, pairs in opacity_bins(attn, threshold, n_bins, most).items():
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


def _token_column(names: list[str], pieces: list[str], x: float, position: str, role: str) -> go.Scatter:
    """One column of tokens: `names` written, the raw `pieces` in the hover."""
    return go.Scatter(
        x=[x] * len(names),
        y=list(range(len(names))),
        text=names,
        hovertext=pieces,
        mode="markers+text",
        textposition=position,
        marker=dict(size=6, color="rgba(0,0,0,0)"),
        hovertemplate=f"%{{hovertext}}<extra>{role} %{{y}}</extra>",
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


def _add_headings(layout: dict, headings: tuple[str, str], font_size: int) -> None:
    """Each column's heading in a row of its own above the lines (and under a legend, raised above it)."""
    row = int(font_size * 1.8)
    top = layout["margin"]["t"]
    layout.update(height=layout["height"] + row, margin={**layout["margin"], "t": top + row})
    plot_px = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    layout["legend"]["y"] = 1 + row / plot_px + 0.02
    layout["annotations"] = [
        dict(text=f"<b>{escape(text)}</b>", x=x, xanchor=anchor, y=1, yref="paper", yanchor="bottom", yshift=4)
        | dict(xref="x", showarrow=False, font=dict(size=font_size))
        for text, x, anchor in zip(headings, (X_QUERY, X_KEY), ("right", "left"))
    ]
