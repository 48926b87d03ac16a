"""margin_change: what ablating heads does to a coreference example's pronoun → answer margin."""

from __future__ import annotations

import numpy as np
import pytest

from attention import encode
from attention.analysis.ablation import ablate, margin_change
from attention.analysis.coref import CorefExample, ExampleError

SENTENCE = "The animal didn't cross the street because it was too tired."
EXAMPLE = CorefExample(SENTENCE, "it", ("animal", "street"), "animal")


def by_hand(maps: np.ndarray, tokens: list[str]) -> np.ndarray:
    """it → animal minus it → street, each a single piece in MiniLM's vocabulary: (n_layers, H)."""
    it, animal, street = tokens.index("it"), tokens.index("animal"), tokens.index("street")
    return maps[:, :, it, animal] - maps[:, :, it, street]


@pytest.fixture(scope="module")
def ablated(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, SENTENCE)
    mask = np.ones((6, 12), dtype=np.float32)
    mask[2, [0, 3, 7]] = 0
    return enc, ablate(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, head_mask=mask, ablation="uniform")


def test_the_margin_before_and_after_is_the_maps_own(ablated):
    enc, result = ablated
    change = margin_change(result, EXAMPLE, enc.tokens, enc.word_ids, enc.offsets)
    before, after = by_hand(result.base_attentions, enc.tokens), by_hand(result.ablated_attentions, enc.tokens)
    layer, head = np.unravel_index(np.argmax(before), before.shape)
    assert change.best == (layer, head)
    np.testing.assert_allclose(
        [change.best_before, change.best_after], [before[layer, head], after[layer, head]], rtol=1e-6
    )
    np.testing.assert_allclose([change.mean_before, change.mean_after], [before.mean(), after.mean()], rtol=1e-5)
    assert (change.preferring_before, change.preferring_after) == ((before > 0).sum(), (after > 0).sum())
    np.testing.assert_array_equal(after[:2], before[:2])  # layers before the ablated one keep their maps
    assert change.mean_after != change.mean_before


def test_nothing_ablated_changes_no_margin(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, SENTENCE)
    result = ablate(model, enc.input_ids, enc.attention_mask, enc.token_type_ids)
    change = margin_change(result, EXAMPLE, enc.tokens, enc.word_ids, enc.offsets)
    assert change.best_before == change.best_after and change.mean_before == change.mean_after


def test_words_not_in_the_sentence_are_an_example_error(ablated):
    enc, result = ablated
    with pytest.raises(ExampleError):
        margin_change(
            result, CorefExample(SENTENCE, "she", ("animal", "street"), "animal"), enc.tokens, enc.word_ids, enc.offsets
        )
