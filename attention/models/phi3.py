"""Phi-3: Llama's model with one fused Q·K·V projection ([Q K V], qkv_proj) and one fused gate-up projection
(gate_up_proj, the gate's half first), no biases, rotary positions on a share of each head's coordinates when
rope_parameters' partial_rotary_factor says so (all of them by default), and a sliding window in every layer when
sliding_window is set (Mistral's). The long-context rope kinds (longrope, which older configs call su or yarn)
are not followed: ModelConfig refuses them by name.
"""

from __future__ import annotations

from ..config import ModelConfig
from .gpt_neox import rotary_settings
from .llama import DEFAULTS, RULES, decoder_family, read_decoder_config

_DEFAULTS = dict(
    DEFAULTS,
    vocab_size=32064,
    hidden_size=3072,
    intermediate_size=8192,
    max_position_embeddings=4096,
    layer_norm_eps=1e-5,
)


def read_config(values: dict) -> ModelConfig:
    share, rope = rotary_settings(values, "partial_rotary_factor", 1.0, "rope_theta")
    kind = values.get("rope_scaling", {}) or {}
    if isinstance(kind, dict) and kind.get("type", kind.get("rope_type")) in ("su", "yarn"):  # transformers: longrope
        rope = dict(rope, rope_type="longrope")
    plain = {k: v for k, v in values.items() if k not in ("rope_parameters", "rope_scaling")}  # read above
    return read_decoder_config(
        plain,
        "phi3",
        _DEFAULTS,
        **rope,
        rotary_fraction=share,
        sliding_window=values.get("sliding_window"),
        attention_bias=False,
        mlp_bias=False,
        fused_qkv=True,
        fused_gate_up=True,
    )


_LAYER = r"layers\.(\d+)\."
FAMILY = decoder_family(
    "phi3",
    "Phi-3",
    read_config,
    tuple(rule for rule in RULES if "self_attn" not in rule[0] and "mlp" not in rule[0])
    + (
        (_LAYER + r"self_attn\.qkv_proj\.weight", r"layers.\1.attention.qkv_proj.weight"),
        (_LAYER + r"self_attn\.o_proj\.weight", r"layers.\1.attention.o_proj.weight"),
        (_LAYER + r"mlp\.gate_up_proj\.weight", r"layers.\1.gate_up.weight"),
        (_LAYER + r"mlp\.down_proj\.weight", r"layers.\1.output.weight"),
    ),
)
