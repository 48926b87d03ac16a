"""Half a character: SmolLM2's byte-level BPE cuts an emoji across pieces, each of which alone decodes to "�". Such a
piece reads as its bytes ("<0xF0 0x9F>"), its raw piece in the hover, in the Next token bars, the writing line and
the token strip (AppTest, the bundled writer)."""

from __future__ import annotations

import re

import pytest
from test_app import no_errors, start
from test_app_generate import bars, charts
from test_app_lecture import writing, written_part

from attention import encode, load_model
from attention.load.sources import WRITER_NAME
from viz._text import readable

pytestmark = pytest.mark.xdist_group("smollm2")  # the modules that load SmolLM2 share a worker: one load
TEXT = "I love pizza 🍕 and café 🦜"
PROMPT = "I love pizza"
HALF = "ĠðŁ"  # " " and the first two bytes of 🍕 (F0 9F 8D 95), one of SmolLM2's pieces
GROUP = re.compile(r"<((?:0x[0-9A-F]{2} ?)+)>")


def as_bytes(shown: str) -> bytes:
    """The bytes a readable text stands for: its "<0x.. 0x..>" groups as those bytes, the rest as UTF-8."""
    out, last = b"", 0
    for group in GROUP.finditer(shown):
        out += shown[last : group.start()].encode() + bytes(int(b, 16) for b in group.group(1).split())
        last = group.end()
    return out + shown[last:].encode()


@pytest.fixture(scope="module")
def tokenizer():
    return load_model(WRITER_NAME)[1]


def test_each_piece_of_an_emoji_reads_as_its_bytes_and_together_they_are_the_text(tokenizer):
    enc = encode(tokenizer, TEXT)
    assert enc.byte_level
    shown = [readable(t, enc.byte_level) for t in enc.tokens]
    halves = [s for s in shown if GROUP.search(s)]
    assert len(halves) >= 4 and " <0xF0 0x9F>" in shown  # both emoji cut into pieces, each shown as bytes
    assert not [s for s in shown if "\ufffd" in s or re.search("[\u0080-\u017f]", s) and "é" not in s], shown
    assert as_bytes("".join(shown)) == TEXT.encode()  # nothing lost or made up
    assert readable("é") == "é" and readable("##é") == "##é"  # a WordPiece piece is its own text


@pytest.mark.slow  # 5-15 s alone: the full command runs it, the everyday selection not
def test_half_a_character_written_reads_as_its_bytes_in_the_bars_the_writing_and_the_strip(tokenizer):
    (half,) = tokenizer.convert_tokens_to_ids([HALF])
    at = start(model=WRITER_NAME, s=PROMPT, view="next", cont="1", n="1", pick=f"0.{half}")
    no_errors(at)
    assert at.session_state["continuation"].ids[-1] == half
    assert written_part(at) == " <0xF0 0x9F>" and "\ufffd" not in writing(at)  # the writing line
    assert f'title="Half a character, shown as its bytes: {HALF}"' in writing(at)  # the raw piece on hover
    fig = bars(at)
    labels = fig["data"][0]["y"]
    (k,) = [i for i, label in enumerate(labels) if "0xF0" in label]
    assert labels[k] == "␣&lt;0xF0 0x9F&gt;" and fig["data"][0]["marker"]["color"][k] == "crimson"  # written
    assert fig["data"][0]["customdata"][k][0] == f"piece {HALF}, id {half}"  # the raw piece in the hover
    strip = next(c for c in charts(at) if any("position 0:" in str(t.get("hovertext")) for t in c["data"]))
    texts = [str(t.get("text")) + str(t.get("hovertext")) for t in strip["data"]]
    assert any("&lt;0xF0 0x9F&gt;" in t for t in texts) and any(f"piece {HALF}" in t for t in texts)
    assert not any("ðŁ" in str(t.get("text")) for t in strip["data"])  # no letters of the byte alphabet


def token_ticks(at) -> list[str]:
    """Every tick label of the page's figures whose axis is over tokens (not numbered 0, 1, 2 …)."""
    ticks = []
    for fig in charts(at):
        for name, axis in fig["layout"].items():
            if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
                ticks += [t for t in axis.get("ticktext") or () if not str(t).strip().isdigit()]
    return ticks


@pytest.mark.parametrize("view", [dict(view="walk", walk="3"), dict(view="flow", step="q_proj")], ids=["walk", "flow"])
@pytest.mark.parametrize(
    "present",
    ["1", pytest.param("0", marks=pytest.mark.slow)],  # a page's rows were text already: the full command's
    ids=["present", "page"],
)
def test_the_walks_and_the_shape_flows_tensors_read_as_text_on_the_bundled_writer(view, present):
    """Every token axis of the walk's tensors and of the shape flow's tensor and map (4-5 s each on SmolLM2)."""
    at = start(model=WRITER_NAME, s=TEXT, present=present, layer="1", head="2", **view)
    no_errors(at)
    ticks = token_ticks(at)
    assert " pizza" in ticks and " &lt;0xF0 0x9F&gt;" in ticks, ticks  # words as text, half an emoji as its bytes
    assert not [t for t in ticks if re.search("[ĠðŁ]", t)], ticks  # no raw byte-level piece


CJK = "I love pizza 🍕 and 日本"  # SmolLM2 cuts 🍕 and 日 across pieces
LATIN = re.compile("[\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017f]")  # the byte alphabet's letters (Ġ, ð, Ł, æ …), not ×


def shown_texts(at) -> list[str]:
    """What the page's figures write (tick labels, cell and marker text, titles, annotations; not the hovers) and
    the options of its select boxes."""

    def strings(node, name=""):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from strings(value, key if key in ("ticktext", "text") else name)
        elif isinstance(node, list):
            for value in node:
                yield from strings(value, name)
        elif isinstance(node, str) and name in ("ticktext", "text"):
            yield node

    texts = [t for fig in charts(at) for t in strings(fig)]
    return texts + [str(option) for box in at.selectbox for option in box.options]


@pytest.mark.parametrize(
    "view",
    [
        dict(view="masks"),
        dict(view="rollout"),
        dict(view="mixing"),
        dict(view="qk", query="3"),
        dict(view="efficient"),
        dict(view="next", pos="3"),
        dict(view="lens"),
        dict(view="head", draw="lines"),
    ],
    ids=lambda view: view["view"] + ("-lines" if "draw" in view else ""),
)
def test_every_views_figures_and_boxes_read_byte_level_pieces_as_text_in_a_presentation(view):
    """Masks, Rollout, Mixing, Query·key, GQA, Next token, Logit lens and Lines on the bundled writer: " pizza" as
    text, half of 🍕 as its bytes, no raw piece ("Ġpizza", "ĠðŁ", "Ġæ") in any label, cell or box (0.5-8 s each)."""
    at = start(model=WRITER_NAME, s=CJK, present="1", layer="1", head="2", **view)
    no_errors(at)
    texts = shown_texts(at)
    assert any("0xF0 0x9F" in t for t in texts) and any("pizza" in t for t in texts), texts
    assert not [t for t in texts if LATIN.search(t)], [t for t in texts if LATIN.search(t)]
