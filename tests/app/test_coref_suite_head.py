"""The Coreference view's Suite mode names one head everywhere: a first visit opens the suite's best (not the
typed sentence's strongest), so the notice, the Layer and Head boxes, the grid's outline, the list of examples
and the report agree; the page's own head follows the mode, a head a person chose stays. The suite's figures'
presentation titles name the suite, each twin's grid its own sentence."""

from __future__ import annotations

import html
import json

import pytest
from conftest import ROOT
from test_app import chart, no_errors, start
from test_app_report import fact, report
from test_present_titles import names, titles

from attention.analysis.coref import load_examples, score_heads
from ui.coref.coref_data import suite_store

SENTENCE_BEST = (3, 1)  # the typed sentence's strongest head on the bundled model (the first visit's notice)


@pytest.fixture(scope="module")
def best(minilm):
    """The built-in suite's best head with the bundled model."""
    result = score_heads(*minilm, load_examples(ROOT / "data" / "coref_examples.jsonl"))
    layer, head, _ = result.ranked(1)[0]
    assert (layer, head) != SENTENCE_BEST, "the test needs the suite's best to differ from the sentence's"
    return layer, head


def outlined(fig: dict) -> tuple[int, int]:
    """The head a grid outlines: its frame's centre, (layer, head)."""
    frames = {(round((s["y0"] + s["y1"]) / 2), round((s["x0"] + s["x1"]) / 2)) for s in fig["layout"]["shapes"]}
    assert len(frames) == 1, frames  # one frame on its halo
    return frames.pop()


@pytest.mark.parametrize("scored", [False, True], ids=["scored-on-the-page", "scored-before"])
def test_a_first_visit_in_suite_mode_names_the_suites_best_head_everywhere(best, scored):
    """Scored on the page, the suite's scores come after the Layer and Head boxes are drawn: the page runs again,
    and says the link's notices again."""
    layer, head = best
    with suite_store().lock:
        suite_store().items.pop(("", "builtin"), None)
    if scored:
        no_errors(start(view="coref", coref="suite", layer="0", head="0"))
        assert suite_store().get(("", "builtin")) is not None
    at = start(view="coref", coref="suite", rank="nonsense")
    no_errors(at)
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == best
    notices = [i.value for i in at.info]
    assert any(n.startswith("The link's rank is") for n in notices), notices  # said again after the scoring run
    assert any(f"Opened layer {layer}, head {head}, the best of 72 heads on the built" in n for n in notices), notices
    assert not any("Opened layer 3, head 1" in n for n in notices), notices
    assert outlined(chart(at, "accuracy of each head")) == best
    assert at.selectbox(key="coref_examples_pick").value == best
    page = report(at)
    assert (fact(page, "Layer"), fact(page, "Head")) == (str(layer), str(head))


def test_the_pages_own_head_follows_the_mode_and_a_chosen_head_stays(best):
    at = start(view="coref")
    no_errors(at)
    assert (at.session_state.layer, at.session_state.head) == SENTENCE_BEST
    at.segmented_control(key="coref_mode").set_value("Suite").run()
    no_errors(at)
    assert (at.session_state.layer, at.session_state.head) == best
    at.segmented_control(key="coref_mode").set_value("This sentence").run()
    assert (at.session_state.layer, at.session_state.head) == SENTENCE_BEST
    at.selectbox(key="head").select(5).run()  # the person's own choice: no mode moves it
    at.segmented_control(key="coref_mode").set_value("Suite").run()
    no_errors(at)
    assert (at.session_state.layer, at.session_state.head) == (SENTENCE_BEST[0], 5)


def test_a_head_in_the_link_is_kept_in_suite_mode():
    at = start(view="coref", coref="suite", layer="2", head="4")
    no_errors(at)
    assert (at.session_state.layer, at.session_state.head) == (2, 4)
    assert not any(i.value.startswith("Opened layer") for i in at.info)


def test_the_suites_figures_name_the_suite_in_presentation_mode(best):
    at = start(view="coref", coref="suite", present="1")
    no_errors(at)
    shown = [html.unescape(t) for t in titles(at)]
    assert len(shown) >= 2, shown  # the grid and the bars
    for title in shown:
        assert names(title, "the built-in suite (87 examples)") and "The animal" not in title, title


def test_each_twins_grid_names_its_own_sentence_in_presentation_mode(minilm):
    from attention.analysis.coref import twin_pairs

    examples = load_examples(ROOT / "data" / "coref_examples.jsonl")
    a, b = twin_pairs(examples)[0]
    at = start(view="coref", coref="pairs", present="1")
    no_errors(at)
    grids = [(json.loads(c.proto.spec)["layout"].get("title") or {}).get("text", "") for c in at.get("plotly_chart")]
    grids = [html.unescape(t) for t in grids if t.startswith("margin")]
    assert len(grids) == 2, grids
    for title, twin in zip(grids, (examples[a].text, examples[b].text)):
        assert names(title, twin), (title, twin)
