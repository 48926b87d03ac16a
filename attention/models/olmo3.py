"""OLMo 3: OLMo2's model (an RMSNorm over all heads' q and over all heads' k, each sub-block's output normalised
before the residual adds it) with sliding-window layers: three of every four see only the `sliding_window` latest
keys and the fourth sees every key (layer_types; by default each fourth layer full), each kind on its own rotary
(rope_parameters' full_attention and sliding_attention; the windowed layers' unscaled). Tensor names are OLMo2's.
"""

from __future__ import annotations

import dataclasses

from ..config import ConfigError
from .gemma3 import layer_rope, pattern
from .olmo2 import FAMILY as OLMO2
from .olmo2 import read_olmo_config

THETA = 500_000.0  # transformers' Olmo3Config.default_theta, for both kinds of layer


def read_config(values: dict):
    window = values.get("sliding_window", 4096)  # transformers' Olmo3 reads a number for its windowed layers
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"sliding_window should be a positive int, not {window!r}")
    every, first = pattern(values, 4)
    rope = layer_rope(values, "rope_theta", THETA, "rope_theta", THETA)
    plain = {k: v for k, v in values.items() if k not in ("rope_parameters", "rope_scaling")}
    return read_olmo_config(
        plain, "olmo3", **rope, sliding_window=window, sliding_window_pattern=every, first_full_layer=first,
    )  # fmt: skip


FAMILY = dataclasses.replace(OLMO2, model_type="olmo3", title="OLMo 3", read_config=read_config)
