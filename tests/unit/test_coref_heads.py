"""The criterion a sentence's heads are ranked by (margin, specificity), checked on hand-built maps, and
the candidates suggested for a typed sentence."""

from __future__ import annotations

import numpy as np
import pytest

from attention.analysis.coref.heads import (
    MIN_SEPARATION,
    column_means,
    head_values,
    margin_of,
    ranked,
    separates,
    specificity,
    suggest_candidates,
)
from attention.analysis.coref.mentions import Located, word_attention

# tokens: 0 [CLS], 1 animal, 2 street, 3 it, 4 tired; "it" is the pronoun, animal and street the candidates
LOCATED = Located(pronoun=[3], candidates=[[1], [2]])


def maps() -> np.ndarray:
    """(1 layer, 2 heads, 5, 5). Head 0 sends every token to "animal" (0.6), the pronoun too; head 1 sends
    only the pronoun there (0.5) and the other tokens to themselves."""
    a = np.zeros((1, 2, 5, 5))
    a[0, 0, :, 1], a[0, 0, :, 0] = 0.6, 0.4  # every row alike
    a[0, 1] = np.eye(5)
    a[0, 1, 3] = [0.2, 0.5, 0.1, 0.2, 0.0]  # the pronoun's row
    return a


def test_column_means_leave_out_the_pronouns_rows():
    means = column_means(maps(), LOCATED)  # (1, 2, 2)
    np.testing.assert_allclose(means[0, 0], [0.6, 0.0])
    np.testing.assert_allclose(means[0, 1], [0.25, 0.25])  # the diagonal: 1 of the 4 other rows each


def test_a_head_that_looks_at_the_answer_from_every_token_has_no_specificity():
    a = maps()
    scores = word_attention(a, LOCATED)  # (1, 2, 2): pronoun -> animal, street
    np.testing.assert_allclose(scores[0], [[0.6, 0.0], [0.5, 0.1]])
    margin = head_values(scores, a, LOCATED, 0, "margin")
    specific = head_values(scores, a, LOCATED, 0, "specificity")
    np.testing.assert_allclose(margin[0], [0.6, 0.4])  # by margin head 0 wins ...
    np.testing.assert_allclose(specific[0], [0.0, (0.5 - 0.25) - (0.1 - 0.25)])  # ... by specificity head 1
    assert ranked(margin) == [(0, 0), (0, 1)] and ranked(specific) == [(0, 1), (0, 0)]
    np.testing.assert_allclose(specificity(scores, a, LOCATED)[0, 0], [0.0, 0.0])


def test_a_multi_piece_candidate_sums_its_columns_and_a_multi_piece_pronoun_leaves_all_its_rows_out():
    a = np.full((1, 1, 4, 4), 0.25)
    a[0, 0, 2:] = [0.0, 0.5, 0.5, 0.0]  # the pronoun's two pieces' rows
    located = Located(pronoun=[2, 3], candidates=[[0, 1], [2]])
    np.testing.assert_allclose(column_means(a, located)[0, 0], [0.5, 0.25])
    scores = word_attention(a, located)
    np.testing.assert_allclose(specificity(scores, a, located)[0, 0], [0.0, 0.25])


def test_ranking_ties_go_to_the_lower_layer_and_head_and_nan_goes_last():
    values = np.array([[0.2, np.nan], [0.5, 0.5]])
    assert ranked(values) == [(1, 0), (1, 1), (0, 0), (0, 1)]
    assert ranked(values, 1) == [(1, 0)]


def test_margin_of_three_candidates_and_an_unknown_criterion():
    np.testing.assert_allclose(margin_of(np.array([0.2, 0.5, 0.3]), 1), 0.2)
    with pytest.raises(ValueError, match="criterion"):
        head_values(np.zeros((1, 1, 2)), np.zeros((1, 1, 3, 3)), Located([0], [[1], [2]]), 0, "loudness")


def test_a_tie_in_all_but_name_separates_nothing():
    assert not separates(0.0) and not separates(-0.3) and not separates(MIN_SEPARATION)
    assert separates(MIN_SEPARATION + 0.01)


def test_candidates_suggested_are_the_words_before_the_pronoun_less_function_words():
    words = ["The", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "too", "tired", "."]
    assert [words[i] for i in suggest_candidates(words, 9)] == ["animal", "cross", "street"]
    words = ["Mary", "told", "Anna", "that", "she", "had", "won", "2", "times"]
    assert [words[i] for i in suggest_candidates(words, 4)] == ["Mary", "told", "Anna"]
    assert suggest_candidates(["it", "was", "it"], 2) == []  # nothing before but the pronoun's own word
