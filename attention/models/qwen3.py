"""Qwen3: Qwen2's model and tensor names with an RMSNorm on each head's q and k, over its d, before
rotary (q_norm and k_norm, one weight of width d shared by the heads), and no biases unless
attention_bias says so (then on q, k, v and o alike). head_dim is its own setting (128 by default),
so H·d need not be hidden_size. The sliding window is read as Qwen2's.
"""

from __future__ import annotations

from .llama import DEFAULTS, RULES, decoder_family, read_decoder_config
from .qwen2 import window_fields

_DEFAULTS = dict(DEFAULTS, vocab_size=151936, intermediate_size=22016, max_position_embeddings=32768, head_dim=128)


def read_config(values: dict):
    return read_decoder_config(values, "qwen3", _DEFAULTS, mlp_bias=False, qk_norm="head", **window_fields(values))


FAMILY = decoder_family(
    "qwen3",
    "Qwen3",
    read_config,
    RULES + ((r"layers\.(\d+)\.self_attn\.(q_norm|k_norm)\.weight", r"layers.\1.attention.\2.weight"),),
)
