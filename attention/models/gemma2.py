"""Gemma2: Gemma's model (gemma.py) with the scores scaled by query_pre_attn_scalar ** -0.5 and capped to
tanh(s / cap) · cap before the mask (attn_logit_softcapping), windowed and full layers alternating (layer_types:
"sliding_attention" on even layers, "full_attention" on odd ones), and a norm on each sub-block's output as well as
on its input: x + post_attention_layernorm(attention(input_layernorm(x))), then the same with
pre_feedforward_layernorm and post_feedforward_layernorm. The activation is hidden_activation. The LM head's
final_logit_softcapping is not part of the base model: generate.py's LM head reads it.
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig
from .gemma import read_gemma_config
from .llama import RULES, decoder_family

_LAYER = r"layers\.(\d+)\."
_PATTERN = 2  # every second layer sees every key


def alternating(values: dict) -> None:
    """ConfigError unless layer_types, when given, alternate windowed and full layers, windowed first."""
    kinds, n = values.get("layer_types"), values.get("num_hidden_layers", 26)
    expected = ["full_attention" if (i + 1) % _PATTERN == 0 else "sliding_attention" for i in range(n)]
    if kinds is not None and kinds != expected:
        raise ConfigError(f"layer_types {kinds!r} are not supported: only sliding and full layers alternating")


def read_config(values: dict) -> ModelConfig:
    alternating(values)
    window = values.get("sliding_window", 4096)
    config = read_gemma_config(
        dict(values, hidden_act=values.get("hidden_activation", "gelu_pytorch_tanh")),
        "gemma2",
        query_pre_attn_scalar=values.get("query_pre_attn_scalar", 256),
        attn_logit_softcapping=values.get("attn_logit_softcapping", 50.0),
        sliding_window=window,
        sliding_window_pattern=_PATTERN if window else 0,
    )
    return config.replace(norm_after_sublayer=True)


FAMILY = decoder_family(
    "gemma2",
    "Gemma2",
    read_config,
    tuple(rule for rule in RULES if "post_attention_layernorm" not in rule[0])
    + (
        (_LAYER + r"post_attention_layernorm\.weight", r"layers.\1.attention_post_norm.weight"),
        (_LAYER + r"pre_feedforward_layernorm\.weight", r"layers.\1.output_norm.weight"),
        (_LAYER + r"post_feedforward_layernorm\.weight", r"layers.\1.output_post_norm.weight"),
    ),
)
