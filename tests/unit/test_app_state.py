"""What the page keeps: choices across runs (an empty Run included), every choice in the URL and back,
and the report of the view in use."""

from __future__ import annotations

import json
import re

import pytest
from test_app import SENTENCE, no_errors, start, submit

VIEWS = [
    "head",
    "overview",
    "flow",
    "masks",
    "coref",
    "stats",
    "rollout",
    "mixing",
    "qk",
    "ablation",
    "efficient",
    "global",
    "disentangled",
    "cross",
    "next",
    "lens",
    "walk",
]


def charts(at) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


@pytest.mark.parametrize("empty", ["", "   ", "\u200b\u200b"])
@pytest.mark.parametrize("view", ["head", "overview", "flow"])
def test_a_valid_sentence_after_an_empty_run_draws_the_view(view, empty):
    at = start(view=view)
    submit(at, empty)
    no_errors(at)
    submit(at, SENTENCE)
    no_errors(at)
    assert at.segmented_control(key="view").value == start(view=view).segmented_control(key="view").value
    assert len(at.get("plotly_chart")) >= 2  # the token strip and the view's figure
    assert not any("went wrong" in e.value for e in at.error)


def test_every_view_after_an_empty_run():
    at = start()
    submit(at, "")
    submit(at, SENTENCE)
    no_errors(at)
    labels = at.segmented_control(key="view").options
    assert (
        len(labels) == len(VIEWS) - 4
    )  # the bundled encoder's: not DeBERTa terms, Cross-attention, Next token, Logit lens
    for label in labels:
        at.segmented_control(key="view").set_value(label).run()
        no_errors(at)


# every choice on the page, as a link sets it: (URL parameters, widget key, expected widget value)
CHOICES = [
    (dict(view="head", draw="lines", heads="1,4"), "line_heads", [1, 4]),
    (dict(view="head", draw="lines"), "draw", "Lines"),
    (dict(view="head", hide="1", renorm="0"), "renormalize", False),
    (dict(view="head", hide="1"), "hide_special", True),
    (dict(view="head", merge="1"), "merge_words", True),
    (dict(view="overview", patterns="1"), "overview_patterns", True),
    (dict(view="overview", sink="weighted"), "overview_sinks", "Value-weighted"),
    (dict(view="shapeflow", padded="1"), "shapeflow_padded", True),
    (dict(view="coref", coref="suite"), "coref_mode", "Suite"),
    (dict(view="coref", coref="pairs"), "coref_mode", "Minimal pairs"),
    (dict(view="rollout", derived="flow"), "rollout_kind", "Flow"),
    (dict(view="qk", query="3"), "qk_query", 3),
    (dict(view="ablation", ablate="1.2,3.4", ablation="uniform"), "ablate_heads", [(1, 2), (3, 4)]),
    (dict(view="ablation", ablation="uniform"), "ablate_mode", "Uniform attention"),
    (dict(view="efficient", kv="3"), "gqa_kv", 3),
]


def widget_value(at, key):
    return at.session_state[key]


@pytest.mark.parametrize("params, key, value", CHOICES, ids=[c[1] + "-" + c[0]["view"] for c in CHOICES])
def test_a_link_restores_each_choice_and_writes_it_back(params, key, value):
    at = start(layer="1", head="2", **params)
    no_errors(at)
    assert widget_value(at, key) == value
    written = {k: str(v).strip("[]'") for k, v in at.query_params.items()}
    for name, expected in params.items():
        assert written.get(name) == expected, (name, written)


def test_choices_made_on_the_page_go_into_the_url():
    at = start(layer="1", head="2")
    at.checkbox(key="hide_special").check().run()
    at.checkbox(key="merge_words").check().run()
    at.radio(key="draw").set_value("Lines").run()
    at.multiselect(key="line_heads").select(5).select(7).run()
    no_errors(at)
    written = {k: str(v).strip("[]'") for k, v in at.query_params.items()}
    assert written["hide"] == "1" and written["merge"] == "1" and written["draw"] == "lines"
    assert written["heads"] == "5,7"
    assert "renorm" not in written  # the default is not written
    # the choices survive a visit to another view and an empty Run
    at.segmented_control(key="view").set_value("Overview").run()
    submit(at, " ")
    submit(at, SENTENCE)
    at.segmented_control(key="view").set_value("Head").run()
    assert at.radio(key="draw").value == "Lines" and at.multiselect(key="line_heads").value == [5, 7]
    assert at.checkbox(key="hide_special").value and at.checkbox(key="merge_words").value


def test_coreference_choices_in_the_link():
    at = start(view="coref", pronoun="7", candidates="1,4", answer="4", layer="0", head="0")
    no_errors(at)
    assert at.selectbox(key="coref_pronoun").value == 7
    assert at.multiselect(key="coref_candidates").value == [1, 4]
    assert at.selectbox(key="coref_answer").value == 4
    written = {k: str(v).strip("[]'") for k, v in at.query_params.items()}
    assert written["pronoun"] == "7" and written["candidates"] == "1,4" and written["answer"] == "4"


@pytest.mark.parametrize(
    "params, notice",
    [
        (dict(draw="sideways"), "draw is not one of heatmap, lines"),
        (dict(hide="yes"), "hide is not 0 or 1"),
        (dict(heads="1,x"), "heads is not a number"),
        (dict(ablate="1-2"), "ablate is not layer.head pairs"),
        (dict(view="coref", pronoun="999", candidates="1,500"), "Pick the pronoun and at least two"),
        (dict(view="qk", query="999"), None),
        (dict(view="efficient", kv="7"), None),
        (dict(view="coref", coref="pairs", pair="99"), None),
    ],
)
def test_bad_choices_in_a_link_fall_back_with_a_notice(params, notice):
    at = start(layer="1", head="2", **params)
    no_errors(at)
    if notice:
        assert any(notice in i.value for i in at.info), [i.value for i in at.info]
    assert len(at.get("plotly_chart")) >= (1 if params.get("view") == "coref" else 2)


def test_the_report_holds_the_figures_of_the_view_in_use():
    at = start(view="coref", coref="suite", layer="1", head="2")
    no_errors(at)
    names = [name for name, _ in at.session_state["page_figures"]]
    assert "coref-accuracy" in names and "coref-ranked" in names
    assert not any(name.startswith("layer") or name == "overview" for name in names)
    at.segmented_control(key="view").set_value("Overview").run()
    names = [name for name, _ in at.session_state["page_figures"]]
    assert "overview" in names and "coref-accuracy" not in names


def test_report_page_names_the_view_and_choices():
    import viz

    at = start(view="head", hide="1", layer="1", head="2")
    figures = at.session_state["page_figures"]
    details = at.session_state["page_details"]  # the header rows the report button builds from the choices
    facts = [("View", "Head"), ("Layer", "1"), ("Head", "2"), ("Hide [CLS]/[SEP]", "yes")]
    assert all(fact in details for fact in facts), details
    page = viz.html_report(SENTENCE, "", "model", [(n, f) for n, f in figures], details=details)
    for name, value in facts:
        assert re.search(rf"<dt>{re.escape(name)}</dt><dd>{re.escape(value)}</dd>", page.replace("&#x27;", "'"))
