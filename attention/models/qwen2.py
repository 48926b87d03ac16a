"""Qwen2: Llama's model and tensor names, with biases on q, k and v (not on o), and a sliding
window in the later layers when use_sliding_window is set.

The windowed layers are those from max_window_layers on, or the "sliding_attention" entries of
config.json's layer_types; this model follows a run of full layers then a run of windowed ones.
"""

from __future__ import annotations

from ..config import ConfigError
from .llama import DEFAULTS, decoder_family, read_decoder_config

_DEFAULTS = dict(DEFAULTS, vocab_size=151936, intermediate_size=22016, max_position_embeddings=32768)
_KINDS = ("full_attention", "sliding_attention")


def first_sliding_layer(values: dict) -> int:
    """The first windowed layer: from layer_types when given (full layers first, then windowed)."""
    kinds = values.get("layer_types")
    if kinds is None:
        return values.get("max_window_layers", 28)
    if not isinstance(kinds, list) or any(kind not in _KINDS for kind in kinds):
        raise ConfigError(f"layer_types should list {' or '.join(_KINDS)} per layer, not {kinds!r}")
    first = kinds.index("sliding_attention") if "sliding_attention" in kinds else len(kinds)
    if any(kind != "sliding_attention" for kind in kinds[first:]):
        raise ConfigError("layer_types with full attention after a sliding window layer are not supported")
    return first


def window_fields(values: dict) -> dict:
    """sliding_window and first_sliding_layer: a window only when use_sliding_window is set."""
    window = values.get("sliding_window", 4096) if values.get("use_sliding_window", False) else None
    return dict(sliding_window=window, first_sliding_layer=first_sliding_layer(values) if window else 0)


def read_config(values: dict):
    return read_decoder_config(
        values,
        "qwen2",
        _DEFAULTS,
        attention_bias=True,
        output_bias=False,
        mlp_bias=False,
        **window_fields(values),
    )


FAMILY = decoder_family("qwen2", "Qwen2", read_config)
