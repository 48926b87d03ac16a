"""Read-only computations on one attention map.

A map is a 2-D array ``[query_pos, key_pos]`` whose rows are softmax
probabilities (each row sums to 1). Numpy only.
"""

import unicodedata
from collections.abc import Sequence

import numpy as np

WORDPIECE_CONTINUATION = "##"
# how a piece that begins after a space is marked: byte-level BPE's Ġ, SentencePiece's ▁, or the space itself
SPACE_MARKERS = ("Ġ", "▁", " ")


def _check_square(attn: np.ndarray) -> np.ndarray:
    attn = np.asarray(attn)
    if attn.ndim != 2 or attn.shape[0] != attn.shape[1]:
        raise ValueError(f"expected a square [query_pos, key_pos] map, got shape {attn.shape}")
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
            f"keep must be a boolean mask of shape ({attn.shape[0]},), got dtype {keep.dtype} and shape {keep.shape}"
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


def written_words(
    tokens: Sequence[str], word_ids: Sequence[int | None], offsets: Sequence[tuple[int, int]]
) -> list[list[int]]:
    """Group token positions into the words as written: one unit per special token, one per word.

    The tokenizer's words (``word_groups``) are joined where no space separates them: a word whose
    first piece starts where the previous word's last piece ends (character ``offsets``), and is not
    marked as following a space (``SPACE_MARKERS``), continues it. So BERT's "didn ' t", three words
    by ``word_ids``, is one, and so is byte-level BPE's "Ġdidn 't". Punctuation at either edge of such
    a run stays a unit of its own ("tired ." keeps its full stop, "( it )" its brackets); punctuation
    inside it joins ("e - mail"). The second sentence of a pair starts again at word 0 and never joins
    the first.
    """
    if not len(tokens) == len(word_ids) == len(offsets):
        raise ValueError(
            f"tokens, word_ids and offsets differ in length: {len(tokens)}, {len(word_ids)}, {len(offsets)}"
        )
    runs: list[list[list[int]]] = []  # runs of the tokenizer's words with no space between them
    for group in word_groups(word_ids):
        if runs and _continues(runs[-1][-1][-1], group[0], tokens, word_ids, offsets):
            runs[-1].append(group)
        else:
            runs.append([group])
    return [unit for run in runs for unit in _edge_punctuation_apart(run, tokens)]


def _continues(last: int, first: int, tokens, word_ids, offsets) -> bool:
    """Whether the word starting at position ``first`` is written on, with no space, from ``last``."""
    before, after = word_ids[last], word_ids[first]
    return (
        before is not None
        and after is not None
        and after > before
        and offsets[last][1] == offsets[first][0]
        and not tokens[first].startswith(SPACE_MARKERS)
    )


def _is_punctuation(positions: Sequence[int], tokens: Sequence[str]) -> bool:
    text = "".join(tokens[p].removeprefix(WORDPIECE_CONTINUATION).lstrip("".join(SPACE_MARKERS)) for p in positions)
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def _edge_punctuation_apart(run: list[list[int]], tokens: Sequence[str]) -> list[list[int]]:
    """One run of words written together as one unit, its leading and trailing punctuation words apart."""
    wordy = [i for i, group in enumerate(run) if not _is_punctuation(group, tokens)]
    if not wordy:
        return run
    first, last = wordy[0], wordy[-1]
    return [*run[:first], [p for group in run[first : last + 1] for p in group], *run[last + 1 :]]


def merge_word_pieces(
    attn: np.ndarray,
    word_ids: Sequence[int | None],
    tokens: Sequence[str] | None = None,
    offsets: Sequence[tuple[int, int]] | None = None,
) -> tuple[np.ndarray, list[list[int]]]:
    """Merge the word pieces of each word into one row and one column.

    With ``tokens`` and ``offsets`` a word is a word as written (``written_words``); without them,
    one of the tokenizer's words (``word_groups``).
    Attention FROM a word is the mean of its pieces' rows; attention TO a
    word is the sum of its pieces' columns (Clark et al., 2019), so merged
    rows still sum to 1. Returns ``(merged [U, U], groups)`` where
    ``groups[u]`` lists the token positions of unit ``u``.
    """
    attn = _check_square(attn)
    n_tokens = attn.shape[0]
    if len(word_ids) != n_tokens:
        raise ValueError(f"word_ids has {len(word_ids)} entries but the map has {n_tokens} positions")
    if (tokens is None) != (offsets is None):
        raise ValueError("tokens and offsets go together: both or neither")
    groups = word_groups(word_ids) if tokens is None or offsets is None else written_words(tokens, word_ids, offsets)
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
        row = np.abs(maps[i + 1 :] - maps[i]).mean(axis=(1, 2), dtype=np.float64)  # (H - i - 1,)
        change[i, i + 1 :] = change[i + 1 :, i] = row
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
    return (
        float(within.mean()) if within.size else float("nan"),
        float(across.mean()) if across.size else float("nan"),
    )
