"""Intervals and paired tests on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from attention.analysis.coref.stats import clopper_pearson, f1, holm, mcnemar_exact, pearson


def test_clopper_pearson_edges_and_scipy():
    low, high = clopper_pearson(0, 10)
    assert low == 0 and high == pytest.approx(1 - 0.025 ** (1 / 10))  # 0.3085: (1 - high)^10 = 0.025
    low, high = clopper_pearson(10, 10)
    assert low == pytest.approx(0.025 ** (1 / 10)) and high == 1
    ks = np.array([[3, 7], [5, 0]])
    low, high = clopper_pearson(ks, 20)
    for k, lo, hi in zip(ks.ravel(), low.ravel(), high.ravel()):
        ci = stats.binomtest(int(k), 20).proportion_ci(0.95, method="exact")
        assert (lo, hi) == pytest.approx((ci.low, ci.high))
    assert np.isnan(clopper_pearson(0, 0)[0])


def test_mcnemar_exact_by_hand():
    a = np.array([1, 1, 0, 0, 0, 0, 0, 0, 1, 1], bool)  # right/wrong of A on 10 examples
    b = np.array([1, 0, 1, 1, 1, 1, 1, 0, 1, 1], bool)
    test = mcnemar_exact(a, b)
    assert (test.only_a, test.only_b, test.n) == (1, 5, 10)
    assert test.p == pytest.approx(14 / 64)  # 2 * P(X <= 1), X ~ Bin(6, 1/2) = 2 * (1 + 6) / 64
    assert test.difference == pytest.approx(-0.4)
    assert mcnemar_exact(b, a).p == pytest.approx(14 / 64)
    assert mcnemar_exact(a, a).p == 1.0  # nothing discordant
    assert mcnemar_exact([1] * 8, [0] * 8).p == pytest.approx(2 / 256)  # 8 of 8 discordant pairs favour A
    with pytest.raises(ValueError):
        mcnemar_exact([1, 0], [1, 0, 1])


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> non-decreasing 0.06
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0])  # capped
    np.testing.assert_allclose(holm([0.02]), [0.02])


def test_f1_and_pearson():
    np.testing.assert_allclose(f1([3, 0], [1, 0], [2, 0]), [6 / 9, 0.0])  # P 3/4, R 3/5 -> 2PR/(P+R) = 2/3
    x = np.array([1.0, 2, 3, 4])
    y = np.stack([2 * x, -x, x**2, np.ones(4)], axis=1)  # (4, 4)
    r = pearson(x, y)
    assert r[0] == pytest.approx(1) and r[1] == pytest.approx(-1) and np.isnan(r[3])
    assert r[2] == pytest.approx(stats.pearsonr(x, x**2).statistic)
