"""A coreference suite scored again with heads ablated: the forward handed to score_heads, suite_change, and
the Ablation view's table once the Coreference view has scored the built-in suite."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT
from test_app import no_errors, start
from tiny import make_tiny

from attention.analysis.ablation import score_ablated, suite_change
from attention.analysis.coref import load_examples, score_heads
from ui.page.page import as_written


@pytest.fixture(scope="module")
def examples():
    return load_examples(ROOT / "data" / "coref_examples.jsonl")[:16]


@pytest.fixture(scope="module")
def scored(minilm, examples):
    return score_heads(*minilm, examples)


def attention(result) -> np.ndarray:
    """(n, n_layers, H, K) pronoun → candidate attention of every counted example (two candidates each)."""
    return np.stack([d.attention for d in result.details])


def test_nothing_ablated_scores_as_score_heads(minilm, examples, scored):
    again = score_ablated(*minilm, examples, np.ones((6, 12)))
    np.testing.assert_allclose(attention(again), attention(scored), atol=1e-5)
    np.testing.assert_array_equal(again.accuracy, scored.accuracy)
    assert again.n == scored.n > 0


def test_a_zeroed_head_changes_the_later_layers_only(minilm, examples, scored):
    mask = np.ones((6, 12))
    mask[2, 3] = 0
    after, before = attention(score_ablated(*minilm, examples, mask, "zero")), attention(scored)
    np.testing.assert_allclose(after[:, :2], before[:, :2], atol=1e-5)
    others = [h for h in range(12) if h != 3]
    np.testing.assert_allclose(after[:, 2, others], before[:, 2, others], atol=1e-5)
    assert np.all(after[:, 2, 3] == 0)  # its map is zeroed
    assert np.abs(after[:, 3:] - before[:, 3:]).max() > 1e-3


def test_a_bad_mask_is_refused_before_any_batch(minilm, examples):
    with pytest.raises(ValueError, match="head_mask"):
        score_ablated(*minilm, examples, np.ones((2, 2)))


def test_suite_change_reads_the_later_heads_but_the_ablated():
    before = np.array([[0.9, 0.1, 0.2], [0.5, 0.8, 0.4], [0.6, 0.3, 0.7]])
    after = np.array([[0.9, 0.1, 0.2], [0.5, 0.6, 0.3], [0.2, 0.3, 0.5]])
    change = suite_change(before, after, [(0, 2), (1, 1)])  # later: layers 1 and 2, but L1 H1
    assert change.best == (2, 2)  # L0 H0 (0.9) is before, L1 H1 (0.8) ablated
    assert (change.best_before, change.best_after) == (0.7, 0.5)
    assert change.n_heads == 5
    assert change.mean_before == pytest.approx((0.5 + 0.4 + 0.6 + 0.3 + 0.7) / 5)
    assert change.mean_after == pytest.approx((0.5 + 0.3 + 0.2 + 0.3 + 0.5) / 5)


def test_suite_change_ties_go_to_the_first_head_and_the_last_layer_has_none_after():
    flat = np.full((2, 2), 0.5)
    assert suite_change(flat, flat, [(0, 1)]).best == (1, 0)
    assert suite_change(flat, flat, [(1, 0)]) is None
    with pytest.raises(ValueError):
        suite_change(flat, np.zeros((2, 3)), [(0, 0)])
    with pytest.raises(ValueError):
        suite_change(flat, flat, [])


def test_without_a_scored_suite_the_view_says_where_to_score_one(tmp_path):
    # a folder of its own: the suite store is the process's, and another test may score the shared tiny model
    at = start(view="ablation", model=str(make_tiny(tmp_path)), set="gapval", layer="0", head="1")
    no_errors(at)
    assert any("Score a coreference suite in the Coreference view" in c.value for c in at.caption)
    assert not [d for d in at.dataframe if "change" in d.value.columns]


def test_the_view_shows_the_change_once_the_built_in_suite_is_scored(minilm):
    at = start(view="coref", coref="suite")
    no_errors(at)
    at.segmented_control(key="view").set_value("Ablation").run()
    no_errors(at)
    assert any("Coreference suite: the built-in suite" in as_written(c.value) for c in at.caption)
    table = next(d.value for d in at.dataframe if "change" in d.value.columns)
    full = load_examples(ROOT / "data" / "coref_examples.jsonl")
    before = score_heads(*minilm, full)
    heads = at.multiselect(key="ablate_heads").value  # the head the Coreference view had open
    mask = np.ones((6, 12))
    for ablated in heads:
        mask[ablated] = 0
    change = suite_change(before.accuracy, score_ablated(*minilm, full, mask).accuracy, heads)
    layer, head = change.best
    assert table["measure"].iloc[0] == f"best later head before ablation (L{layer} H{head})"
    assert list(table["before"]) == [f"{change.best_before:.1%}", f"{change.mean_before:.1%}"]
    assert list(table["after"]) == [f"{change.best_after:.1%}", f"{change.mean_after:.1%}"]
    assert table["change"].iloc[1] == f"{100 * (change.mean_after - change.mean_before):+.1f} pts"
