"""OLMo2: Llama's model with an RMSNorm on all heads' q at once and on all heads' k (over H·d and G·d,
before the heads are split and turned), and each sub-block's output normalised before the residual
adds it: x + post_attention_layernorm(attention(x)), then x + post_feedforward_layernorm(mlp(x)); no
norm on a sub-block's input. Its RMSNorm multiplies by the weight in float32 before casting back, which
differs from Llama's (used here) only for half-precision weights.
"""

from __future__ import annotations

from .llama import DEFAULTS, RULES, decoder_family, read_decoder_config

_DEFAULTS = dict(DEFAULTS, vocab_size=50304, layer_norm_eps=1e-5)
_LAYER = r"layers\.(\d+)\."


def read_olmo_config(values: dict, model_type: str = "olmo2", **declared):
    """OLMo2's choices (and OLMo 3's, which adds `declared`: its windows and per-layer-kind rotary bases)."""
    config = read_decoder_config(values, model_type, _DEFAULTS, mlp_bias=False, qk_norm="projection", **declared)
    return config.replace(pre_norm=False, norm_after_sublayer=True)


def read_config(values: dict):
    return read_olmo_config(values)


FAMILY = decoder_family(
    "olmo2",
    "OLMo2",
    read_config,
    tuple(rule for rule in RULES if "layernorm" not in rule[0])
    + (
        (_LAYER + r"self_attn\.(q_norm|k_norm)\.weight", r"layers.\1.attention.\2.weight"),
        (_LAYER + r"post_attention_layernorm\.weight", r"layers.\1.attention_norm.weight"),
        (_LAYER + r"post_feedforward_layernorm\.weight", r"layers.\1.output_norm.weight"),
    ),
)
