"""GAP F1, Winogender's gender gap, the held-out best head, model against model, and the command line."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, make_tiny

from attention.analysis.coref import CorefResult, ExampleScore, load_examples, parse_example, score_heads
from attention.analysis.coref.cli import main
from attention.analysis.coref.mentions import Located
from attention.analysis.coref.metrics import (
    compare_models,
    gap_counts,
    gap_metrics,
    heads_against_best,
    held_out_best,
    paired_groups,
    winogender_bias,
)
from attention.analysis.coref.stats import f1, mcnemar_exact


def scored(index, answer, gender, to_a, to_b, nearest_is_a=True):
    """One example scored by a single head attending `to_a`, `to_b` to candidates A and B."""
    text = "Ann met Bea and she left."
    ex = parse_example(
        {
            "text": text,
            "pronoun": {"text": "she", "start": 16},
            "candidates": [{"text": "Ann", "start": 0}, {"text": "Bea", "start": 8}],
            "answer": answer,
            "gender": gender,
        }
    )
    located = Located([4], [[1], [3]] if nearest_is_a else [[3], [1]])
    attention = np.array([[[to_a, to_b]]])  # (1 layer, 1 head, 2 candidates)
    right = None if ex.answer_index is None else attention[..., ex.answer_index] > attention[..., 1 - ex.answer_index]
    return ExampleScore(ex, [], located, attention, right, index)


def result_of(scores) -> CorefResult:
    details = [s for s in scores if s.correct is not None]
    return CorefResult(
        np.mean([d.correct for d in details], axis=0),
        {"nearest": 0.0, "first": 0.0},
        details,
        (),
        tuple(s for s in scores if s.correct is None),
    )


def test_gap_counts_by_hand():
    predicted = np.array([0, 1, -1, 0, 1])  # the head names A, B, neither, A, B
    gold = np.array([0, 0, 1, -1, -1])  # A right; B wrong (fp + fn); a miss (fn); two names for "neither" (fp)
    tp, fp, fn = gap_counts(predicted, gold)
    assert (tp, fp, fn) == (1, 3, 2)


def test_gap_metrics_by_hand():
    scores = [
        scored(0, 0, "masculine", 0.6, 0.2),
        scored(1, 1, "masculine", 0.7, 0.1),  # M: tp 1, fp 1, fn 1
        scored(2, 1, "feminine", 0.1, 0.5),
        scored(3, None, "feminine", 0.3, 0.3),  # F: tp 1, tie names none
        scored(4, None, "feminine", 0.2, 0.4),
    ]  # F: fp 1
    metrics = gap_metrics(result_of(scores))
    heads = metrics["heads"]
    assert heads["masculine"][0, 0] == pytest.approx(f1(1, 1, 1))  # 0.5
    assert heads["feminine"][0, 0] == pytest.approx(f1(1, 1, 0))  # 2/3
    assert heads["overall"][0, 0] == pytest.approx(f1(2, 2, 1))  # 4/7
    assert heads["bias"][0, 0] == pytest.approx((2 / 3) / 0.5)
    # nearest names B (closest before the pronoun): M tp 1, fp 1, fn 1; F tp 1, fp 2
    assert metrics["nearest"]["masculine"] == pytest.approx(0.5) and metrics["nearest"]["feminine"] == pytest.approx(
        0.5
    )
    # first names A: M tp 1, fp 1, fn 1; F tp 0, fp 3, fn 1
    assert metrics["first"]["masculine"] == pytest.approx(0.5) and metrics["first"]["feminine"] == 0


def two_heads(rights: list[tuple[bool, bool]], first_index: int = 0) -> CorefResult:
    """A result of two heads (layer 0) from each example's right/wrong pair."""
    base = scored(0, 0, "masculine", 0.9, 0.1)
    details = [
        ExampleScore(base.example, [], base.located, np.zeros((1, 2, 2)), np.array([r]), first_index + i)
        for i, r in enumerate(rights)
    ]
    return CorefResult(np.mean([d.correct for d in details], axis=0), {"nearest": 0.25, "first": 0.5}, details)


def test_held_out_best_and_model_comparison():
    dev = two_heads([(True, False)] * 3 + [(True, True)])  # L0H0 1.0, L0H1 0.25
    val = two_heads([(True, True), (False, True), (False, True), (True, False)])  # L0H0 0.5, L0H1 0.75
    h = held_out_best(dev, val)
    assert (h.layer, h.head, h.chosen_accuracy, h.accuracy, h.n) == (0, 0, 1.0, 0.5, 4)
    assert h.best_there == (0, 1, 0.75) and h.interval[0] < 0.5 < h.interval[1]
    assert h.baselines == {"nearest": 0.25, "first": 0.5}
    c = compare_models(dev, val)  # as if two models had scored the same four examples
    assert c.best_a == (0, 0, 1.0) and c.best_b == (0, 1, 0.75)
    assert (c.test.only_a, c.test.only_b, c.test.n) == (1, 0, 4)  # dev L0H0 right everywhere, val L0H1 misses #3
    later = two_heads([(True, True)] * 2, first_index=2)  # only examples 2 and 3 counted by the second
    assert compare_models(dev, later).test.n == 2


def test_heads_against_best_uses_holm(minilm):
    model, tokenizer = minilm
    examples = load_examples(ROOT / "data" / "coref_examples.jsonl")
    result = score_heads(model, tokenizer, examples)
    (bl, bh, _), *rest = result.ranked(4)
    heads = [(bl, bh)] + [(layer, h) for layer, h, _ in rest]
    tests = heads_against_best(result, heads)
    assert tests[0][1] == 1.0 and tests[0][0].p == 1.0
    raw = [mcnemar_exact(result.correct[:, layer, h], result.correct[:, bl, bh]).p for layer, h in heads[1:]]
    assert [t.p for t, _ in tests[1:]] == pytest.approx(raw)
    assert all(adj >= p for (_, adj), p in zip(tests[1:], raw))


def test_winogender_gap_and_pairs(minilm):
    model, tokenizer = minilm
    examples = load_examples(ROOT / "data" / "winogender.jsonl")[:120]
    result = score_heads(model, tokenizer, examples, by="gender")
    bias = winogender_bias(result)
    groups = result.by_group
    np.testing.assert_allclose(bias.gap, groups["male"].accuracy - groups["female"].accuracy)
    assert len(bias.occupations) == 10 and bias.correlation.shape == (6, 12)
    test = paired_groups(result, "gender", "male", "female", ("occupation", "participant", "answer_role"), 3, 1)
    assert test.n == 40


@pytest.mark.slow  # 22 s on a busy 2-core machine
def test_command_line_on_gap_with_groups_held_out_and_a_second_model(capsys, tmp_path):
    dev, val = tmp_path / "dev.jsonl", tmp_path / "val.jsonl"
    lines = (ROOT / "data" / "gap-development.jsonl").read_text(encoding="utf-8").splitlines()
    dev.write_text("\n".join(lines[:40]) + "\n", encoding="utf-8")
    val.write_text("\n".join(lines[40:70]) + "\n", encoding="utf-8")
    tiny = make_tiny(tmp_path / "tiny", max_position_embeddings=512)
    out_csv = tmp_path / "heads.csv"
    assert (
        main(
            [
                str(dev),
                "--by",
                "gender",
                "--top",
                "3",
                "--csv",
                str(out_csv),
                "--validate-on",
                str(val),
                "--compare",
                str(tiny),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "excluded: " in printed and "no antecedent among the candidates" in printed
    assert "by gender:" in printed and "masculine" in printed and "feminine" in printed
    assert "GAP F1 on" in printed and "baseline nearest" in printed
    assert "held out: L" in printed and "compare: " in printed and "McNemar" in printed
    import csv

    rows = list(csv.DictReader(out_csv.read_text().splitlines()))
    header = list(rows[0])
    assert header[7:10] == ["ci95_low", "ci95_high", "p_vs_best_holm_71"]  # Holm over the 71 other heads
    assert sorted(header[10:12]) == ["accuracy_gender=feminine", "accuracy_gender=masculine"]
    assert header[12:] == ["held_out_accuracy", "held_out_ci95_low", "held_out_ci95_high", "model", "suite"]
    assert {(r["model"], r["suite"]) for r in rows} == {(rows[0]["model"], str(dev))} and "MiniLM" in rows[0]["model"]
    assert rows[0]["p_vs_best_holm_71"] == "" and all(0 <= float(r["p_vs_best_holm_71"]) <= 1 for r in rows[1:])
    assert len(rows) == 6 * 12  # every head of the bundled model (the tiny one is only compared)
    # the held-out columns are each head's accuracy on the other file, scored alone
    from attention import load_bert
    from attention.analysis.coref import load_examples, score_heads

    model, tokenizer = load_bert()
    held = score_heads(model, tokenizer, load_examples(val))
    for row in rows:
        assert float(row["held_out_accuracy"]) == pytest.approx(
            held.accuracy[int(row["layer"]), int(row["head"])], abs=5e-5
        )
