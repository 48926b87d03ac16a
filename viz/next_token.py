"""The next-token panel: at one position, a causal model's most probable next tokens as horizontal bars, at
temperature 1 (the model's own probabilities) beside the same candidates at another temperature, the token
that came next in the text marked. Numbers in, Figure out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz._style import HIGHLIGHT, SEGMENT_A, base_layout, clean_axis, title_layout
from viz._text import escape, readable_all, spaces_marked

BAR = SEGMENT_A[1]
TICK_CHARS = 5  # the widest tick label, "60.0%" or "0.5%"
CHAR_WIDTH = 0.6  # average glyph width as a fraction of the font size
CHOSEN = HIGHLIGHT


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """softmax(logits / temperature) over the last axis, in float64 (a sum of 1 at any temperature)."""
    scaled = np.asarray(logits, dtype=np.float64) / temperature
    scaled = scaled - scaled.max(axis=-1, keepdims=True)
    e = np.exp(scaled)
    return e / e.sum(axis=-1, keepdims=True)


def entropy_bits(probs: np.ndarray) -> float:
    """The entropy of a distribution, in bits (0 for a certain token)."""
    p = np.asarray(probs, dtype=np.float64)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def next_token_figure(
    candidates: Sequence[str],
    probs: np.ndarray,
    tempered: np.ndarray,
    temperature: float,
    chosen: int | None = None,
    entropies: tuple[float, float] | None = None,
    title: str | None = None,
    font_size: int = 14,
    width: int | None = None,
    height: int | None = None,
    ids: Sequence[int] | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """Two panels of horizontal bars, the most probable candidate on top: `probs` (K,) at temperature 1 and
    `tempered` (K,) at `temperature`, each panel on its own scale, for the same `candidates` (K tokens, as the
    tokenizer writes them: shown as text, ``readable``, half a character of a `byte_level` tokenizer's as its
    bytes, and escaped here; the raw piece and its id, from `ids`, in the hover). `chosen`: the index of the
    candidate that came next, drawn in the highlight colour. `entropies`: of the whole distribution at 1 and at
    `temperature`, in bits, for the panels' titles."""
    k = len(candidates)
    if np.shape(probs) != (k,) or np.shape(tempered) != (k,):
        raise ValueError(f"{k} candidates but probabilities of shapes {np.shape(probs)} and {np.shape(tempered)}")
    texts = [spaces_marked(t) for t in readable_all(candidates, byte_level)]  # a leading space is part of it
    labels = [f"{escape(t)}·{i}" if texts.count(t) > 1 else escape(t) for i, t in enumerate(texts)]
    pieces = [  # the hover's line, and the id a click reads
        [f"piece {escape(c)}" + (f", id {ids[i]}" if ids is not None else ""), ids[i] if ids is not None else -1]
        for i, c in enumerate(candidates)
    ]
    names = ["T = 1: the model's probabilities", f"T = {temperature:g}"]
    if entropies is not None:
        names = [f"{name} · entropy {h:.2f} bits" for name, h in zip(names, entropies)]
    # each panel its own scale (at T = 2 the bars of a few per cent would be slivers on T = 1's), the panels apart
    # by the widest tick label, so that one panel's last tick and the next one's first never touch ("60%0%")
    tops = [float(np.max(values, initial=0)) * 1.25 or 1.0 for values in (probs, tempered)]
    formats = [".0%" if top >= 0.2 else ".1%" for top in tops]
    gap_px = TICK_CHARS * font_size * CHAR_WIDTH + font_size
    fig = make_subplots(
        rows=1, cols=2, shared_yaxes=True, horizontal_spacing=min(0.2, gap_px / (width or 800)), subplot_titles=names
    )
    colours = [CHOSEN if i == chosen else BAR for i in range(k)]
    for col, values in ((1, probs), (2, tempered)):
        fig.add_trace(
            go.Bar(
                x=values,
                y=labels,
                orientation="h",
                marker=dict(color=colours),
                text=[f"{v:.1%}" for v in values],
                textposition="outside",
                cliponaxis=False,
                customdata=pieces,
                hovertemplate="%{y}: %{x:.4f}<br>%{customdata[0]}<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(clean_axis(range=[0, tops[col - 1]], tickformat=formats[col - 1]), row=1, col=col)
    fig.update_yaxes(clean_axis(autorange="reversed", type="category"))
    layout = base_layout(font_size)
    layout.update(
        showlegend=False,
        bargap=0.25,
        margin=dict(l=10, r=30, t=90 if title else 50, b=10),
    )
    if title:
        layout["title"] = title_layout(title, font_size)
    if width:
        layout["width"] = width
    layout["height"] = height or max(240, 60 + k * round(font_size * 2.2))
    fig.update_layout(layout)
    for note in fig.layout.annotations:  # the panels' titles at the figure's font size
        note.font.size = font_size
    return fig
