"""How sure is an accuracy, and is one right/wrong record better than another? Pure functions.

- clopper_pearson: the exact binomial confidence interval of k successes in n (no sampling, no seed).
- mcnemar_exact: the exact McNemar test on paired right/wrong outcomes (two heads on the same examples,
  two models, two paired groups): a two-sided binomial test on the discordant pairs.
- holm: Holm's step-down correction of many p-values at once (family-wise error).
- f1: precision/recall F1 from counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# scipy.stats is imported where it is used: it takes half a second, and the app's first page needs none of it


def clopper_pearson(k, n: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper-Pearson) interval of the proportion k / n; k a number or an array. NaN when n is 0."""
    k = np.asarray(k, dtype=float)
    if n == 0:
        return np.full(k.shape, np.nan), np.full(k.shape, np.nan)
    from scipy import stats

    alpha = 1 - level
    with np.errstate(invalid="ignore"):
        low = np.where(k > 0, stats.beta.ppf(alpha / 2, k, n - k + 1), 0.0)
        high = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    return low, high


@dataclass(frozen=True)
class McNemar:
    only_a: int  # pairs where A is right and B wrong
    only_b: int  # pairs where B is right and A wrong
    n: int  # pairs compared
    p: float  # exact two-sided p-value

    @property
    def difference(self) -> float:
        """Accuracy of A minus accuracy of B on the paired examples."""
        return (self.only_a - self.only_b) / self.n if self.n else float("nan")


def mcnemar_exact(a, b) -> McNemar:
    """Exact McNemar test of two paired bool records (same examples, same order).

    Under the null each discordant pair is equally likely to favour A or B, so the p-value is the two-sided
    binomial test of `only_a` successes in `only_a + only_b` trials at 1/2; 1 when nothing is discordant."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired records need the same 1-D shape, got {a.shape} and {b.shape}")
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    from scipy import stats

    p = 1.0 if only_a + only_b == 0 else float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)
    return McNemar(only_a, only_b, len(a), min(p, 1.0))


def holm(pvalues) -> np.ndarray:
    """Holm-adjusted p-values, in the given order: the i-th smallest times (m - i), made non-decreasing,
    capped at 1. A hypothesis is rejected at level alpha when its adjusted p-value is <= alpha."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def f1(tp, fp, fn):
    """F1 = 2 tp / (2 tp + fp + fn), elementwise; 0 where nothing was predicted or expected."""
    tp, fp, fn = (np.asarray(x, dtype=float) for x in (tp, fp, fn))
    denominator = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, 2 * tp / np.where(denominator > 0, denominator, 1), 0.0)


def pearson(x, y) -> np.ndarray:
    """Pearson correlation of x (n,) with y (n, ...) along the first axis; NaN where y is constant."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    xc = x - x.mean()
    yc = y - y.mean(axis=0)
    xc = xc.reshape(-1, *([1] * (y.ndim - 1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (xc * yc).sum(axis=0) / np.sqrt((xc**2).sum(axis=0) * (yc**2).sum(axis=0))
