"""Attention maps made smaller for a look at many at once: each map mean-pooled to at most a number of cells a side,
and each map's strongest entry (numpy only, no torch). A big run keeps its maps this way (attention/runs/bigrun.py,
attention/runs/seq2seq_maps.py), and viz draws them (viz/overview.py, viz/cross.py, viz/model_view.py)."""

from typing import Any

import numpy as np


def pool_map(attn: np.ndarray, max_cells: int) -> np.ndarray:
    """Average blocks of the last two axes so each has at most ``max_cells``.

    An axis of length L > ``max_cells`` is cut into ``max_cells`` contiguous
    blocks whose sizes differ by at most one; each output value is the mean
    of its block. Axes of length <= ``max_cells`` are left unchanged.
    Leading axes (layers, heads) are kept.
    """
    attn = np.asarray(attn)
    if attn.ndim < 2:
        raise ValueError(f"expected at least 2 axes [..., query_pos, key_pos], got {attn.shape}")
    if max_cells < 1:
        raise ValueError(f"max_cells must be at least 1, got {max_cells}")
    for axis in (attn.ndim - 2, attn.ndim - 1):
        attn = _pool_axis(attn, axis, max_cells)
    return attn


def _pool_axis(x: np.ndarray, axis: int, max_cells: int) -> np.ndarray:
    n = x.shape[axis]
    if n <= max_cells:
        return x
    edges = np.linspace(0, n, max_cells + 1).astype(int)  # block boundaries
    sizes_shape = [1] * x.ndim
    sizes_shape[axis] = max_cells
    dtype = np.result_type(x.dtype, np.float32)  # float32 maps stay float32: no float64 copy of them
    sizes = np.diff(edges).reshape(sizes_shape).astype(dtype)
    if axis == x.ndim - 1:  # the contiguous axis: reduceat sums each block along its rows
        return np.add.reduceat(x, edges[:-1], axis=axis, dtype=dtype) / sizes
    # Another axis: one sum per block over a slice, written into its place. np.add.reduceat walks the pooled
    # axis innermost, across the contiguous one, and took 2-4x as long on a layer's (H, L, L) maps
    # (bench/overview.py's model); summing the slices into one array, not stacking them, takes 2/3 as long.
    lead: tuple[Any, ...] = (slice(None),) * axis
    out_shape = list(x.shape)
    out_shape[axis] = max_cells
    block_sums = np.empty(out_shape, dtype=dtype)
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        np.add.reduce(x[(*lead, slice(a, b))], axis=axis, out=block_sums[(*lead, i)])
    return block_sums / sizes


def head_tiles(maps: np.ndarray, max_cells: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """What the overview keeps of ``maps [..., L, L]``: each map mean-pooled to at most ``max_cells``
    a side (float32), and its strongest entry as ``[query, key, weight]`` (``[..., 3]``, float64).

    A big model's run keeps only these, layer by layer, instead of every full map.
    """
    maps = np.asarray(maps)
    n_tokens = maps.shape[-1]
    flat = maps.reshape(*maps.shape[:-2], n_tokens * maps.shape[-2])
    best = flat.argmax(axis=-1)
    weight = np.take_along_axis(flat, best[..., None], axis=-1)[..., 0]
    query, key = np.divmod(best, n_tokens)
    strongest = np.stack([query, key, weight], axis=-1).astype(np.float64)
    return pool_map(maps, max_cells).astype(np.float32), strongest
