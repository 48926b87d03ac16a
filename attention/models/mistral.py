"""Mistral: Llama's model and tensor names, with a sliding window.

Each token sees only the `sliding_window` latest tokens, itself included, in every layer
(config.json's sliding_window; null for none), as transformers' mask does. Its defaults differ
from Llama's: 8 key/value heads, a 14336-wide MLP, 131072 positions, a 4096-token window.
"""

from __future__ import annotations

from .llama import DEFAULTS, decoder_family, read_decoder_config

_DEFAULTS = dict(DEFAULTS, intermediate_size=14336, max_position_embeddings=4096 * 32, num_key_value_heads=8)


def read_config(values: dict):
    return read_decoder_config(
        values,
        "mistral",
        _DEFAULTS,
        sliding_window=values.get("sliding_window", 4096),
        attention_bias=False,
        mlp_bias=False,
    )


FAMILY = decoder_family("mistral", "Mistral", read_config)
