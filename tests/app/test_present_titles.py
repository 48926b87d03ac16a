"""Presentation mode: every figure a view draws carries a one-line title that says what it shows (the
layer and head where the view shows one head) and of which sentence, so the PNG the camera icon saves does
too. The token strips are not a view's result and keep none."""

from __future__ import annotations

import html
import json
import re

import pytest
from test_app import no_errors, start

from ui.page import registry
from ui.page.page import ONE_HEAD
from ui.state.state import DEFAULT_SENTENCE, SHORT_SECOND

STRIP_HEIGHT_PX = 305  # the token strip's figure, which carries no title


def titles(at) -> list[str]:
    """The titles of the page's figures other than the token strips ("" where one has none)."""
    found = []
    for chart in at.get("plotly_chart"):
        layout = json.loads(chart.proto.spec)["layout"]
        text = (layout.get("title") or {}).get("text") or ""
        if "tokens" not in chart.proto.id and layout.get("height") != STRIP_HEIGHT_PX:
            found.append(text)
    return found


def names(title: str, sentence: str) -> bool:
    """Whether the title's line ends with the sentence, whole or cut after a word ("The animal didn't…")."""
    said = html.unescape(title).rsplit(" · ", 1)[-1]
    kept = said.removesuffix("…")
    return bool(kept) and sentence.startswith(kept) and (said == sentence or sentence[len(kept)] == " ")


# views that draw nothing on the bundled BERT: the walk's first step, the global view until its Compute button,
# and the views of what this model has not (an encoder-decoder's cross-attention, a next-token head, DeBERTa's terms)
NOT_DRAWN_HERE = ("walk", "global", "cross", "next", "disentangled")


@pytest.mark.parametrize("view", [v.key for v in registry.VIEWS if v.key not in NOT_DRAWN_HERE])
def test_every_figure_of_a_view_names_the_sentence_and_its_head(view):
    at = start(present="1", view=view, layer="3", head="1")
    no_errors(at)
    shown = titles(at)
    assert shown, "the view drew no figure"
    for title in shown:
        if view == "masks" and "padded" in title:
            assert names(title, SHORT_SECOND), title  # the padded sentence's map names that sentence
        else:
            assert names(title, DEFAULT_SENTENCE), title
        if view in ONE_HEAD:
            assert "L3 H1" in title or "layer 3, head 1" in title.lower(), title


@pytest.mark.parametrize("step", ["7", "11"])
def test_walk_steps_figures_name_the_sentence(step):
    at = start(present="1", view="walk", walk=step, layer="3", head="1")
    no_errors(at)
    shown = titles(at)
    assert shown, "the step drew no figure"
    assert all(names(t, DEFAULT_SENTENCE) and ("L3 H1" in t or "layer 3, head 1" in t.lower()) for t in shown), shown


def test_ordinary_mode_keeps_the_figures_own_titles():
    at = start(view="overview")
    no_errors(at)
    assert not any("The animal didn" in t for t in titles(at))


@pytest.mark.parametrize("step", ["2", "3"], ids=["QKV", "heads"])
def test_walk_tensors_side_by_side_keep_their_shapes_whole_the_sentence_on_a_second_line(step):
    """Three tensors across (Q, K, V) and two (Q and K split into heads), each 330-504 px wide: the title's own
    words were cut to make room for the sentence ("L3 H1 · Q… · The animal…", "[1 × 12 × 16 ×… · The…")."""
    at = start(present="1", view="walk", walk=step, layer="3", head="1")
    no_errors(at)
    shown = titles(at)
    assert len(shown) >= 2, shown
    for title in shown:
        own, said = html.unescape(title).split("<br>")
        assert re.fullmatch(r"[QKV] \w+ \[1( ?× ?\d+)+\]", own), title  # what it shows, its shape whole
        assert said.startswith("L3 H1 · ") and names(said, DEFAULT_SENTENCE), title
