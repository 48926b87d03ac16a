"""Byte-level BPE's pieces (transformers' GPT-2 alphabet, SmolLM2's) in every figure over tokens that is not the Head
view's, the walk's or the shape flow's (test_shapeflow has those): each label the piece as text, half a character as
its bytes, the raw piece in the hover; the select boxes' "3: …" the same (viz._text.numbered)."""

from __future__ import annotations

import numpy as np
import pytest
from transformers.convert_slow_tokenizer import bytes_to_unicode

from attention.analysis.query_key import QueryKey
from viz import (
    attention_pair,
    causal_mask_figure,
    lens_view,
    lines_view,
    mixing_view,
    padding_mask_figure,
    query_key_figure,
)
from viz._text import numbered
from viz.lens import cut

ALPHABET = bytes_to_unicode()
# " the 🍕 日本" as a byte-level tokenizer may cut it: 🍕 (F0 9F 8D 95) in two, 日 (E6 97 A5) across two pieces
RAW = [b" the", b" \xf0\x9f", b"\x8d\x95", b" \xe6\x97", b"\xa5\xe6\x9c\xac"]
PIECES = ["".join(ALPHABET[b] for b in r) for r in RAW]  # "Ġthe", "ĠðŁ", …
SHOWN = [" the", " &lt;0xF0 0x9F&gt;", "&lt;0x8D 0x95&gt;", " &lt;0xE6 0x97&gt;", "&lt;0xA5&gt;本"]  # escaped
CATEGORIES = [f"{piece}·{i}" for i, piece in enumerate(PIECES)]  # the raw pieces: what a hover names
L = len(PIECES)


def labelled(axis) -> dict[str, str]:
    """An axis's categories and the text shown for each."""
    return dict(zip(axis.tickvals, axis.ticktext))


def test_the_pieces_read_as_text_and_half_a_character_as_its_bytes():
    assert [p.startswith("Ġ") for p in PIECES] == [True, True, False, True, False]  # raw pieces, as tokenizers give
    assert numbered(1, PIECES[1], byte_level=True) == "1: <0xF0 0x9F>"  # the select boxes: Position, Query token
    assert numbered(4, PIECES[4], byte_level=True) == "4: <0xA5>本"
    assert numbered(0, PIECES[0], byte_level=True) == "0: the"
    assert numbered(2, "é") == "2: é"  # a WordPiece piece is its own text


@pytest.mark.parametrize("present", [None, 18], ids=["page", "presentation"])
def test_the_causal_mask_labels_pieces_as_text(present):
    fig = causal_mask_figure(L, PIECES, byte_level=True, min_label=present, height=600 if present else None)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert labelled(axis) == dict(zip(CATEGORIES, SHOWN))
    assert list(fig.data[0].x) == CATEGORIES  # the hover names the raw piece


def test_the_padding_mask_writes_pieces_as_text_in_its_cells_the_raw_piece_in_the_hover():
    mask = np.array([[1] * L, [1, 1, 1, 0, 0]])
    fig = padding_mask_figure(mask, ["A", "B"], [PIECES, PIECES[:3]], width=1600, byte_level=True)
    kept = fig.data[0]
    assert list(kept.text[0]) == SHOWN and list(kept.text[1][:3]) == SHOWN[:3]
    assert kept.hovertext[0][1] == f"A · position 1: {PIECES[1]}"
    assert not any("Ġ" in str(t) or "ð" in str(t) for row in kept.text for t in row)


def test_rollout_and_mixing_pairs_label_pieces_as_text_on_every_axis():
    maps = np.full((1, 1, L, L), 1 / L)
    for fig in (
        attention_pair(np.eye(L), np.eye(L), PIECES, "Rollout", byte_level=True),
        attention_pair(np.eye(L), np.eye(L), PIECES, "Rollout", byte_level=True, height=500, min_label=18),
        mixing_view(maps, PIECES, 0, zeroing=np.eye(L), byte_level=True),
    ):
        axes = [fig.layout[name] for name in ("xaxis", "yaxis", "xaxis2", "yaxis2")]
        for axis in axes:
            assert labelled(axis) == dict(zip(CATEGORIES, SHOWN)), labelled(axis)
        assert list(fig.data[0].y) == CATEGORIES


def test_query_key_labels_its_rows_and_names_its_query_as_text():
    rng = np.random.default_rng(0)
    d = 4
    q, k = rng.normal(size=d).astype(np.float32), rng.normal(size=(L, d)).astype(np.float32)
    scores = (q * k).sum(-1) / 2
    qk = QueryKey(0, 0, 1, q, k, q * k, scores, np.exp(scores) / np.exp(scores).sum(), 0.5)
    fig = query_key_figure(qk, PIECES, byte_level=True)
    assert labelled(fig.layout.yaxis2) == dict(zip(CATEGORIES, SHOWN))
    assert "query “&lt;0xF0 0x9F&gt;” (position 1)" in fig.layout.title.text
    assert "ð" not in fig.layout.title.text


def test_the_logit_lens_labels_positions_and_cells_as_text():
    n_layers = 3
    top_tokens = [[[PIECES[1], PIECES[0]] for _ in range(L)] for _ in range(n_layers)]
    probs = np.tile(np.array([0.6, 0.1], dtype=np.float32), (n_layers, L, 1))
    fig = lens_view(top_tokens, np.zeros((n_layers, L, 2), dtype=np.int64), probs, PIECES, byte_level=True)
    assert labelled(fig.layout.xaxis) == dict(zip(CATEGORIES, SHOWN))
    cells = {t for row in fig.data[0].text for t in row}
    assert cells == {" &lt;0xF0…"}, cells  # CELL_CHARS of it, still read as bytes; the hover has it whole
    assert "1.  &lt;0xF0 0x9F&gt;  0.600" in fig.data[0].hovertext[0][0]
    assert cut(" <0xF0 0x9F>", 7) == " <0xF0…" and cut(" pizza", 3) == " pi"  # a group cut short still reads as bytes


def test_the_lines_write_pieces_as_text_the_raw_piece_in_the_hover():
    fig = lines_view(np.eye(L), PIECES, byte_level=True)
    columns = [t for t in fig.data if t.mode == "markers+text"]
    assert [list(c.text) for c in columns] == [SHOWN, SHOWN]
    assert [list(c.hovertext) for c in columns] == [PIECES, PIECES]
