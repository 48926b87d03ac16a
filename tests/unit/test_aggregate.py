import numpy as np
import pytest

from attention.runs.aggregate import drop_special, merge_labels, merge_word_pieces, word_groups

# [CLS] em ##bed ##ding is [SEP]: "embedding" is one word split into 3 pieces.
TOKENS = ["[CLS]", "em", "##bed", "##ding", "is", "[SEP]"]
WORD_IDS = [None, 0, 0, 0, 1, None]
ATTN = np.array(
    [
        [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],
        [0.1, 0.2, 0.3, 0.1, 0.2, 0.1],
        [0.0, 0.4, 0.2, 0.1, 0.0, 0.3],
        [0.3, 0.0, 0.1, 0.2, 0.1, 0.3],
        [0.2, 0.1, 0.1, 0.1, 0.4, 0.1],
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    ]
)


def test_merge_word_pieces_groups_pieces_of_one_word():
    _, groups = merge_word_pieces(ATTN, WORD_IDS)
    assert groups == [[0], [1, 2, 3], [4], [5]]


def test_merge_word_pieces_means_rows_and_sums_columns():
    merged, _ = merge_word_pieces(ATTN, WORD_IDS)
    # Computed by hand. Row "embedding" = mean of rows 1-3:
    #   [0.4, 0.6, 0.6, 0.4, 0.3, 0.7] / 3, then its columns 1-3 summed: 1.6 / 3.
    # Column "embedding" of other rows = sum of columns 1-3, e.g. [CLS]: 0.3, "is": 0.3.
    expected = np.array(
        [
            [0.5, 0.3, 0.1, 0.1],
            [0.4 / 3, 1.6 / 3, 0.1, 0.7 / 3],
            [0.2, 0.3, 0.4, 0.1],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )
    np.testing.assert_allclose(merged, expected)
    np.testing.assert_allclose(merged.sum(axis=1), 1.0)


def test_merge_word_pieces_without_pieces_is_identity():
    merged, groups = merge_word_pieces(ATTN, [None, 0, 1, 2, 3, None])
    np.testing.assert_allclose(merged, ATTN)
    assert groups == [[p] for p in range(6)]


def test_word_groups_keeps_sentence_pair_words_apart():
    # In a pair, word indices restart at 0 for the second sentence.
    assert word_groups([None, 0, 1, 1, None, 0, 0, None]) == [[0], [1], [2, 3], [4], [5, 6], [7]]


def test_merge_labels_joins_pieces_without_marker():
    _, groups = merge_word_pieces(ATTN, WORD_IDS)
    assert merge_labels(TOKENS, groups) == ["[CLS]", "embedding", "is", "[SEP]"]


def test_merge_word_pieces_rejects_wrong_lengths():
    with pytest.raises(ValueError, match="word_ids"):
        merge_word_pieces(ATTN, WORD_IDS[:-1])
    with pytest.raises(ValueError, match="square"):
        merge_word_pieces(ATTN[:, :5], WORD_IDS)


# [CLS] a b [SEP]; "b" attends only to [CLS] and [SEP].
SPECIAL_ATTN = np.array(
    [
        [0.7, 0.1, 0.1, 0.1],
        [0.5, 0.2, 0.3, 0.0],
        [0.4, 0.0, 0.0, 0.6],
        [0.1, 0.1, 0.1, 0.7],
    ]
)
KEEP = np.array([False, True, True, False])


def test_drop_special_without_renormalisation_keeps_weights():
    out = drop_special(SPECIAL_ATTN, KEEP, renormalize=False)
    np.testing.assert_allclose(out, [[0.2, 0.3], [0.0, 0.0]])


@pytest.mark.filterwarnings("error")  # no divide-by-zero warning either
def test_drop_special_renormalises_rows_and_zero_row_stays_zero():
    out = drop_special(SPECIAL_ATTN, KEEP, renormalize=True)
    np.testing.assert_allclose(out, [[0.4, 0.6], [0.0, 0.0]])
    assert not np.isnan(out).any()


def test_drop_special_rejects_bad_mask():
    with pytest.raises(ValueError, match="boolean"):
        drop_special(SPECIAL_ATTN, np.array([0, 1, 1, 0]), renormalize=True)
    with pytest.raises(ValueError, match="shape"):
        drop_special(SPECIAL_ATTN, KEEP[:3], renormalize=True)
