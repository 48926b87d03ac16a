"""Long inputs' runs: when even one layer's maps (H·L·L float32) are more than BIG_RUN_BYTES, the run goes through the
"long" attention implementation (attention/long_maps.py): one forward pass keeps each layer's q, k and row
log-sum-exps (or, past the bound it is given, a few layer inputs that q and k are made again from), never a map,
and makes every head's thumbnail (its exact block means and maxima) from the scores its output is made of; each
head's strongest entry is found in its strongest block's tile as the pass goes. Any part of any head's map is then
made on demand (`LongRun.maps`: blocks, tiles, rows); what would need a whole layer's maps at once is refused
(NeedsSmallerInput), as a big run's views are.

SmolLM2 (30 layers × 9 heads of 64, 3 key/value heads, 576 wide) at 8,192 tokens: every layer's q and k keep 804
MB; `keeping` it within 512 MB keeps every 5th layer's input and 5 layers' q and k: 294 MB (bench/long.py --model
smollm2)."""

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


def kept_bytes(model, n_tokens: int, every: int | None = None) -> int:
    """What a long run of `n_tokens` keeps, sized before the work: each layer's two (H, L) float32 parts of the
    log-sum-exps and every head's thumbnails (the pass's mean and max blocks, the run's copy of the means), the
    model's mask once ((L, L) booleans; T5's bias is made a tile of rows at a time), and each layer's q (H, L, d)
    and k (G, L, d) float32; or with `every` k (long_maps' `every`), k layers' q and k (the last run made again)
    and every k-th layer's input (L, D) from layer k on."""
    c = model.config
    H, G, layers = c.num_attention_heads, c.kv_heads, c.num_hidden_layers
    d = max(c.for_layer(i).head_size for i in range(layers))  # the widest layer's
    queries_keys = (H + G) * n_tokens * d * 4
    per_layer = 2 * H * n_tokens * 4 + 3 * H * min(POOL_CELLS, n_tokens) ** 2 * 4
    mask = n_tokens * n_tokens  # boolean, shared by the layers (T5's bias is made a tile of rows at a time)
    if every is None:
        return layers * (per_layer + queries_keys) + mask
    inputs = (layers - 1) // every * n_tokens * c.hidden_size * 4
    return layers * per_layer + min(every, layers) * queries_keys + inputs + mask


def keeping(model, n_tokens: int, bound: int) -> int | None:
    """How a long run of `n_tokens` keeps within `bound` bytes: None, each layer's q and k, where they fit; else
    `every` (kept_bytes), the one that keeps least (about the square root of the layers: a few layer inputs and
    a few layers' q and k). Past the bound even so, that one all the same: `longest` says what fits."""
    if kept_bytes(model, n_tokens) <= bound:
        return None
    return min(range(1, model.config.num_hidden_layers + 1), key=lambda every: kept_bytes(model, n_tokens, every))


def longest(model, bound: int) -> int:
    """The most tokens a long run keeps within `bound` bytes (`keeping`'s least), 0 where none does."""

    def fits(n: int) -> bool:
        return kept_bytes(model, n, keeping(model, n, bound)) <= bound

    low, high = 0, model.config.max_position_embeddings  # fits(low); the answer is at most high
    if fits(high):
        return high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


@dataclasses.dataclass(frozen=True)
class LongRun(PooledRun):
    """A long input's run: a PooledRun whose thumbnails are the exact block means of every head's map, its
    `attentions` refusing whole layers, and `maps`, any block, tile or row of any head made on demand."""

    maps: LongMaps | None = None


def _refuse(n_layers: int, n_heads: int, n_tokens: int):
    def load(compute, *args):
        raise NeedsSmallerInput(n_layers, n_heads, n_tokens)

    return load


def long_run(model, enc, progress: Progress | None = None, bound: int | None = None) -> LongRun:
    """The long run of `enc` (attention.runs.inputs.Encoded): one forward pass keeping what maps need, within
    `bound` bytes where one is given (`keeping`: each layer's q and k, or a few layer inputs they are made again
    from), every head's thumbnail, at most POOL_CELLS blocks a side, and its strongest entry (the largest of its
    blocks' maxima, found in that block's tile), each layer's read in the pass while its q and k are held."""
    ids, mask, types = on_model_device(model, enc.input_ids, enc.attention_mask, enc.token_type_ids)
    c, n, L = model.config, min(POOL_CELLS, ids.size(1)), ids.size(1)
    n_layers, H = c.num_hidden_layers, c.num_attention_heads
    pooled = np.empty((n_layers, H, n, n), dtype=np.float32)
    strongest = np.empty((n_layers, H, 3), dtype=np.float64)
    found = [0]  # the heads whose strongest entry is found
    heads_done = [0]

    def told(done: int) -> None:  # the pass's progress: `done` heads' blocks made
        heads_done[0] = done
        if progress is not None:
            progress(done + found[0], 2 * n_layers * H)

    def on_layer(maps: LongMaps, layer: int) -> None:
        for head in range(H):
            pooled[layer, head], most = maps.pooled(layer, head, n)
            strongest[layer, head] = _strongest(maps, layer, head, most)
            found[0] += 1
            if progress is not None:
                progress(heads_done[0] + found[0], 2 * n_layers * H)

    every = None if bound is None else keeping(model, L, bound)
    maps = long_maps(model, ids, mask, token_type_ids=types, pool=n, progress=told, every=every, on_layer=on_layer)
    layers = LayerMaps(_refuse(n_layers, H, L), n_layers, H, L)
    return LongRun(enc, read_only(pooled), read_only(strongest), None, layers, maps)


def _strongest(maps: LongMaps, layer: int, head: int, most: np.ndarray) -> list[float]:
    """[query, key, weight] of the head's largest entry, read in the tile of the block whose maximum is largest."""
    n, L = most.shape[0], maps.shape[2]
    row, col = np.unravel_index(int(np.argmax(most)), most.shape)
    rows, cols = np.array_split(np.arange(L), n)[row], np.array_split(np.arange(L), n)[col]
    tile = maps.tile(layer, head, slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1))
    query, key = np.unravel_index(int(np.argmax(tile)), tile.shape)
    return [float(rows[0] + query), float(cols[0] + key), float(tile[query, key])]
