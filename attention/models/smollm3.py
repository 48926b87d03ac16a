"""SmolLM3: Llama's model and tensor names, with no positions in some layers (NoPE): `no_rope_layers` holds a 1
for each layer whose q and k rotary turns and a 0 for each that attends by content alone (by default every
`no_rope_layer_interval`-th layer, the fourth of every four). The rotary position part leaves those layers'
q and k as projected (position_parts.Rotary); nothing else differs. A sliding window (use_sliding_window) is
refused by name.
"""

from __future__ import annotations

from ..config import ConfigError
from .llama import DEFAULTS, decoder_family, read_decoder_config

_DEFAULTS = dict(
    DEFAULTS, vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
    num_attention_heads=16, max_position_embeddings=32768,
)  # fmt: skip


def nope_layers(values: dict, n_layers: int) -> tuple[int, ...]:
    """The layers without positions: those `no_rope_layers` marks 0, or every interval-th (transformers' rule)."""
    marks = values.get("no_rope_layers")
    if marks is None:
        interval = values.get("no_rope_layer_interval", 4)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ConfigError(f"no_rope_layer_interval should be a positive int, not {interval!r}")
        marks = [int((i + 1) % interval != 0) for i in range(n_layers)]
    if not isinstance(marks, list) or len(marks) < n_layers or any(m not in (0, 1) for m in marks[:n_layers]):
        raise ConfigError(f"no_rope_layers should hold a 0 or 1 for each of the {n_layers} layers, not {marks!r}")
    return tuple(i for i in range(n_layers) if marks[i] == 0)


def read_config(values: dict):
    if values.get("use_sliding_window"):
        raise ConfigError("SmolLM3's sliding window (use_sliding_window) is not supported")
    n_layers = values.get("num_hidden_layers", _DEFAULTS["num_hidden_layers"])
    if isinstance(n_layers, bool) or not isinstance(n_layers, int):
        raise ConfigError(f"num_hidden_layers should be an int, not {n_layers!r}")
    return read_decoder_config(values, "smollm3", _DEFAULTS, nope_layers=nope_layers(values, n_layers))


FAMILY = decoder_family("smollm3", "SmolLM3", read_config)
