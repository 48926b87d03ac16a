"""Gemma3 (its text model, gemma3_text): Gemma2's model (GeGLU, √D-scaled embeddings, (1 + w) RMSNorms, a norm before
and after each sub-block, scores scaled by query_pre_attn_scalar ** -0.5) with an RMSNorm on each head's q and k
before rotary (q_norm, k_norm), uncapped scores (a config setting attn_logit_softcapping is refused: transformers'
Gemma3 reads it and caps nothing), windowed and full layers in a repeating pattern (layer_types, or
sliding_window_pattern: 6 by default, each sixth layer full), and the windowed layers' rotary on their own base
(rope_parameters' sliding_attention, or the older rope_local_base_freq), unscaled. `layer_rope` reads the two bases;
ModernBERT reads its own with it.
"""

from __future__ import annotations

import dataclasses

from ..config import ConfigError, ModelConfig
from .gemma import read_gemma_config
from .gemma2 import FAMILY as GEMMA2
from .llama import rope_fields

_FULL, _LOCAL = "full_attention", "sliding_attention"


def layer_rope(values: dict, full_key: str, full_base: float, local_key: str, local_base: float) -> dict:
    """rope_* fields of the full layers and local_rope_theta of the windowed ones: transformers 5's
    rope_parameters per layer kind, or the older top-level bases `full_key` and `local_key` (with rope_scaling
    for the full layers). The windowed layers' rotary must be unscaled; anything else is refused by name."""
    params = values.get("rope_parameters") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"rope_parameters should be a JSON object, not {params!r}")
    if _FULL not in params and _LOCAL not in params:  # the older layout
        full = dict(values.get("rope_scaling") or {}, rope_theta=values.get(full_key, full_base))
        local = {"rope_type": "default", "rope_theta": values.get(local_key, local_base)}
    else:
        full = dict(params.get(_FULL) or {"rope_theta": full_base})
        local = dict(params.get(_LOCAL) or {"rope_theta": local_base})
    kind = local.get("rope_type", local.get("type", "default"))
    if kind != "default":
        raise ConfigError(f"rope_type '{kind}' of the sliding layers is not supported: their rotary is unscaled")
    return dict(rope_fields({"rope_parameters": full}), local_rope_theta=local.get("rope_theta", local_base))


def pattern(values: dict, default: int, first_full: int | None = None) -> tuple[int, int]:
    """(every how many layers one is full, the first full one), from layer_types or sliding_window_pattern:
    layer_types that do not repeat one pattern are refused by name."""
    n = values.get("num_hidden_layers", 26)
    kinds = values.get("layer_types")
    if kinds is None:
        every = values.get("sliding_window_pattern", default)
        return every, every - 1 if first_full is None else first_full
    if not isinstance(kinds, list) or any(kind not in (_FULL, _LOCAL) for kind in kinds) or len(kinds) != n:
        raise ConfigError(f"layer_types should list {_FULL} or {_LOCAL} for each of {n} layers, not {kinds!r}")
    full = [i for i, kind in enumerate(kinds) if kind == _FULL]
    every = full[1] - full[0] if len(full) > 1 else n + 1  # one full layer: no second within the stack
    start = full[0] if full else n
    if [i for i in range(n) if i >= start and (i - start) % every == 0] != full or start >= every:
        raise ConfigError(f"layer_types {kinds!r} are not supported: only full layers repeating every n layers")
    return every, start


def read_config(values: dict) -> ModelConfig:
    if values.get("use_bidirectional_attention"):
        raise ConfigError("use_bidirectional_attention is not supported: every layer is causal")
    if values.get("attn_logit_softcapping") is not None:  # transformers' Gemma3 reads it and caps nothing
        raise ConfigError("attn_logit_softcapping is not supported for Gemma3: its released models leave it null")
    every, first = pattern(values, 6)
    rope = layer_rope(values, "rope_theta", 1_000_000.0, "rope_local_base_freq", 10_000.0)
    plain = {
        k: v for k, v in values.items() if k not in ("rope_parameters", "rope_scaling", "use_bidirectional_attention")
    }
    window = values.get("sliding_window", 4096)
    config = read_gemma_config(
        dict(plain, hidden_act=values.get("hidden_activation", "gelu_pytorch_tanh")),
        "gemma3_text",
        **rope,
        query_pre_attn_scalar=values.get("query_pre_attn_scalar", 256),
        sliding_window=window,
        sliding_window_pattern=every if window else 0,
        first_full_layer=first,
        qk_norm="head",
    )
    return config.replace(norm_after_sublayer=True)


FAMILY = dataclasses.replace(
    GEMMA2,
    model_type="gemma3_text",
    title="Gemma3",
    read_config=read_config,
    rules=GEMMA2.rules + ((r"layers\.(\d+)\.self_attn\.(q_norm|k_norm)\.weight", r"layers.\1.attention.\2.weight"),),
)
