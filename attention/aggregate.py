"""Read-only computations on one attention map.

A map is a 2-D array ``[query_pos, key_pos]`` whose rows are softmax
probabilities (each row sums to 1). Numpy only.
"""

from collections.abc import Sequence

import numpy as np

WORDPIECE_CONTINUATION = "##"


def _check_square(attn: np.ndarray) -> np.ndarray:
    attn = np.asarray(attn)
    if attn.ndim != 2 or attn.shape[0] != attn.shape[1]:
        raise ValueError(
            f"expected a square [query_pos, key_pos] map, got shape {attn.shape}"
        )
    return attn


def drop_special(attn: np.ndarray, keep: np.ndarray, renormalize: bool) -> np.ndarray:
    """Return the sub-map over the positions where ``keep`` is True.

    ``keep`` is a boolean mask of length L (False for [CLS]/[SEP]).
    With ``renormalize`` each row is divided by its sum, so kept rows sum
    to 1 again; a row whose kept weights sum to 0 stays all zeros.
    """
    attn = _check_square(attn)
    keep = np.asarray(keep)
    if keep.dtype != bool or keep.shape != (attn.shape[0],):
        raise ValueError(
            f"keep must be a boolean mask of shape ({attn.shape[0]},), "
            f"got dtype {keep.dtype} and shape {keep.shape}"
        )
    sub = attn[np.ix_(keep, keep)]  # (K, K)
    if not renormalize:
        return sub
    row_sums = sub.sum(axis=1, keepdims=True)  # (K, 1)
    out = np.zeros(sub.shape, dtype=np.result_type(sub.dtype, np.float32))
    return np.divide(sub, row_sums, out=out, where=row_sums > 0)


def word_groups(word_ids: Sequence[int | None]) -> list[list[int]]:
    """Group token positions into units: one per special token, one per word.

    ``word_ids`` follows ``encoding.word_ids()``: None for special tokens,
    else a word index. Consecutive positions with the same index form one
    word, so the two sentences of a pair (whose word indices both start at
    0) never merge. Units are listed in order of first position.
    """
    groups: list[list[int]] = []
    previous = None
    for pos, word in enumerate(word_ids):
        if word is not None and word == previous:
            groups[-1].append(pos)
        else:
            groups.append([pos])
        previous = word
    return groups


def merge_word_pieces(
    attn: np.ndarray, word_ids: Sequence[int | None]
) -> tuple[np.ndarray, list[list[int]]]:
    """Merge the word pieces of each word into one row and one column.

    Attention FROM a word is the mean of its pieces' rows; attention TO a
    word is the sum of its pieces' columns (Clark et al., 2019), so merged
    rows still sum to 1. Returns ``(merged [U, U], groups)`` where
    ``groups[u]`` lists the token positions of unit ``u``.
    """
    attn = _check_square(attn)
    n_tokens = attn.shape[0]
    if len(word_ids) != n_tokens:
        raise ValueError(
            f"word_ids has {len(word_ids)} entries but the map has {n_tokens} positions"
        )
    groups = word_groups(word_ids)
    membership = np.zeros((len(groups), n_tokens))  # (U, L), 1 where token in unit
    for unit, positions in enumerate(groups):
        membership[unit, positions] = 1.0
    row_means = membership / membership.sum(axis=1, keepdims=True)  # (U, L)
    from_words = row_means @ attn  # (U, L) x (L, L) -> (U, L)
    merged = from_words @ membership.T  # (U, L) x (L, U) -> (U, U)
    return merged, groups


def merge_labels(tokens: Sequence[str], groups: Sequence[Sequence[int]]) -> list[str]:
    """Label each unit by joining its pieces without the "##" marker.

    ``["em", "##bed", "##ding"]`` becomes ``"embedding"``; the first piece
    of a unit is kept as is.
    """
    labels = []
    for positions in groups:
        if not positions:
            raise ValueError("every group must hold at least one position")
        if max(positions) >= len(tokens) or min(positions) < 0:
            raise ValueError(f"group {list(positions)} is out of range for {len(tokens)} tokens")
        pieces = [tokens[p] for p in positions]
        rest = [p.removeprefix(WORDPIECE_CONTINUATION) for p in pieces[1:]]
        labels.append(pieces[0] + "".join(rest))
    return labels


def pairwise_change(maps: np.ndarray) -> np.ndarray:
    """Mean absolute difference between every two heads' maps of one layer.

    ``maps`` is ``[H, L, L]``; returns a symmetric ``[H, H]`` float64 array,
    zeros on the diagonal: entry (i, j) is the mean over all (query, key)
    cells of ``|maps[i] - maps[j]|``. Rows of a map sum to 1, so a value is
    at most 2 / L. One head against the rest at a time: at most H - 1 maps
    of differences are held.
    """
    maps = np.asarray(maps, dtype=np.float32)
    if maps.ndim != 3 or maps.shape[1] != maps.shape[2]:
        raise ValueError(f"expected one layer's maps [H, L, L], got shape {maps.shape}")
    n_heads = maps.shape[0]
    change = np.zeros((n_heads, n_heads))
    for i in range(n_heads - 1):
        row = np.abs(maps[i + 1:] - maps[i]).mean(axis=(1, 2), dtype=np.float64)  # (H - i - 1,)
        change[i, i + 1:] = change[i + 1:, i] = row
    return change


def group_means(change: np.ndarray, groups: Sequence[int]) -> tuple[float, float]:
    """The mean of ``change [H, H]`` over pairs of distinct heads in the same group, and over pairs in
    different groups (``groups[h]`` is head h's group); NaN where there are no such pairs."""
    values, group_of = np.asarray(change, dtype=float), np.asarray(groups)
    if values.ndim != 2 or values.shape != (len(group_of), len(group_of)):
        raise ValueError(f"expected change [H, H] for {len(group_of)} heads, got shape {values.shape}")
    same = group_of[:, None] == group_of[None, :]
    distinct = ~np.eye(len(group_of), dtype=bool)
    within, across = values[same & distinct], values[~same]
    return (float(within.mean()) if within.size else float("nan"),
            float(across.mean()) if across.size else float("nan"))
