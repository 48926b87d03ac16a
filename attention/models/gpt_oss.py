"""gpt-oss: Llama's decoder with three changes to read by name. Each head has a learned sink: a logit that every
row's softmax covers beside the keys, as a key that is no token, so a row's attention to the tokens sums to less
than 1 (attention.sinks; core/score_parts.Sinks). Windowed and full layers alternate, the windowed first
(layer_types; sliding_window keys). The feed-forward block is a mixture of experts: each token through its top
num_experts_per_tok of num_local_experts gated experts (models/experts.py). Q, K, V and O carry biases.

Checkpoints whose experts are stored quantized (quantization_config, e.g. the released MXFP4 weights) are refused
by name: dequantize them first (transformers' Mxfp4Config(dequantize=True), then save_pretrained).
"""

from __future__ import annotations

from ..config import ConfigError
from .gemma3 import pattern
from .llama import DEFAULTS, RULES, decoder_family, read_decoder_config

_DEFAULTS = dict(
    DEFAULTS, vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=36,
    num_attention_heads=64, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
    layer_norm_eps=1e-5, attention_bias=True,
)  # fmt: skip
_LAYER = r"layers\.(\d+)\."


def read_config(values: dict):
    if values.get("quantization_config"):
        kind = (values["quantization_config"] or {}).get("quant_method", "?")
        raise ConfigError(f"quantized weights (quantization_config: {kind}) are not supported: dequantize them first")
    window = values.get("sliding_window", 128)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"sliding_window should be a positive int, not {window!r}")
    every, first = pattern(values, 2)
    theta = {} if "rope_parameters" in values or "rope_theta" in values else dict(rope_theta=150000.0)
    return read_decoder_config(
        values, "gpt_oss", _DEFAULTS, **theta, sinks=True, sliding_window=window, sliding_window_pattern=every,
        first_full_layer=first, num_local_experts=values.get("num_local_experts", 128),
        num_experts_per_tok=values.get("num_experts_per_tok", 4), swiglu_limit=values.get("swiglu_limit", 7.0),
        swiglu_alpha=values.get("swiglu_alpha", 1.702),
    )  # fmt: skip


FAMILY = decoder_family(
    "gpt_oss",
    "gpt-oss",
    read_config,
    tuple(rule for rule in RULES if "mlp" not in rule[0])
    + (
        (_LAYER + r"self_attn\.sinks", r"layers.\1.attention.sinks"),
        (_LAYER + r"mlp\.router\.(weight|bias)", r"layers.\1.mixture.router.\2"),
        (
            _LAYER + r"mlp\.experts\.(gate_up_proj|gate_up_proj_bias|down_proj|down_proj_bias)",
            r"layers.\1.mixture.experts.\2",
        ),
    ),
)
