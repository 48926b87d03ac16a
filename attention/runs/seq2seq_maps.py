"""An encoder-decoder's maps past the big-run bound (bigrun.py): one teacher-forced pass over a source (1, S) and a
decoder sequence (1, T), its decoder sequence written or given before it (generate_seq2seq with keep_maps=False),
hands each layer's maps to a callback as they come and lets them go. `pooled_parts` keeps every layer's maps of
its three parts (the encoder's (H, S, S), the decoder's (H, T, T), the cross-attention's (H, T, S)) pooled to at
most POOL_CELLS a side; `part_layer` keeps one layer's maps of one part, whole. Each layer's maps are made by
EncoderDecoder.forward's own steps (the encoder's forward, its hooks handing each layer's maps over; the decoder's
EncoderDecoder.decode, given on_map): one layer's maps read here are those of the full pass that keeps every map.
One layer of each part is held at a time, so `one_layer_bytes` sizes the work."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
import torch

from ..core.dot_product import reused_scores
from ..core.request import MapRequest
from ..models import EncoderDecoder
from .bigrun import POOL_CELLS, first_item, layer_hooks, maps_bytes
from .pooling import pool_map
from .run import read_only

PARTS = ("cross", "decoder", "encoder")  # the Cross-attention view's parts, as ui/state/state.py's CROSS_PARTS
OnMap = Callable[[str, int, np.ndarray], None]  # on_map(part, layer, maps (H, L_query, L_key)), float32


def part_shape(model: EncoderDecoder, part: str, n_source: int, n_target: int) -> tuple[int, int, int, int]:
    """(n_layers, H, L_query, L_key) of every map of `part` over `n_source` encoder and `n_target` decoder tokens."""
    config = model.encoder.config if part == "encoder" else model.decoder.config
    rows = n_source if part == "encoder" else n_target
    cols = n_target if part == "decoder" else n_source
    return config.num_hidden_layers, config.num_attention_heads, rows, cols


def one_layer_bytes(model: EncoderDecoder, part: str, n_source: int, n_target: int) -> int:
    """Bytes of one layer's maps of `part`, float32."""
    _, heads, rows, cols = part_shape(model, part, n_source, n_target)
    return maps_bytes(1, heads, rows, cols)


def forced_maps(model: EncoderDecoder, input_ids: torch.Tensor, decoder_ids: torch.Tensor, on_map: OnMap, until=None):
    """One pass of the encoder over input_ids (1, S) and the decoder over decoder_ids (1, T), each on the model's
    device, calling on_map(part, layer, maps) for each layer's encoder maps, then each decoder layer's self- and
    cross-attention maps, in that order. The encoder's maps are in a buffer the next layer writes over
    (dot_product.reused_scores): on_map copies what it keeps of them; each decoder map is its own, which on_map
    may keep.
    `until` (part, layer) stops the pass once that layer's maps are handed over."""
    stop = until or ("cross", len(model.decoder.layers) - 1)
    with torch.inference_mode():
        hooks = layer_hooks(model.encoder, lambda layer, maps: on_map("encoder", layer, maps))
        with reused_scores(), hooks:  # the encoder's maps share one shape: one buffer for them all
            memory = model.encoder(input_ids, request=MapRequest(keep_hidden=False)).last_hidden_state  # (1, S, D)
        if stop[0] == "encoder":
            return
        assert memory is not None

        def hand(part: str, layer: int, probs: torch.Tensor) -> None:
            on_map(part, layer, first_item(probs))
            if (part, layer) == stop:
                raise Stop

        with contextlib.suppress(Stop):  # the decoder's own pass, each map handed over as it is made
            model.decode(decoder_ids, None, memory, None, on_map=hand)


class Stop(Exception):
    """The maps asked for are handed over: forced_maps ends the decoder's pass there."""


def pooled_parts(model: EncoderDecoder, input_ids: torch.Tensor, decoder_ids: torch.Tensor) -> dict[str, np.ndarray]:
    """Every layer's maps of each part, (n_layers, H, C_query, C_key), each mean-pooled (pooling.pool_map) to
    at most POOL_CELLS a side, float32; one layer of one part held whole at a time."""
    pooled: dict[str, dict[int, np.ndarray]] = {part: {} for part in PARTS}

    def on_map(part: str, layer: int, maps: np.ndarray) -> None:
        pooled[part][layer] = pool_map(maps, POOL_CELLS).astype(np.float32)

    forced_maps(model, input_ids, decoder_ids, on_map)
    return {part: read_only(np.stack([kept[i] for i in range(len(kept))])) for part, kept in pooled.items()}


def part_layer(model: EncoderDecoder, input_ids: torch.Tensor, decoder_ids: torch.Tensor, part: str, layer: int):
    """Layer `layer`'s maps of `part`, (H, L_query, L_key) float32, read-only: the pass stops after them."""
    kept: dict[str, np.ndarray] = {}

    def on_map(name: str, index: int, maps: np.ndarray) -> None:
        if (name, index) == (part, layer):
            kept[name] = maps.copy() if name == "encoder" else maps  # the decoder's: a map of its own

    forced_maps(model, input_ids, decoder_ids, on_map, until=(part, layer))
    return read_only(kept[part])
