"""One head's queries and keys in one plane, so that a query lies near the keys it attends to
(AttentionViz, Yeh et al. 2023).

Two changes leave every attention map as it is and make nearness mean attention:

1. the keys are translated, k -> k + t: each query's scores q·k all move by the same q·t, and the
   softmax over a query's row does not see a shift shared by the row;
2. the queries are scaled by c and the keys by 1/c: every product q·k stays the same.

`normalise` picks c and t together so that afterwards the keys' mean equals the queries' mean and the
keys' mean norm equals the queries' mean norm (translating after scaling, as a fixed recipe would, moves
the key norms away from the query norms again). `project` then lays the 2·N vectors out in 2-D with
UMAP, t-SNE or PCA (a plain SVD: the page's default, seconds where UMAP takes a minute).

Letters: N tokens, d head width.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

METHODS = ("umap", "tsne", "pca")
BISECTIONS = 100  # halvings of log(c): far below float32's precision


class Normalised(NamedTuple):
    q: np.ndarray  # (N, d) the queries times c
    k: np.ndarray  # (N, d) the keys over c, plus t
    scale: float  # c
    shift: np.ndarray  # (d,) t


def normalise(q: np.ndarray, k: np.ndarray) -> Normalised:
    """Queries (N, d) and keys (M, d) with the same attention, their means and mean norms equal.

    With the keys' mean at the queries' mean after scaling, the keys are (k - mean k)/c + c·mean q, and
    their mean norm over the queries' mean norm, c·mean|q|, is mean|(k - mean k)/c² + mean q| / mean|q|:
    far above 1 for a small c, and at most 1 for a large one (the mean of the queries is no longer than
    their mean length). c is found between the two by bisection on log c.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    q_mean, k_mean = q.mean(0), k.mean(0)  # (d,) each
    q_norm = float(np.linalg.norm(q, axis=1).mean())
    spread = k - k_mean  # (M, d) the keys about their mean
    if q_norm == 0 or not spread.any():  # no query length to match, or every key the same
        c = 1.0
    else:
        c = _scale(spread, q_mean, q_norm)
    shift = c * q_mean - k_mean / c  # (d,)
    return Normalised(
        (q * c).astype(np.float32), (k / c + shift).astype(np.float32), float(c), shift.astype(np.float32)
    )


def _scale(spread: np.ndarray, q_mean: np.ndarray, q_norm: float) -> float:
    """The c > 0 where mean|spread/c² + q_mean| = q_norm (or the nearest end of the search)."""

    def excess(log_c: float) -> float:
        return float(np.linalg.norm(spread * np.exp(-2 * log_c) + q_mean, axis=1).mean()) - q_norm

    # start from the scale that matches the norms about the means, then widen until the sign changes
    guess = 0.5 * np.log(np.linalg.norm(spread, axis=1).mean() / q_norm)
    low, high = guess - 1.0, guess + 1.0
    for _ in range(60):
        if excess(low) > 0:
            break
        low -= 2.0
    for _ in range(60):
        if excess(high) <= 0:
            break
        high += 2.0
    else:  # every query the same vector: the norms only meet as c grows without end
        return float(np.exp(high))
    for _ in range(BISECTIONS):
        middle = 0.5 * (low + high)
        if excess(middle) > 0:
            low = middle
        else:
            high = middle
    return float(np.exp(0.5 * (low + high)))


def project(points: np.ndarray, method: str = "umap", seed: int = 0) -> np.ndarray:
    """(n, d) points -> (n, 2) coordinates, by UMAP (umap-learn), t-SNE (scikit-learn) or PCA
    (principal_plane); the same points and seed give the same plane."""
    points = np.asarray(points, dtype=np.float32)
    n = len(points)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if n < 4:
        raise ValueError(f"{n} points are too few to lay out; give at least 4")
    if method == "pca":
        return principal_plane(points)
    if method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = min(30.0, (n - 1) / 3)
        return TSNE(2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(points).astype(np.float32)
    import umap  # its numba functions compile on the first call: seconds

    neighbours = min(15, n - 1)
    reducer = umap.UMAP(n_components=2, n_neighbors=neighbours, min_dist=0.1, random_state=seed, n_jobs=1)
    return np.asarray(reducer.fit_transform(points), dtype=np.float32)


def principal_plane(points: np.ndarray) -> np.ndarray:
    """(n, d) points -> their (n, 2) coordinates along the first two principal components, in float64: the
    SVD of the centred points' d × d Gram matrix gives the components (a second on 40,000 × 128 where the
    SVD of the points themselves took 8 s; scikit-learn's import alone took 3 s on a busy machine); each
    component's sign is set so that the point furthest along it lies on its positive side."""
    centred = np.asarray(points, dtype=np.float64)
    centred = centred - centred.mean(0)
    _, _, vt = np.linalg.svd(centred.T @ centred)  # (d, d): the components, largest first
    xy = centred @ vt[:2].T  # (n, 2); a head of width 1 has one component: the other is 0
    xy = np.pad(xy, ((0, 0), (0, 2 - xy.shape[1])))
    xy *= np.where(xy[np.abs(xy).argmax(0), np.arange(xy.shape[1])] < 0, -1.0, 1.0)
    return xy.astype(np.float32)


def joint_plane(q: np.ndarray, k: np.ndarray, method: str = "umap", seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One head's queries (N, d) and keys (N, d), normalised and laid out together: their (N, 2)
    coordinates each."""
    n = normalise(q, k)
    xy = project(np.concatenate([n.q, n.k]), method, seed)  # (2N, 2)
    return xy[: len(q)], xy[len(q) :]
