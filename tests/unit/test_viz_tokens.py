"""The token strip's colour key names the model's own special tokens, and its key and caption wrap to lines
within the width the strip is given (tests/browser/test_browser_strip.py measures them in a browser)."""

from __future__ import annotations

import viz
from viz.tokens import CAPTION, CHAR_WIDTH

TOKENS = ["<s>", "The", "cat", "</s>", "</s>", "It", "napped", "</s>"]  # RoBERTa's framing of a pair


def key_of(fig) -> str:
    return next(a.text for a in fig.layout.annotations if "■" in a.text)


def caption_of(fig) -> str:
    return next(a.text for a in fig.layout.annotations if "■" not in a.text)


def strip(tokens, special, width=None, new_from=None):
    n = len(tokens)
    return viz.token_strip(tokens, list(range(n)), [0] * n, special, width=width, new_from=new_from)


def test_the_key_names_the_strips_own_special_tokens_escaped():
    key = key_of(strip(TOKENS, [t.startswith("<") for t in TOKENS]))
    assert "&lt;s&gt; / &lt;/s&gt;" in key and "[CLS]" not in key
    bert = key_of(strip(["[CLS]", "cat", "[SEP]"], [True, False, True]))
    assert bert.endswith("■</span> [CLS] / [SEP]")
    many = key_of(strip(["<a>", "<b>", "<c>", "<d>", "x"], [True] * 4 + [False]))
    assert many.endswith("&lt;a&gt; / &lt;b&gt; / &lt;c&gt; / …") and "<b>" not in many


def test_the_key_and_caption_wrap_within_a_narrow_strip():
    special = [t.startswith("<") for t in TOKENS]
    wide, narrow = strip(TOKENS[:4], special[:4]), strip(TOKENS[:4], special[:4], width=240, new_from=2)
    assert "<br>" not in caption_of(wide) and caption_of(wide) == CAPTION
    lines = caption_of(narrow).split("<br>")
    assert len(lines) > 1 and " ".join(lines) == CAPTION  # every word kept, in order
    room = narrow.layout.width - narrow.layout.margin.l
    small = narrow.data[-1].textfont.size  # the positions' size, the caption's
    assert all(len(line) * small * CHAR_WIDTH <= room for line in lines)
    assert len(key_of(narrow).split("<br>")) == 2  # "written by the model" on a line of its own
    assert narrow.layout.margin.b > wide.layout.margin.b and narrow.layout.margin.t > wide.layout.margin.t


def test_pieces_read_as_the_text_they_stand_for():
    from viz._text import readable

    assert readable("Ġthe") == " the" and readable("▁the") == " the"  # byte-level BPE's, SentencePiece's space
    assert readable("Ã¼") == "ü" and readable("ĠcafÃ©") == " café" and readable("âĢĶ") == "—"  # UTF-8 bytes
    assert readable("Ċ") == "↵" and readable("<0x0A>") == "↵"  # a new line, seen
    assert readable("##ing") == "##ing" and readable("café") == "café" and readable("ł") == "ł"  # WordPiece's own


def test_the_strip_shows_pieces_as_text_and_the_raw_piece_and_id_in_the_hover():
    fig = viz.token_strip(
        ["<|im_start|>", "Ġanimal", "Ã¼", "ber"], [1, 3161, 2, 3], [0] * 4, [True, False, False, False]
    )
    piece = next(t for t in fig.data if t.name == "piece")
    assert list(piece.text) == ["&lt;|im_start|&gt;", " animal", "ü", "ber"] and not any("Ġ" in t for t in piece.text)
    assert piece.hovertext[1] == "position 1:  animal (id 3161, piece Ġanimal, segment A)"
    assert piece.hovertext[3] == "position 3: ber (id 3, segment A)"  # its own text: no piece repeated
