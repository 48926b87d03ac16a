"""Presentation mode's Masks view and titles: each of its figures fits the first screen, the padded sentence's map
names that sentence, and a title too long for its line is cut between words, never inside one."""

from __future__ import annotations

import json

import pytest
from families import make_family
from test_app import SENTENCE, no_errors, start

from ui.page.present import figure_height
from ui.state.state import SHORT_SECOND
from viz._style import cut_at_word


@pytest.fixture(scope="module")
def masks():
    at = start(present="1", view="masks", layer="2", head="3", s=SENTENCE)
    no_errors(at)
    return at


def test_every_figure_of_the_masks_view_fits_the_presentation_screen(masks):
    layouts = [json.loads(c.proto.spec)["layout"] for c in masks.get("plotly_chart")]
    assert len(layouts) >= 4
    for layout in layouts:
        assert layout["height"] <= figure_height(), (layout.get("title"), layout["height"])


def test_the_padded_map_names_the_padded_sentence_and_the_masks_have_titles_of_their_own(masks):
    texts = [(json.loads(c.proto.spec)["layout"].get("title") or {}).get("text", "") for c in masks.get("plotly_chart")]
    [padded] = [t for t in texts if "padded" in t]
    assert SHORT_SECOND in padded and "The animal" not in padded, padded
    assert any(t.startswith("Padding mask · ") for t in texts), texts  # a title the layout made room for
    assert any("causal mask · " in t for t in texts), texts


def test_the_padded_maps_padding_is_named_pad_not_the_pad_piece(tmp_path):
    """A decoder pads with a real token (GPT-2's end of text, SmolLM2's <|im_end|>): the padded sentence's map
    names those positions [PAD], as the padding mask does."""
    folder = make_family(tmp_path / "gpt2", "gpt2")
    at = start(model=str(folder), view="masks", layer="1", head="0", s=SENTENCE)
    no_errors(at)
    [padded] = [
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "padded" in (json.loads(c.proto.spec)["layout"].get("title") or {}).get("text", "")
    ]
    columns = padded["data"][0]["x"]  # each column's category: "piece·position"
    kept = len(columns) - sum(c.startswith("[PAD]·") for c in columns)
    assert 0 < kept < len(columns)  # the short sentence, then its padding
    for axis in (padded["layout"]["xaxis"], padded["layout"]["yaxis"]):
        shown = dict(zip(axis["tickvals"], axis["ticktext"]))
        assert all(text == "[PAD]" for value, text in shown.items() if int(value.rsplit("·", 1)[1]) >= kept), shown
        assert "endoftext" not in " ".join(shown.values()), shown


def test_a_long_title_is_cut_between_words():
    text = "Q projection, head 0"
    for room in range(2, len(text) + 1):
        cut = cut_at_word(text, room)
        assert len(cut) <= room
        if cut != text:
            kept = cut.removesuffix("…")
            assert text.startswith(kept) and (text[len(kept)] in " ," or " " not in text[:room]), (room, cut)


def test_a_presentation_title_keeps_whole_words():
    at = start(present="1", view="shapeflow", layer="2", head="3", s=SENTENCE)
    no_errors(at)
    for c in at.get("plotly_chart"):
        title = (json.loads(c.proto.spec)["layout"].get("title") or {}).get("text", "")
        for part in title.split(" · "):
            if part.endswith("…"):
                kept = part.removesuffix("…")
                whole = {w.rstrip(",:") for w in (SENTENCE + " L2 H3 input x, head 3: softmax").split()}
                assert kept.split()[-1].rstrip(",:") in whole, title  # not "hea…"
