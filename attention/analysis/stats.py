"""What each head does, summed up: per-head statistics of one sentence and a pattern label per head
(vertical, diagonal, block, broad, heterogeneous; Kovaleva et al. 2019, "Revealing the Dark Secrets of
BERT"), and Jensen-Shannon distances between heads over a set of sentences with a 2-D map of the heads
by classical multidimensional scaling (Clark et al. 2019, "What Does BERT Look At?", fig. 6).

Maps are one sentence's (n_layers, H, L, L) numpy array as attention/runs/run.py keeps it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

# pattern thresholds, applied in this order of precedence (the first that holds names the head)
VERTICAL_MIN_MASS = 0.5  # mean attention mass to [CLS] + [SEP]
DIAGONAL_MIN_MASS = 0.5  # mean attention mass to the previous token + itself + the next token
BLOCK_MIN_MASS = 0.8  # mean attention mass within the query's own segment (sentence pairs only)
BROAD_MIN_ENTROPY = 0.7  # mean row entropy as a fraction of log(L), the entropy of a uniform row
PATTERNS = ("vertical", "diagonal", "block", "broad", "heterogeneous")


# ---- one sentence: statistics and a pattern per head ---------------------------------------------


def punctuation_mask(tokens: Sequence[str]) -> np.ndarray:
    """True for tokens made only of punctuation characters, ignoring a "##" continuation prefix.

    Punctuation as BERT's tokenizer splits it: ASCII characters that are neither letters, digits
    nor space (so "$", "+" and "`" count), and every Unicode character of category P*.
    """

    def is_punct(char: str) -> bool:
        return (
            char.isascii() and char.isprintable() and not char.isalnum() and not char.isspace()
        ) or unicodedata.category(char).startswith("P")

    pieces = [t[2:] if t.startswith("##") and len(t) > 2 else t for t in tokens]
    return np.array([bool(p) and all(is_punct(c) for c in p) for p in pieces], dtype=bool)


def _mass_to(attn: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Mean over query rows of the attention mass on the `keys` (boolean (L,)): (n_layers, H)."""
    return attn[..., keys].sum(axis=-1).mean(axis=-1)


def first_share(weights: np.ndarray, shares: bool = True) -> np.ndarray:
    """Mean over query rows of each row's share on the first key, w_i0 / Σ_j w_ij: weights (..., L, L) -> (...).
    Probabilities give the attention to the first token, an attention sink's mark, taken as they are (`shares`
    False: a row of gpt-oss's learned sinks sums to less than 1, the rest going to no token); value-weighted
    maps (mixing.norm_maps) the share of what is moved. A row of zeros counts as 0."""
    weights = np.asarray(weights, dtype=np.float64)
    if not shares:
        return weights[..., 0].mean(axis=-1)
    sums = weights.sum(axis=-1)  # (..., L)
    return np.divide(weights[..., 0], sums, out=np.zeros_like(sums), where=sums > 0).mean(axis=-1)


def head_stats(
    attn: np.ndarray,
    special: Sequence[bool],
    sequence_ids: Sequence[int | None],
    is_punct: Sequence[bool] | np.ndarray,
    norms: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Statistics of every head on one sentence (or pair), each an (n_layers, H) array.

    attn is (n_layers, H, L, L) [layer, head, query_pos, key_pos] with rows summing to 1; special,
    sequence_ids and is_punct have one entry per position (as Encoded.special, .sequence_ids and
    punctuation_mask(tokens)). [CLS] is position 0 when it is special; every other special
    position counts as [SEP]. Means are over all L query rows unless said otherwise:
      entropy         row entropy -Σ_j a_ij·ln a_ij, in nats (0·ln 0 = 0)
      to_cls, to_sep  mass on [CLS], on the [SEP]s
      to_self         a_ii
      to_prev         a_i,i-1 (row 0 has no previous token and counts as 0)
      to_next         a_i,i+1 (the last row counts as 0)
      to_punct        mass on punctuation tokens
      distance        Σ_j a_ij·|i - j|, in positions
      within_segment  mass on keys of the query's own segment, over the non-special rows only;
                      for one sentence, the mass on its non-special tokens; NaN without such rows
      to_first        mass on position 0, whatever its token (an attention sink; first_share)
      to_first_weighted  with `norms`, value-weighted maps (n_layers, H, L, L) as mixing.norm_maps gives them:
                      each row's share on position 0 (first_share); absent without them
    """
    attn = np.asarray(attn, dtype=np.float64)
    n_layers, H, L, _ = attn.shape
    specials, punct = np.asarray(special, dtype=bool), np.asarray(is_punct, dtype=bool)
    if not len(specials) == len(sequence_ids) == len(punct) == L:
        raise ValueError(f"special, sequence_ids and is_punct need one entry per position ({L})")
    cls = np.zeros(L, dtype=bool)
    cls[0] = specials[0]
    positions = np.arange(L)
    segment = np.array([-1 if s is None else s for s in sequence_ids])  # (L,), -1 for specials
    same = (segment[:, None] == segment[None, :]) & (segment[None, :] >= 0)  # (L, L) query x key
    rows = segment >= 0
    in_segment = (attn * same).sum(axis=-1)  # (n_layers, H, L)
    logs = np.log(attn, out=np.zeros_like(attn), where=attn > 0)
    stats = {
        "entropy": -(attn * logs).sum(axis=-1).mean(axis=-1),
        "to_cls": _mass_to(attn, cls),
        "to_sep": _mass_to(attn, specials & ~cls),
        "to_self": np.diagonal(attn, axis1=-2, axis2=-1).sum(axis=-1) / L,
        "to_prev": np.diagonal(attn, offset=-1, axis1=-2, axis2=-1).sum(axis=-1) / L,
        "to_next": np.diagonal(attn, offset=1, axis1=-2, axis2=-1).sum(axis=-1) / L,
        "to_punct": _mass_to(attn, punct),
        "distance": (attn * np.abs(positions[:, None] - positions[None, :])).sum(axis=-1).mean(axis=-1),
        "within_segment": (in_segment[..., rows].mean(axis=-1) if rows.any() else np.full((n_layers, H), np.nan)),
        "to_first": first_share(attn, shares=False),
    }
    if norms is not None:
        if np.shape(norms) != attn.shape:
            raise ValueError(f"norms must be shaped as the maps, {attn.shape}; got {np.shape(norms)}")
        stats["to_first_weighted"] = first_share(norms)
    return stats


def pattern_labels(
    stats: dict[str, np.ndarray],
    n_tokens: int,
    pair: bool = False,
    *,
    vertical: float = VERTICAL_MIN_MASS,
    diagonal: float = DIAGONAL_MIN_MASS,
    block: float = BLOCK_MIN_MASS,
    broad: float = BROAD_MIN_ENTROPY,
) -> np.ndarray:
    """One pattern per head (Kovaleva et al. 2019), an (n_layers, H) array of strings.

    From head_stats of a sentence of n_tokens positions; the first rule that holds names the head:
      1. "vertical"       to_cls + to_sep ≥ 0.5 (VERTICAL_MIN_MASS)
      2. "diagonal"       to_prev + to_self + to_next ≥ 0.5 (DIAGONAL_MIN_MASS)
      3. "block"          a sentence pair (`pair`) and within_segment ≥ 0.8 (BLOCK_MIN_MASS)
      4. "broad"          entropy ≥ 0.7 (BROAD_MIN_ENTROPY) · ln(n_tokens), the uniform row's entropy
      5. "heterogeneous"  otherwise
    The keyword arguments override the thresholds.
    """
    rules = [
        stats["to_cls"] + stats["to_sep"] >= vertical,
        stats["to_prev"] + stats["to_self"] + stats["to_next"] >= diagonal,
        np.full(stats["entropy"].shape, pair) & (np.nan_to_num(stats["within_segment"]) >= block),
        stats["entropy"] >= broad * np.log(n_tokens),
    ]
    return np.select(rules, PATTERNS[:4], default=PATTERNS[4])


# ---- heads compared across sentences ---------------------------------------------------------------


def _js_distance_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Base-2 Jensen-Shannon distance between matching rows of p and q (..., L): shape (...)."""
    p, q = np.broadcast_arrays(p, q)
    m = 0.5 * (p + q)

    def kl(x: np.ndarray) -> np.ndarray:  # Σ x·log2(x / m), 0 where x = 0
        ratio = np.divide(x, m, out=np.ones_like(x), where=x > 0)
        return (x * np.log2(ratio)).sum(axis=-1)

    return np.sqrt(np.maximum(0.5 * (kl(p) + kl(q)), 0.0))


def head_distances(
    maps_per_sentence: Sequence[np.ndarray], progress: Callable[[float], None] | None = None
) -> np.ndarray:
    """Jensen-Shannon distance between every two heads, over a set of sentences.

    Each item is one sentence's (n_layers, H, L_s, L_s) array; lengths may differ, layers and
    heads may not. Heads are flattened as layer · H + head. For two heads, each query row is a
    distribution over keys; the distance is the base-2 Jensen-Shannon distance (the square root
    of the divergence, as scipy.spatial.distance.jensenshannon(p, q, base=2)) between their rows,
    averaged over the rows of a sentence and then over sentences. Returns a symmetric
    (n_heads_total, n_heads_total) array in [0, 1] with zeros on the diagonal. `progress`, if
    given, is called with the fraction done after each head of each sentence.
    """
    if not maps_per_sentence:
        raise ValueError("head_distances needs at least one sentence")
    shape = maps_per_sentence[0].shape[:2]
    total = np.zeros((shape[0] * shape[1],) * 2)
    for k, attn in enumerate(maps_per_sentence):
        if attn.ndim != 4 or attn.shape[:2] != shape or attn.shape[2] != attn.shape[3]:
            raise ValueError(
                f"every sentence needs an (n_layers, H, L, L) array with (n_layers, H) = {shape}, got {attn.shape}"
            )
        heads = np.asarray(attn, dtype=np.float64).reshape(-1, *attn.shape[2:])  # (N, L, L)
        for a in range(len(heads)):
            d = _js_distance_rows(heads[a], heads[a:]).mean(axis=-1)  # (N - a,) mean over rows
            total[a, a:] += d
            total[a:, a] += d
            if progress is not None:
                progress((k * len(heads) + a + 1) / (len(maps_per_sentence) * len(heads)))
    return total / len(maps_per_sentence)


class HeadEmbedding(NamedTuple):
    coords: np.ndarray  # (n, dims)
    layer: np.ndarray  # (n,) layer index of each head, for colouring


def embed_heads(distances: np.ndarray, dims: int = 2, *, heads_per_layer: int) -> HeadEmbedding:
    """Coordinates of the heads in `dims` dimensions by classical (Torgerson) multidimensional scaling.

    With D² the squared distances and J = I - 11ᵀ/n the centring matrix, B = -½ · J D² J (the
    double-centred squared distances); the coordinates are the top `dims` eigenvectors of B, each
    scaled by the square root of its eigenvalue (negative eigenvalues count as 0). For Euclidean
    distances the embedded points keep the distances exactly when `dims` is at least their rank.
    Each axis is signed so that its largest-magnitude coordinate is positive. Heads are numbered
    layer · heads_per_layer + head, as in head_distances, which gives `layer`.
    """
    D = np.asarray(distances, dtype=np.float64)
    n = D.shape[0]
    if D.shape != (n, n) or n % heads_per_layer:
        raise ValueError(
            f"expected a square distance matrix over whole layers of {heads_per_layer} heads, got shape {D.shape}"
        )
    J = np.eye(n) - 1.0 / n  # (n, n) centring
    B = -0.5 * J @ (D**2) @ J  # (n, n)
    values, vectors = np.linalg.eigh(B)  # ascending
    top = np.argsort(values)[::-1][:dims]
    coords = np.zeros((n, dims))  # fewer heads than dims: the missing axes stay 0
    coords[:, : len(top)] = vectors[:, top] * np.sqrt(np.maximum(values[top], 0.0))  # (n, dims)
    signs = np.sign(coords[np.abs(coords).argmax(axis=0), np.arange(coords.shape[1])])
    coords = coords * np.where(signs == 0, 1.0, signs)
    return HeadEmbedding(coords, np.arange(n) // heads_per_layer)
