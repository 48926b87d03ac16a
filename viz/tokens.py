"""The WordPiece pieces of an input as a strip of boxes, wrapping to rows.

Each box shows the piece, its vocabulary id underneath and its position
above. Boxes are coloured by segment (A / B), with the special tokens in grey
(the colour key names the model's own: [CLS] / [SEP], <s> / </s>),
and a continuation piece ("##ing") touches the box before it. The figure
is drawn in pixel units (one data unit is one pixel), so text and boxes
keep their sizes whatever the number of tokens. All boxes of one colour are
one filled trace, and pieces, ids and positions one text trace each: a
figure has at most seven traces, however long the input.

Tokens a model wrote after the prompt (``new_from``: the first written
position) are boxes of their own colour with a thicker outline, named in the
colour key.

A long input (more than ``COMPACT_ABOVE`` pieces) gets a compact strip: no id
line (the hover still gives each id) and a position above every
``POSITION_EVERY``-th box only: the boxes are lower and narrower, and the
browser draws about a third of the texts.
"""

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz._style import SEGMENT_A, SEGMENT_B, SPECIAL, base_layout, clean_axis
from viz._text import escape, readable_all

ROW_PX = 1000  # widest row before wrapping
GAP_PX = 6  # between boxes of different words
EDGE_PX = 2  # around the strip, so outlines at its edges are not clipped
FRAME_PX = 20  # the figure's left and right margins together
MIN_ROW_PX = 200  # rows never wrap narrower than this, whatever the width given
CHAR_WIDTH = 0.62  # average glyph width as a fraction of the font size
CONTINUATION = "##"
WRITTEN = ("#dcf2dc", "#2e8b3e")  # a continuation's tokens: fill, outline
KINDS = {  # kind: (name in the colour key, (fill, outline))
    "A": ("segment A", SEGMENT_A),
    "B": ("segment B", SEGMENT_B),
    "special": ("special tokens", SPECIAL),  # the key names the strip's own (special_names)
    "new": ("written by the model", WRITTEN),
}
OUTLINE_PX = {"new": 3.0}  # the rest: 1.5
ONE_TEXT = "the text"  # segment A's name in the key when there is no segment B
CAPTION = "above each box: position · in it: the piece and its vocabulary id"
COMPACT_ABOVE = 128  # pieces; a longer input gets the compact strip
POSITION_EVERY = 10  # in the compact strip, the boxes numbered
COMPACT_CAPTION = f"above every {POSITION_EVERY}th box: position · in it: the piece · hover a box for its vocabulary id"
MAX_SPECIAL_NAMES = 3  # distinct special tokens the colour key names, then "…"
KEY_GAP = "   "  # between the colour key's entries


@dataclass(frozen=True)
class Sizes:
    """Pixel sizes derived from the font size."""

    font: int
    ids: bool = True  # a line for the vocabulary id in each box

    @property
    def small(self) -> int:
        return max(8, round(self.font * 0.72))

    @property
    def pad(self) -> int:
        return round(self.font * 0.45)

    @property
    def box_h(self) -> float:
        return self.font * 1.35 + (self.small * 1.3 if self.ids else 0) + self.pad

    @property
    def label_h(self) -> float:  # the position number above a box
        return self.small * 1.5

    @property
    def row_h(self) -> float:
        return self.label_h + self.box_h + self.pad * 2


def token_strip(
    tokens: Sequence[str],
    ids: Sequence[int],
    segments: Sequence[int],
    special: Sequence[bool],
    font_size: int = 14,
    per_row: int | None = None,
    compact: bool | None = None,
    width: int | None = None,
    new_from: int | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """The pieces as boxes in reading order, wrapping to rows (each as ``readable`` shows it, half a character of
    a `byte_level` tokenizer's as its bytes).

    ``segments`` holds the token type of each piece (0 for A, 1 for B) and
    ``special`` marks the special tokens ([CLS] / [SEP], <s> / </s>). Rows wrap between words at ``ROW_PX``
    pixels, or after every ``per_row`` pieces when given. Hover reads
    "position i: piece (id N, segment A)". Pieces are escaped. ``compact``
    (default: more than ``COMPACT_ABOVE`` pieces) leaves the ids to the hover
    and numbers every ``POSITION_EVERY``-th box only. ``width``: the most
    pixels the figure may take (its column), rows wrapping within it; by
    default rows wrap at ``ROW_PX``. Drawn wider than its column, the figure
    would be shrunk to fit and its boxes with it, but not its text.
    ``new_from``: the first position a model wrote (a continuation of the
    prompt before it); those boxes are marked as written.
    """
    n = len(tokens)
    if not (len(ids) == len(segments) == len(special) == n):
        raise ValueError(f"{n} tokens but {len(ids)} ids, {len(segments)} segments and {len(special)} special flags")
    if per_row is not None and per_row < 1:
        raise ValueError(f"per_row must be at least 1, got {per_row}")
    compact = n > COMPACT_ABOVE if compact is None else compact
    sizes = Sizes(font_size, ids=not compact)
    texts = readable_all(tokens, byte_level)
    pieces = [escape(t) for t in texts]  # as text: "Ġthe" as " the"; the raw piece in the hover
    widths = np.array([_box_width(p, i, sizes) for p, i in zip(pieces, ids)])
    attached = np.array([_is_continuation(t, s) for t, s in zip(tokens, special)])
    kinds = [_kind(seg, sp) for seg, sp in zip(segments, special)]
    if new_from is not None:
        kinds = [kind if i < new_from else "new" for i, kind in enumerate(kinds)]

    room = None if width is None else width - 2 * EDGE_PX - FRAME_PX  # the strip's own pixels, edges aside
    row_px = ROW_PX if room is None else max(MIN_ROW_PX, room)
    left, row = _place(widths, attached, per_row, row_px)
    top = row * sizes.row_h + sizes.label_h  # (n,) top edge of each box
    centre_x = left + widths / 2
    traces = []
    for kind, (name, colours) in KINDS.items():
        mask = np.array([k == kind for k in kinds], dtype=bool)
        if mask.any():
            outline = OUTLINE_PX.get(kind, 1.5)
            traces.append(_boxes(left[mask], top[mask], widths[mask], sizes.box_h, name, colours, outline))
    traces.append(
        _text(
            "piece",
            centre_x,
            top + sizes.pad / 2 + sizes.font * 0.7,
            _show_pieces(pieces, attached),
            sizes.font,
            "#1a1a1a",
            hovers=_hovers(tokens, texts, ids, segments, special, new_from),
        )
    )
    if sizes.ids:
        traces.append(
            _text(
                "id",
                centre_x,
                top + sizes.box_h - sizes.pad / 2 - sizes.small * 0.65,
                [str(i) for i in ids],
                sizes.small,
                "#555555",
            )
        )
    numbered = np.arange(0, n, POSITION_EVERY if compact else 1)
    traces.append(
        _text(
            "position",
            centre_x[numbered],
            top[numbered] - sizes.label_h / 2,
            [str(i) for i in numbered],
            sizes.small,
            "#8a8a8a",
        )
    )
    n_rows = int(row.max()) + 1 if n else 1
    present = [kind for kind in KINDS if kind in kinds]
    caption = COMPACT_CAPTION if compact else CAPTION
    names = {"special": special_names(pieces, special)}
    if "B" not in kinds:  # one text (a decoder's always): no second segment to tell it from
        names["A"] = ONE_TEXT
    layout = _layout(float((left + widths).max(initial=0)), n_rows, sizes, present, caption, room, names)
    return go.Figure(traces, layout)


def special_names(pieces: Sequence[str], special: Sequence[bool]) -> str:
    """The colour key's name for the grey boxes: the strip's own special tokens (escaped pieces), distinct, in
    reading order, "[CLS] / [SEP]" or "<s> / </s>"; after MAX_SPECIAL_NAMES of them, "…"."""
    seen = list(dict.fromkeys(p for p, s in zip(pieces, special) if s))
    return " / ".join(seen[:MAX_SPECIAL_NAMES]) + (" / …" if len(seen) > MAX_SPECIAL_NAMES else "")


def _box_width(piece: str, token_id: int, sizes: Sizes) -> float:
    """Wide enough for the piece, its id (when shown) and its position number."""
    piece_px = len(piece) * sizes.font * CHAR_WIDTH
    id_px = len(str(token_id)) * sizes.small * CHAR_WIDTH if sizes.ids else 0
    return float(max(piece_px, id_px, sizes.font * 1.2) + 2 * sizes.pad)


def _is_continuation(token: str, special: bool) -> bool:
    return not special and token.startswith(CONTINUATION) and len(token) > len(CONTINUATION)


def _kind(segment: int, special: bool) -> str:
    return "special" if special else ("B" if segment else "A")


def _place(widths: np.ndarray, attached: np.ndarray, per_row: int | None, row_px: float = ROW_PX):
    """Left edge (px) and row of each box.

    A continuation piece has no gap before it. Wrapping happens between
    words (a word and its continuations move together) unless the word is
    wider than a row; with ``per_row`` it happens after that many pieces.
    """
    n = len(widths)
    gaps = np.where(attached, 0.0, GAP_PX)
    word_px = _word_widths(widths, attached)
    left, row = np.zeros(n), np.zeros(n, dtype=int)
    x, r, count = 0.0, 0, 0
    for i in range(n):
        if per_row is not None:
            wrap = count == per_row
        else:
            need = widths[i] if attached[i] else gaps[i] + word_px[i]
            wrap = x > 0 and x + need > row_px
        if wrap:
            x, r, count = 0.0, r + 1, 0
        elif x > 0:
            x += gaps[i]
        left[i], row[i] = x, r
        x += widths[i]
        count += 1
    return left, row


def _word_widths(widths: np.ndarray, attached: np.ndarray) -> np.ndarray:
    """For each piece, the width of it and the continuations that follow it."""
    word_px = widths.astype(float).copy()
    for i in range(len(widths) - 2, -1, -1):  # right to left, adding the next piece if attached
        if attached[i + 1]:
            word_px[i] += word_px[i + 1]
    return word_px


def _boxes(
    left, top, widths, height: float, name: str, colours: tuple[str, str], outline_px: float = 1.5
) -> go.Scatter:
    """Closed rectangles separated by gaps, filled in one colour."""
    right, bottom = left + widths, top + height
    nan = np.full(len(left), np.nan)
    x = np.column_stack([left, right, right, left, left, nan]).ravel()  # (6n,)
    y = np.column_stack([top, top, bottom, bottom, top, nan]).ravel()
    fill, outline = colours
    return go.Scatter(
        x=x,
        y=y,
        mode="lines",
        fill="toself",
        fillcolor=fill,
        line=dict(color=outline, width=outline_px),
        name=name,
        showlegend=False,
        hoverinfo="skip",
    )


def _hovers(tokens: Sequence[str], texts, ids, segments, special, new_from: int | None = None) -> list[str]:
    """ "position i: text (id N, segment A)", with the raw piece after the id where its text (`texts`) differs
    from it ("Ġthe" for " the"), ", special" for [CLS] / [SEP] and ", written" for a token the model wrote.
    Escaped."""
    return [
        f"position {i}: {escape(texts[i])} (id {ids[i]}"
        + (f", piece {escape(token)}" if texts[i] != token else "")
        + f", segment {'B' if segments[i] else 'A'}"
        + (", special" if special[i] else "")
        + (", written by the model)" if new_from is not None and i >= new_from else ")")
        for i, token in enumerate(tokens)
    ]


def _show_pieces(pieces: list[str], attached: np.ndarray) -> list[str]:
    """Pieces as shown: the "##" of a continuation in a lighter colour."""
    marker = f'<span style="color:#9a9a9a">{CONTINUATION}</span>'
    return [marker + piece[len(CONTINUATION) :] if joined else piece for piece, joined in zip(pieces, attached)]


def _text(name: str, x, y, texts: list[str], size: int, colour: str, hovers=None) -> go.Scatter:
    """A column of texts; ``name`` says which (piece, id, position) for readers of the figure."""
    hover = dict(hovertext=hovers, hovertemplate="%{hovertext}<extra></extra>") if hovers else dict(hoverinfo="skip")
    return go.Scatter(
        x=x,
        y=y,
        text=texts,
        mode="text",
        name=name,
        textposition="middle center",
        textfont=dict(size=size, color=colour),
        showlegend=False,
        **hover,
    )


def colour_key(
    kinds: Sequence[str], names: dict[str, str] | None = None, px: float | None = None, font: int = 14
) -> str:
    """The colour key written above the strip: a square in each present kind's outline colour and its name
    (``names`` in place of KINDS' own), wrapped to lines within ``px`` pixels at ``font``. One text, not a
    plotly legend: the legend costs the browser about 70 ms on every new input."""
    names = names or {}
    entries = [(f'<span style="color:{KINDS[k][1][1]}">■</span> {names.get(k, KINDS[k][0])}', k) for k in kinds]
    shown = [2 + _visible(names.get(k, KINDS[k][0])) for _, k in entries]  # "■ " and the name
    return _wrap([e for e, _ in entries], shown, KEY_GAP, px, font)


def _visible(text: str) -> int:
    """Characters a piece of escaped text shows: each &lt; and the like is one."""
    return len(html.unescape(text))


def _wrap(items: Sequence[str], lengths: Sequence[int], gap: str, px: float | None, font: float) -> str:
    """``items`` joined by ``gap``, a line break ("<br>") before one that would pass ``px`` pixels (each
    character CHAR_WIDTH of ``font``); one line when ``px`` is None."""
    lines: list[list[str]] = [[]]
    used = 0.0
    for item, n in zip(items, lengths):
        need = (n + (len(gap) if lines[-1] else 0)) * font * CHAR_WIDTH
        if px is not None and lines[-1] and used + need > px:
            lines.append([])
            used, need = 0.0, n * font * CHAR_WIDTH
        lines[-1].append(item)
        used += need
    return "<br>".join(gap.join(line) for line in lines)


def wrapped_caption(caption: str, px: float | None, font: float) -> str:
    """A caption's words in lines of at most ``px`` pixels (a word wider than that on a line of its own)."""
    words = caption.split(" ")
    return _wrap(words, [len(w) for w in words], " ", px, font)


def _layout(
    content_px: float,
    n_rows: int,
    sizes: Sizes,
    kinds: Sequence[str],
    caption: str = CAPTION,
    room: float | None = None,
    names: dict[str, str] | None = None,
) -> dict:
    """One data unit per pixel: the plot area is exactly the strip's size (the legend's room within
    ``room`` px, the most the strip may take). The colour key and the caption wrap within the figure's
    width, each line adding to its margin."""
    width = max(content_px, sizes.font * 30)  # room for the legend on one line
    if room is not None:
        width = max(content_px, min(width, room))
    text_px = np.ceil(width) + 2 * EDGE_PX + FRAME_PX / 2  # from the plot's left edge to the figure's right
    key = colour_key(kinds, names, text_px, sizes.font)
    caption = wrapped_caption(caption, text_px, sizes.small)
    legend_px = round(sizes.font * (2.6 + 1.3 * key.count("<br>")))
    caption_px = round(sizes.small * (2.2 + 1.3 * caption.count("<br>")))
    height = n_rows * sizes.row_h
    layout = base_layout(sizes.font)
    layout.update(
        width=int(np.ceil(width)) + 2 * EDGE_PX + FRAME_PX,
        height=int(np.ceil(height)) + 2 * EDGE_PX + legend_px + caption_px,
        margin=dict(l=10, r=10, t=legend_px, b=caption_px),
        annotations=[
            dict(
                text=caption,
                x=0,
                xref="paper",
                xanchor="left",
                y=0,
                yref="paper",
                yanchor="top",
                yshift=-4,
                showarrow=False,
                align="left",
                font=dict(size=sizes.small, color="#6b6b6b"),
            ),
            dict(
                text=key,
                align="left",
                x=0,
                xref="paper",
                xanchor="left",
                y=1,
                yref="paper",
                yanchor="bottom",
                yshift=6,
                showarrow=False,
                font=dict(size=sizes.font, color="#1a1a1a"),
            ),
        ],
        showlegend=False,
        xaxis=clean_axis(visible=False, range=[-EDGE_PX, np.ceil(width) + EDGE_PX], fixedrange=True, automargin=False),
        yaxis=clean_axis(visible=False, range=[np.ceil(height) + EDGE_PX, -EDGE_PX], fixedrange=True, automargin=False),
        hovermode="closest",
        hoverdistance=int(sizes.font * 3),
    )
    return layout
