"""The coreference view's suites through AppTest: the set picker and its sources, grouping, intervals,
the public sets' own measures and a second model. Most flows use the tiny random checkpoint and small
uploads in the span format, so they run in seconds."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT
from test_app import chart, decode, no_errors, start

from attention.analysis.coref import parse_examples, score_heads
from attention.analysis.coref.metrics import compare_models, gap_metrics

# the tiny checkpoint's vocabulary holds these words (tests/conftest.py)
LINES = [
    ("the cat sat on the mat because it was big.", ["cat", "mat"], 0, "male", "a"),
    ("the cat sat on the mat because it was small.", ["cat", "mat"], 1, "female", "a"),
    ("the dog ran to the book because it was tired.", ["dog", "book"], 0, "male", "b"),
    ("the dog ran to the book because it was big.", ["dog", "book"], 1, "female", "b"),
    ("the mouse sat on the mat because it was tired.", ["mouse", "mat"], 0, "male", "c"),
    ("the mouse sat on the mat because it was big.", ["mouse", "mat"], 1, "female", "c"),
]


def span_lines() -> list[dict]:
    rows = []
    for text, candidates, answer, gender, frame in LINES:
        spans = [{"text": c, "start": text.index(c)} for c in candidates]
        rows.append(
            {
                "text": text,
                "pronoun": {"text": "it", "start": text.index(" it ") + 1},
                "candidates": spans,
                "answer": answer,
                "gender": gender,
                "frame": frame,
            }
        )
    return rows


def upload(at, rows: list[dict], name: str = "mine.jsonl"):
    """What a valid upload leaves in the session (AppTest cannot drive the file box)."""
    from ui.coref.coref_data import digest

    examples = parse_examples("\n".join(json.dumps(r) for r in rows))
    at.session_state["coref_suite"] = (name, examples, "upload:" + digest(examples))
    at.selectbox(key="coref_set").select("Upload")
    return at.run(), examples


@pytest.fixture
def tiny(tiny_dir):
    at = start(view="coref", coref="suite", model=str(tiny_dir))
    no_errors(at)
    return at


def test_the_picker_names_each_public_sets_source_licence_and_citation(tiny):
    at = tiny
    for label, licence, cite in [
        ("Winogender", "MIT", "Rudinger"),
        ("GAP validation", "Apache License 2.0", "Webster"),
    ]:
        at.selectbox(key="coref_set").select(label).run()
        no_errors(at)
        facts = " ".join(c.value for c in at.caption)
        assert licence in facts and cite in facts
        source = next(c.value for c in at.caption if c.value.startswith("Source: "))
        assert "https://github.com/" in source and "\\" not in source  # a plain address, no escapes to show
    assert at.query_params["set"] in ("gapval", ["gapval"])
    assert any("left out" in c.value for c in at.caption)  # passages past the tiny model's 64 positions


def test_an_upload_is_scored_and_upload_without_a_file_asks_for_one(tiny, tiny_dir):
    from attention import load_model

    at = tiny
    at.selectbox(key="coref_set").select("Upload").run()
    no_errors(at)
    assert any("Upload a JSONL file" in i.value for i in at.info)
    at, examples = upload(at, span_lines())
    no_errors(at)
    model, tokenizer = load_model(str(tiny_dir))
    result = score_heads(model, tokenizer, examples)
    np.testing.assert_array_equal(decode(chart(at, "accuracy of each head")["data"][0]["z"]), result.accuracy)


def test_grouping_draws_a_grid_per_group_and_the_paired_difference(tiny, tiny_dir):
    from attention import load_model
    from attention.analysis.coref import group
    from attention.analysis.coref.metrics import best_head, paired_groups

    at, examples = upload(tiny, span_lines())
    assert at.selectbox(key="coref_by").options == ["none", "gender", "frame"]
    at.selectbox(key="coref_by").select("gender").run()
    no_errors(at)
    result = score_heads(*load_model(str(tiny_dir)), examples)
    groups = group(result, "gender")
    np.testing.assert_array_equal(decode(chart(at, "accuracy, gender = male")["data"][0]["z"]), groups["male"].accuracy)
    np.testing.assert_allclose(
        decode(chart(at, "accuracy male − female")["data"][0]["z"]), groups["male"].accuracy - groups["female"].accuracy
    )
    test = paired_groups(result, "gender", "male", "female", ("frame",), *best_head(result))
    note = next(c.value for c in at.caption if "Paired by" in c.value).replace("\\", "")
    assert f"{test.n} pairs" in note and f"p = {test.p:.3g}" in note
    written = {k: str(v).strip("[]'") for k, v in at.query_params.items()}
    assert (written["by"], written["ga"], written["gb"]) == ("gender", "male", "female")
    at.selectbox(key="coref_group_b").select("male").run()
    assert any("two different groups" in i.value for i in at.info)


def test_a_link_restores_the_set_and_the_grouping(tiny_dir):
    at = start(view="coref", coref="suite", model=str(tiny_dir), set="winogender", by="gender", ga="female", gb="male")
    no_errors(at)
    assert at.selectbox(key="coref_set").value == "Winogender"
    assert (at.selectbox(key="coref_group_a").value, at.selectbox(key="coref_group_b").value) == ("female", "male")
    assert any("Paired by" in c.value for c in at.caption)  # each template's male and female sentence


def test_gap_shows_the_held_out_best_head_and_f1(tiny, tiny_dir):
    from attention import load_model
    from attention.analysis.coref import load_examples
    from attention.analysis.coref.metrics import held_out_best

    at = tiny
    at.selectbox(key="coref_set").select("GAP validation").run()
    no_errors(at)
    model, tokenizer = load_model(str(tiny_dir))
    dev, val = (
        score_heads(model, tokenizer, load_examples(ROOT / "data" / f"gap-{s}.jsonl"))
        for s in ("development", "validation")
    )
    held = held_out_best(dev, val)
    note = next(c.value for c in at.caption if "Chosen on development" in c.value)
    assert f"layer {held.layer}, head {held.head}" in note and f"{held.accuracy:.1%}" in note.replace("\\", "")
    table = next(d.value for d in at.dataframe if "F1 overall" in d.value.columns)
    f1 = gap_metrics(val)
    assert table["F1 overall"].tolist() == [
        round(float(f1["heads"]["overall"][held.layer, held.head]), 3),
        round(float(f1["nearest"]["overall"]), 3),
        round(float(f1["first"]["overall"]), 3),
    ]


def test_winogender_shows_the_gender_gap_per_head(tiny_dir):
    from attention import load_model
    from attention.analysis.coref import load_examples
    from attention.analysis.coref.metrics import winogender_bias

    at = start(view="coref", coref="suite", model=str(tiny_dir), set="winogender")
    no_errors(at)
    result = score_heads(*load_model(str(tiny_dir)), load_examples(ROOT / "data" / "winogender.jsonl"))
    np.testing.assert_allclose(decode(chart(at, "accuracy male − female")["data"][0]["z"]), winogender_bias(result).gap)


def test_a_second_model_is_compared_and_a_bad_one_is_a_message(tiny, tiny_dir, tmp_path):
    from conftest import make_tiny

    from attention import load_model

    other_dir = make_tiny(tmp_path / "other", seed=1)
    at, examples = upload(tiny, span_lines())
    at.text_input(key="coref_compare_input").input(str(other_dir))
    next(b for b in at.button if b.label == "Compare").click()
    at.run()
    no_errors(at)
    a, b = (score_heads(*load_model(str(d)), examples) for d in (tiny_dir, other_dir))
    np.testing.assert_array_equal(decode(chart(at, "accuracy, the second model")["data"][0]["z"]), b.accuracy)
    test = compare_models(a, b).test
    assert any(f"p = {test.p:.3g}" in c.value.replace("\\", "") for c in at.caption)
    assert str(at.query_params["vs"]).strip("[]'") == str(other_dir)
    at.text_input(key="coref_compare_input").input(str(tmp_path / "missing"))
    next(b for b in at.button if b.label == "Compare").click()
    at.run()
    assert not at.exception
    assert any("stays as it was" in e.value for e in at.error)
    chart(at, "accuracy, the second model")  # the previous comparison is kept


def test_the_built_in_suite_with_the_bundled_model_has_intervals_and_groups(minilm):
    from attention.analysis.coref import load_examples
    from attention.analysis.coref.stats import clopper_pearson
    from ui.views.coref import accuracy_csv

    at = start(view="coref", coref="suite", by="cue")
    no_errors(at)
    result = score_heads(*minilm, load_examples(ROOT / "data" / "coref_examples.jsonl"))
    bars = next(
        f["data"][0]
        for f in (json.loads(e.proto.spec) for e in at.get("plotly_chart"))
        if f["data"][0]["type"] == "bar"
    )
    layer, head, best = result.ranked(1)[0]
    low, high = clopper_pearson(result.correct.sum(axis=0), result.n)
    assert bars["y"][0] == f"L{layer} H{head}"
    np.testing.assert_allclose(decode(bars["error_x"]["arrayminus"])[0], best - low[layer, head])
    np.testing.assert_allclose(decode(bars["error_x"]["array"])[0], high[layer, head] - best)
    csv = accuracy_csv(result).splitlines()
    assert csv[0].split(",")[:10] == [
        "layer",
        "head",
        "accuracy",
        "correct",
        "examples",
        "baseline_nearest",
        "baseline_first",
        "ci95_low",
        "ci95_high",
        "p_vs_best_holm_71",
    ]
    first = csv[1].split(",")
    assert first[:3] == [str(layer), str(head), f"{best:.4f}"]
    assert first[7:10] == [
        f"{low[layer, head]:.4f}",
        f"{high[layer, head]:.4f}",
        "",
    ]  # the best: no test against itself
    assert at.selectbox(key="coref_by").value == "cue"
    chart(at, "accuracy, cue = winograd")
    assert any("do not pair up" in c.value for c in at.caption)


def test_a_stopped_scoring_waits_to_be_started_again(tiny, tiny_dir):
    from ui.coref.coref_data import digest

    rows = span_lines()[1:5]  # examples no other test scores: the scores are kept for the whole process
    key = "upload:" + digest(parse_examples("\n".join(json.dumps(r) for r in rows)))
    tiny.session_state["coref_stopped"] = (str(tiny_dir), key)  # what the Stop button leaves
    at, _ = upload(tiny, rows)
    no_errors(at)
    assert any("was stopped" in i.value for i in at.info)
    assert not [c for c in at.get("plotly_chart") if "accuracy of each head" in c.proto.spec]
    next(b for b in at.button if b.label == "Score it").click()
    at.run()
    no_errors(at)
    chart(at, "accuracy of each head")


def test_a_suite_this_model_cannot_score_is_a_message():
    rows = [
        {
            "text": "The cat didn't see the dog because it was dark.",
            "pronoun": "it",
            "candidates": ["didn't", "dog"],
            "answer": "dog",
        }
    ]
    at = start(view="coref", coref="suite")
    at, _ = upload(at, rows)
    assert not at.exception
    assert any("cannot be scored with this model" in e.value for e in at.error)


def test_the_best_heads_are_tested_against_the_best_with_holm(minilm):
    from attention.analysis.coref import load_examples
    from attention.analysis.coref.stats import holm, mcnemar_exact

    at = start(view="coref", coref="suite")
    no_errors(at)
    result = score_heads(*minilm, load_examples(ROOT / "data" / "coref_examples.jsonl"))
    everyone = [(layer, h) for layer, h, _ in result.ranked()]
    heads = everyone[:10]
    (bl, bh) = heads[0]
    raw = [mcnemar_exact(result.correct[:, layer, h], result.correct[:, bl, bh]).p for layer, h in everyone[1:]]
    column = "p vs best (Holm over 71)"  # the family: every other head, as in the CSV's p_vs_best_holm_71
    table = next(d.value for d in at.dataframe if column in d.value.columns)
    assert list(table["head"]) == [f"L{layer} H{h}" for layer, h in heads]
    assert table[column].iloc[0] == "—"
    assert [float(p) for p in table[column].iloc[1:]] == pytest.approx(
        [float(f"{p:.3g}") for p in holm(raw)[:9]], rel=1e-3
    )
    assert any("Holm" in c.value for c in at.caption)
