"""A causal decoder writing token by token (attention.generate): each call runs only the new positions through
the layers, after the keys and values of the positions before them, kept per layer in a KeyValueCache (core/mha.py).
The same numbers as the last rows of a forward over the whole sequence (blocks.Transformer.forward).
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..core.masks import build_mask
from ..core.mha import KeyValueCache
from ..core.request import EXPLICIT, FUSED, Call
from .blocks import ModelOutput, Transformer

BY_GROUP = Call("by_group")


def decode(
    model: Transformer, input_ids: torch.Tensor, cache: list[KeyValueCache], keep_maps: bool = False
) -> ModelOutput:
    """A causal decoder's last hidden states (B, L, E or D) for the L tokens `input_ids` (B, L) that follow the
    P positions in `cache` (one KeyValueCache per layer, extended here): each layer computes the keys and values
    of the new positions only. The same numbers as the last L rows of a forward over all P + L tokens (no
    padding). `keep_maps`: each layer's map of the new queries, (B, H, L, P + L), the last L rows of that
    forward's maps; otherwise torch's fused attention runs and every entry of `attentions` is None.
    `hidden_states` is ()."""
    B, L = input_ids.shape
    P = cache[0].length
    S = P + L
    config = model.config
    if (
        not config.attention.causal
        or config.positions.position_embedding_type not in ("absolute", "rotary")
        or len(cache) != len(model.layers)
    ):
        raise ValueError("decode needs a causal decoder with absolute or rotary positions, one cache per layer")
    if S > config.max_position_embeddings:
        raise ValueError(f"{S} tokens is more than this model's {config.max_position_embeddings} positions")
    device = input_ids.device
    mask, window_mask = decode_masks(config, B, L, S, device)
    angles = model.positions.layer_angles(model, L, device, start=P)  # the new positions' only: (1, L, d) each
    x = model.embeddings(input_ids, None, start=P)  # (B, L, D)
    layer_inputs = model.layer_inputs.inputs(model, input_ids, x)  # per layer (B, L, P), or None
    maps = []
    for i, layer in enumerate(model.layers):
        layer_mask = mask if config.window_of(i) is None else window_mask
        call = step_call(keep_maps, L, layer_mask)
        out, probs = layer(x, layer_mask, angles[i], cache[i], call, layer_inputs[i])  # (B, L, D)
        assert out is not None
        x = out
        maps.append(probs)  # (B, H, L, S), or None
    if config.norms.final_norm:
        x = model.final_norm(x)
    if config.embeddings.final_projection:
        x = model.project_out(x)  # (B, L, E)
    return ModelOutput(x, (), tuple(maps))


def step_call(keep_maps: bool, L: int, mask: torch.Tensor | None) -> Call:
    """A writing step's attention call: torch's fused kernel without maps; with them, one new unmasked query read
    by each key/value head's group of query heads at once ("by_group"), or the explicit steps."""
    if not keep_maps:
        return FUSED
    return BY_GROUP if L == 1 and mask is None else EXPLICIT


def decode_masks(
    config: ModelConfig, B: int, L: int, S: int, device: torch.device
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """decode's causal masks for L new queries, the last L of S positions: (full layers', windowed layers'),
    (1, 1, L, S) each, or None where every query sees every key (one new query, within any window)."""
    window = config.attention.sliding_window
    mask = None if L == 1 else build_mask(None, True, B, L, S, device=device)
    if window is None or window >= S:  # the window reaches back past the first position
        return mask, mask
    return mask, build_mask(None, True, B, L, S, window, device)
