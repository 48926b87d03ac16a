"""attention.runs.pooling: maps mean-pooled block by block, as a big run keeps them and the overview draws them."""

import itertools

import numpy as np
import pytest
from test_viz import random_maps

from attention.runs.pooling import pool_map


def test_pool_map_averages_blocks():
    attn = random_maps(12, 12)
    pooled = pool_map(attn, 4)
    assert pooled.shape == (4, 4)
    for i, j in itertools.product(range(4), repeat=2):
        block = attn[3 * i : 3 * i + 3, 3 * j : 3 * j + 3]
        assert pooled[i, j] == pytest.approx(block.mean())


def test_pool_map_uneven_blocks_still_average():
    attn = random_maps(10, 10)
    pooled = pool_map(attn, 4)
    assert pooled.shape == (4, 4)
    assert pool_map(np.full((10, 10), 0.1), 4) == pytest.approx(np.full((4, 4), 0.1))
    assert attn.min() <= pooled.min() and pooled.max() <= attn.max()


def test_pool_map_leaves_short_maps_and_leading_axes_alone():
    attn = random_maps(2, 3, 8, 8)
    np.testing.assert_array_equal(pool_map(attn, 8), attn)
    assert pool_map(attn, 4).shape == (2, 3, 4, 4)
    np.testing.assert_allclose(pool_map(attn, 4)[1, 2], pool_map(attn[1, 2], 4))
