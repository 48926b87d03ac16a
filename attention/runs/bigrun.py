"""Big models' runs: when every attention map of a run (n_layers·H·L·L float32) is more than BIG_RUN_BYTES,
the run keeps pooled tiles gathered layer by layer as one forward pass goes, and reads one layer's full
maps on demand (`LayerMaps`), through a loader its caller gives (the app's caches them)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..core.dot_product import reused_scores
from ..core.request import MapRequest
from .inputs import on_model_device
from .run import read_only

MB = 1024 * 1024
BIG_RUN_BYTES = 96 * MB  # a run whose every map (n_layers·H·L·L float32) is larger keeps pooled tiles only
POOL_CELLS = 32  # each head's thumbnail in a big run: at most this many cells a side (viz.overview's default)
HEAD_MEANS_BYTES = 64 * MB  # a big run keeps each layer's head-averaged map (rollout's input) up to this size
SLICE_BYTES = 16 * MB  # the most a general index into a big run's maps may return (e.g. the pronoun's rows)
# load(compute, *args): compute(model, enc, causal, *args) for the run's input, compute being layer_maps,
# layer_selection or pooled_stats below; the caller decides what is kept
Loader = Callable[..., Any]


class NeedsSmallerInput(ValueError):
    """A view asked for every map of a run too big to hold them all."""

    def __init__(self, n_layers: int, n_heads: int, n_tokens: int):
        full = maps_bytes(n_layers, n_heads, n_tokens) / MB
        super().__init__(
            f"This view needs every head's full map at once: {n_layers} layers × {n_heads} heads at {n_tokens} "
            f"tokens is {full:,.0f} MB, more than the {BIG_RUN_BYTES // MB} MB this server holds for one run. "
            "Try a shorter input with this model, or another view (the head view, overview and GQA view "
            "read one layer at a time)."
        )


class KeepsTooMuch(NeedsSmallerInput):
    """A computation that keeps every map it makes (writing, an encoder-decoder's passes) asked for more than
    its bound (BIG_RUN_BYTES unless its caller set another): refused before it starts, with what it would have
    kept and what to try instead."""

    def __init__(self, what: str, n_bytes: int, advice: str, bound: int = BIG_RUN_BYTES):
        whose = "this server holds for one run" if bound == BIG_RUN_BYTES else "its bound allows"
        ValueError.__init__(
            self,
            f"{what} keeps every map it makes: {n_bytes / MB:,.0f} MB here, more than the {bound / MB:,.0f} MB "
            f"{whose}. {advice}",
        )


class LayerTooBig(KeepsTooMuch):
    """A computation that reads its maps one layer at a time, refused before it starts: even one layer's maps
    are more than BIG_RUN_BYTES."""

    def __init__(self, what: str, n_bytes: int, advice: str):
        ValueError.__init__(
            self,
            f"{what} reads one layer's maps at a time, and one layer's are {n_bytes / MB:,.0f} MB here, more than "
            f"the {BIG_RUN_BYTES // MB} MB this server holds for one run. {advice}",
        )


def within_bound(what: str, n_bytes: int, advice: str, bound: int | None = BIG_RUN_BYTES) -> None:
    """Raise KeepsTooMuch, before the work, when keeping `n_bytes` of maps would pass `bound` (None: no bound)."""
    if bound is not None and n_bytes > bound:
        raise KeepsTooMuch(what, n_bytes, advice, bound)


def maps_bytes(n_layers: int, n_heads: int, n_tokens: int, n_keys: int | None = None) -> int:
    """Bytes of every attention map of one run, as float32 (n_layers, H, L, L), or (n_layers, H, L, n_keys)
    when the keys are not the queries (an encoder-decoder's cross-attention)."""
    return n_layers * n_heads * n_tokens * (n_tokens if n_keys is None else n_keys) * 4


def is_big(run) -> bool:
    """Whether `run` is a PooledRun (a big model's run, its full maps fetched one layer at a time)."""
    return isinstance(run, PooledRun)


def first_item(probs: torch.Tensor) -> np.ndarray:
    """A layer's (B, H, L, L) maps as the batch's first item's (H, L, L), float32 on the CPU, whatever the model's."""
    return probs[0].float().cpu().numpy()


@contextlib.contextmanager
def layer_hooks(model, on_layer: Callable[[int, Any], None], convert: Callable[[torch.Tensor], Any] = first_item):
    """Within this block, each layer of `model` that computes its map in this thread hands it, as
    convert((B, H, L, L) maps) (by default the batch's first item's, (H, L, L)), to on_layer(layer, maps),
    and the model keeps None in its place: the forward pass never holds more than one layer's maps. The
    model is shared by every session: a forward pass of another thread meanwhile is left as it is."""
    owner = threading.get_ident()

    def hook_for(index: int):
        def hook(module, args, output):
            x, probs = output
            if probs is None or threading.get_ident() != owner:
                return None  # a fused layer (no map), or another session's forward pass
            on_layer(index, convert(probs))
            return x, None

        return hook

    handles = [layer.register_forward_hook(hook_for(i)) for i, layer in enumerate(model.layers)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def forward_maps(model, enc, causal: bool, on_layer, layers=None) -> None:
    """One forward pass of `enc` calling on_layer(layer, (H, L, L) maps) for each layer in `layers` (all
    when None); the other layers run torch's fused attention and make no map. The next layer writes its
    maps over the same memory (dot_product.reused_scores): on_layer copies what it keeps."""
    inputs = on_model_device(model, enc.input_ids, enc.attention_mask, enc.token_type_ids)
    with torch.inference_mode(), layer_hooks(model, on_layer), reused_scores():
        model(*inputs, causal=causal, request=MapRequest(layers))


class LayerMaps:
    """A big run's maps, (n_layers, H, L, L) (or (n_layers, H, L, n_keys)), without holding them: an index whose
    first entry is one layer (``maps[layer]``, ``maps[layer, head]``) reads that layer's maps through `load`; an
    index over every layer (``maps[:, :, rows, :]``) runs one forward pass that keeps only what the index selects, if
    that is at most SLICE_BYTES. Anything that would need every map at once (np.asarray, a slice of whole
    layers) raises NeedsSmallerInput, which a page shows in place of the view."""

    def __init__(self, load: Loader, n_layers: int, n_heads: int, n_tokens: int, n_keys: int | None = None):
        self.load = load
        self.shape = (n_layers, n_heads, n_tokens, n_tokens if n_keys is None else n_keys)
        self.ndim, self.dtype = 4, np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def refuse(self) -> NeedsSmallerInput:
        return NeedsSmallerInput(*self.shape[:3])

    def __array__(self, dtype=None, copy=None):
        raise self.refuse()

    def __iter__(self):
        raise self.refuse()

    def layer(self, layer: int) -> np.ndarray:
        """One layer's maps, (H, L, L), read-only."""
        if not -self.shape[0] <= layer < self.shape[0]:
            raise IndexError(f"layer {layer} is outside this model's {self.shape[0]} layers")
        return self.load(layer_maps, layer % self.shape[0])

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        first, rest = index[0], index[1:]
        if isinstance(first, (int, np.integer)) and not isinstance(first, bool):
            return self.layer(int(first))[rest]
        if isinstance(first, slice) and first == slice(None) and rest:
            shape = np.broadcast_to(np.float32(0), self.shape[1:])[rest].shape  # one layer's selection
            if self.shape[0] * int(np.prod(shape)) * 4 <= SLICE_BYTES:
                return self.load(layer_selection, rest)
        raise self.refuse()


@dataclasses.dataclass(frozen=True)
class PooledRun:
    """A big model's run (its maps more than BIG_RUN_BYTES): what the views need, gathered layer by
    layer as the forward pass went, and its full maps one layer at a time (``attentions[layer]``)."""

    encoded: Any  # attention.runs.inputs.Encoded
    pooled: np.ndarray  # (n_layers, H, C, C) each map mean-pooled to at most POOL_CELLS a side
    strongest: np.ndarray  # (n_layers, H, 3): query, key and weight of each head's largest entry
    head_means: np.ndarray | None  # (n_layers, L, L) each layer's head-averaged map, None past HEAD_MEANS_BYTES
    attentions: LayerMaps

    @property
    def tokens(self) -> list[str]:
        return self.encoded.tokens

    @property
    def stats(self) -> dict[str, np.ndarray]:
        """attention.analysis.stats.head_stats of every head, (n_layers, H) each: one more forward pass,
        the first time it is asked for (it takes longer than the run itself), then as the loader keeps it."""
        return self.attentions.load(pooled_stats)

    @property
    def n_layers(self) -> int:
        return self.pooled.shape[0]

    @property
    def n_heads(self) -> int:
        return self.pooled.shape[1]


def pooled_run(model, enc, causal: bool, load: Loader, tiles: Callable) -> PooledRun:
    """One forward pass of `enc` that pools each layer's maps as they come and lets them go:
    tiles(maps, POOL_CELLS) gives a layer's (pooled, strongest), e.g. pooling.head_tiles."""
    c = model.config
    n_layers, H, L = c.num_hidden_layers, c.num_attention_heads, len(enc.tokens)
    keep_means = n_layers * L * L * 4 <= HEAD_MEANS_BYTES
    pooled: list[Any] = [None] * n_layers  # each layer's, filled in as the forward pass goes
    strongest: list[Any] = [None] * n_layers
    means: list[Any] = [None] * n_layers

    def on_layer(layer: int, maps: np.ndarray) -> None:
        pooled[layer], strongest[layer] = tiles(maps, POOL_CELLS)
        if keep_means:
            means[layer] = maps.mean(axis=0)

    forward_maps(model, enc, causal, on_layer)
    return PooledRun(
        enc,
        read_only(np.stack(pooled)),
        read_only(np.stack(strongest)),
        read_only(np.stack(means)) if keep_means else None,
        LayerMaps(load, n_layers, H, L),
    )


def pooled_stats(model, enc, causal: bool) -> dict[str, np.ndarray]:
    """head_stats of every head, (n_layers, H) each, from one forward pass holding one layer at a time."""
    from ..analysis.stats import head_stats, punctuation_mask

    per_layer: dict[int, dict[str, np.ndarray]] = {}
    punct = punctuation_mask(enc.tokens)
    forward_maps(
        model,
        enc,
        causal,
        lambda i, maps: per_layer.setdefault(i, head_stats(maps[None], enc.special, enc.sequence_ids, punct)),
    )
    layers = [per_layer[i] for i in range(len(per_layer))]
    return {name: read_only(np.concatenate([s[name] for s in layers])) for name in layers[0]}


def layer_maps(model, enc, causal: bool, layer: int) -> np.ndarray:
    """One layer's maps (H, L, L), from a forward pass in which every other layer runs fused."""
    kept: dict[int, np.ndarray] = {}
    forward_maps(model, enc, causal, lambda i, maps: kept.setdefault(i, maps.copy()), layers={layer})
    return read_only(kept[layer])


def layer_selection(model, enc, causal: bool, index: tuple) -> np.ndarray:
    """``maps[:, *index]`` of every layer, (n_layers, ...), from one forward pass holding one layer at a time."""
    kept: dict[int, np.ndarray] = {}
    forward_maps(model, enc, causal, lambda i, maps: kept.setdefault(i, np.array(maps[index])))
    return read_only(np.stack([kept[i] for i in range(len(kept))]))
