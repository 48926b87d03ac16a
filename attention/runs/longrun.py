"""Long inputs' runs: when even one layer's maps (H·L·L float32) are more than BIG_RUN_BYTES, the run goes through the
"long" attention implementation (attention/long_maps.py): one forward pass keeps each layer's q, k and row
log-sum-exps, never a map, and makes every head's thumbnail (its exact block means and maxima) from the scores its
output is made of; each head's strongest entry is then found in its strongest block's tile. Any part of any head's
map is then made on demand (`LongRun.maps`: blocks, tiles, rows); what would need a whole layer's maps at once is
refused (NeedsSmallerInput), as a big run's views are."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..long_maps import LongMaps, long_maps
from .bigrun import BIG_RUN_BYTES, POOL_CELLS, LayerMaps, NeedsSmallerInput, PooledRun
from .inputs import on_model_device
from .run import read_only

# progress(done, total): called after each head of the pass and each head's strongest entry; it may raise to
# stop the run (a time limit, a Stop)
Progress = Callable[[int, int], None]


def is_long(n_heads: int, n_tokens: int) -> bool:
    """Whether one layer's maps at `n_tokens` are more than BIG_RUN_BYTES: a run the long implementation makes."""
    return n_heads * n_tokens * n_tokens * 4 > BIG_RUN_BYTES


def kept_bytes(model, n_tokens: int) -> int:
    """What a long run of `n_tokens` keeps, sized before the work: each layer's q (H, L, d) and k (G, L, d)
    float32 and its two (H, L) parts of the log-sum-exps, the model's mask once ((L, L) booleans; T5's bias is
    made a tile of rows at a time), and every head's thumbnails: the pass's mean and max blocks, the run's copy of
    the means."""
    c = model.config
    H, G = c.num_attention_heads, c.kv_heads
    d = max(c.for_layer(i).head_size for i in range(c.num_hidden_layers))  # the widest layer's
    per_layer = (H + G) * n_tokens * d * 4 + 2 * H * n_tokens * 4
    cells = min(POOL_CELLS, n_tokens) ** 2
    mask = n_tokens * n_tokens  # boolean, shared by the layers (T5's bias is made a tile of rows at a time)
    return c.num_hidden_layers * (per_layer + 3 * H * cells * 4) + mask


@dataclasses.dataclass(frozen=True)
class LongRun(PooledRun):
    """A long input's run: a PooledRun whose thumbnails are the exact block means of every head's map, its
    `attentions` refusing whole layers, and `maps`, any block, tile or row of any head made on demand."""

    maps: LongMaps | None = None


def _refuse(n_layers: int, n_heads: int, n_tokens: int):
    def load(compute, *args):
        raise NeedsSmallerInput(n_layers, n_heads, n_tokens)

    return load


def long_run(model, enc, progress: Progress | None = None) -> LongRun:
    """The long run of `enc` (attention.runs.inputs.Encoded): one forward pass keeping what maps need, then every
    head's thumbnail, at most POOL_CELLS blocks a side, and its strongest entry (the largest of its blocks' maxima,
    found in that block's tile)."""
    ids, mask, types = on_model_device(model, enc.input_ids, enc.attention_mask, enc.token_type_ids)
    c, n = model.config, min(POOL_CELLS, ids.size(1))
    heads = c.num_hidden_layers * c.num_attention_heads
    told = None if progress is None else lambda done: progress(done, 2 * heads)  # the pass, then each strongest
    maps = long_maps(model, ids, mask, token_type_ids=types, pool=n, progress=told)
    n_layers, H, L, _ = maps.shape
    pooled = np.empty((n_layers, H, n, n), dtype=np.float32)
    strongest = np.empty((n_layers, H, 3), dtype=np.float64)
    for layer in range(n_layers):
        for head in range(H):
            pooled[layer, head], most = maps.pooled(layer, head, n)
            strongest[layer, head] = _strongest(maps, layer, head, most)
            if progress is not None:
                progress(heads + layer * H + head + 1, 2 * heads)
    return LongRun(
        enc, read_only(pooled), read_only(strongest), None, LayerMaps(_refuse(n_layers, H, L), n_layers, H, L), maps
    )


def _strongest(maps: LongMaps, layer: int, head: int, most: np.ndarray) -> list[float]:
    """[query, key, weight] of the head's largest entry, read in the tile of the block whose maximum is largest."""
    n, L = most.shape[0], maps.shape[2]
    row, col = np.unravel_index(int(np.argmax(most)), most.shape)
    rows, cols = np.array_split(np.arange(L), n)[row], np.array_split(np.arange(L), n)[col]
    tile = maps.tile(layer, head, slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1))
    query, key = np.unravel_index(int(np.argmax(tile)), tile.shape)
    return [float(rows[0] + query), float(cols[0] + key), float(tile[query, key])]
