"""Gemma 4 (its text model, gemma4_text): Gemma3's model (GeGLU, √D-scaled embeddings, a norm before and after each
sub-block, RMSNorms on each head's q and k, windowed and full layers by layer_types) with six changes to read by
name. Its RMSNorms multiply by the weight itself, all in float32 (norm "rms_norm_float"). The scores are unscaled
(the q and k norms set their size). Each head's v is normalised too, by an RMSNorm without a weight (v_norm;
core/qkv.ValueRMSNorm). The full layers' heads are wider (per_layer_config's head_dim, global_head_dim: the
layer's own config, ModelConfig.for_layer) and turn by "proportional" rotary: only the first partial_rotary_factor
of the pairs, θ_i over the whole width (core/rotary.py); the windowed layers by plain rotary on their own base.
Each layer reads a per-layer input and ends times its layer_scalar (models/layer_inputs.py). The LM head's
final_logit_softcapping is not part of the base model: generate.py's LM head reads it.

Options transformers' default checkpoints leave off are refused by name: attention_k_eq_v, num_kv_shared_layers,
use_double_wide_mlp, enable_moe_block, use_bidirectional_attention, per-layer K/V head counts, rotary types other
than proportional and default on the full layers.
"""

from __future__ import annotations

import dataclasses

from ..config import ConfigError, ModelConfig
from .family import integer
from .gemma import read_gemma_config
from .gemma3 import FAMILY as GEMMA3
from .gemma3 import layer_rope, pattern

_FULL = "full_attention"
_LAYER = r"layers\.(\d+)\."
_OFF = (  # options that change the model, each refused where a config turns it on
    ("attention_k_eq_v", "keys reused as values on the full layers"),
    ("num_kv_shared_layers", "layers reusing earlier layers' keys and values"),
    ("use_double_wide_mlp", "double-width feed-forward blocks"),
    ("enable_moe_block", "a mixture-of-experts block beside the feed-forward one"),
    ("use_bidirectional_attention", "bidirectional attention"),
)


# transformers' Gemma4TextConfig defaults, for keys a config.json leaves out
_DEFAULTS = dict(
    vocab_size=262_144, hidden_size=2304, intermediate_size=9216, num_hidden_layers=30, num_attention_heads=8,
    num_key_value_heads=4, head_dim=256, max_position_embeddings=131_072, rms_norm_eps=1e-6, sliding_window=512,
    vocab_size_per_layer_input=262_144, hidden_size_per_layer_input=256, hidden_activation="gelu_pytorch_tanh",
)  # fmt: skip


_MOST_LAYERS = 1024  # no list of kinds is made for more: the loader refuses such a config (load/loading.LIMITS)


def with_defaults(values: dict) -> dict:
    """config.json's values with transformers' defaults where it has none, and its layer_types as transformers reads
    them: by default each sixth layer full, and the last layer full whatever the list says (transformers forces it)."""
    values = {**_DEFAULTS, **values}
    kinds, n = values.get("layer_types"), values["num_hidden_layers"]
    if kinds is None and isinstance(n, int) and not isinstance(n, bool) and 0 < n <= _MOST_LAYERS:
        kinds = ["sliding_attention" if (i + 1) % 6 else _FULL for i in range(n)]
    if isinstance(kinds, list) and kinds:
        kinds = [*kinds[:-1], _FULL]
    return dict(values, layer_types=kinds)


def refuse_options(values: dict) -> None:
    """ConfigError naming the first option this package does not follow that `values` turns on."""
    for name, what in _OFF:
        if values.get(name):
            raise ConfigError(f"{name} ({what}) is not supported for Gemma 4: only its default, off")


def full_head_dim(values: dict) -> int:
    """The full layers' head width: per_layer_config's head_dim, one for every full layer and nothing else
    overridden (else refused by name), or global_head_dim (512 by default) where the config has no such table."""
    table = values.get("per_layer_config")
    if table is None:
        return integer({"global_head_dim": values.get("global_head_dim", 512)}, "global_head_dim")
    kinds = values.get("layer_types") or []
    if not isinstance(table, dict) or any(not isinstance(v, dict) for v in table.values()):
        raise ConfigError(f"per_layer_config should map layers to settings, not {table!r}")
    full = {str(i) for i, kind in enumerate(kinds) if kind == _FULL}
    widths = {v.get("head_dim") for v in table.values()}
    if {str(i) for i in table} != full or len(widths) != 1 or any(set(v) != {"head_dim"} for v in table.values()):
        raise ConfigError(
            f"per_layer_config {table!r} is not supported: "
            "only one head_dim for every full layer (no per-layer K/V heads)"
        )
    return integer({"head_dim": widths.pop()}, "head_dim")


def full_rope(values: dict) -> tuple[dict, float]:
    """(the rope_parameters with the full layers' partial_rotary_factor taken out, that share): proportional
    rotary turns that share of the pairs; the default turns every pair; other types are refused by name."""
    params = values.get("rope_parameters") or {}
    full = dict(params.get(_FULL) or {}) if isinstance(params, dict) else {}
    kind = full.get("rope_type", "default")
    share = full.pop("partial_rotary_factor", 1.0)
    if kind not in ("proportional", "default") or (kind == "default" and share != 1.0):
        raise ConfigError(
            f"rope_type '{kind}' of the full layers is not supported for Gemma 4: proportional or default"
        )
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise ConfigError(f"partial_rotary_factor should be a number, not {share!r}")
    return (dict(params, **{_FULL: full}) if full else params), float(share)


def read_config(values: dict) -> ModelConfig:
    refuse_options(values)
    values = with_defaults(values)
    window = values["sliding_window"]
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"sliding_window should be a positive int, not {window!r}")
    every, first = pattern(values, 6)
    params, share = full_rope(values)
    rope = layer_rope(dict(values, rope_parameters=params), "rope_theta", 1_000_000.0, "rope_local_base_freq", 10_000.0)
    vocab, per_layer_vocab = values["vocab_size"], values["vocab_size_per_layer_input"]
    if isinstance(per_layer_vocab, int) and isinstance(vocab, int) and per_layer_vocab < vocab:
        raise ConfigError(
            f"vocab_size_per_layer_input {per_layer_vocab} is smaller than vocab_size {vocab}: "
            "the tokens past it would have no per-layer embedding"
        )
    plain = {k: v for k, v in values.items() if k not in ("rope_parameters", "rope_scaling", "per_layer_config")}
    config = read_gemma_config(
        dict(plain, hidden_act=values["hidden_activation"]),
        "gemma4_text",
        **rope,
        rope_proportion=share,
        scale_scores=False,
        sliding_window=window,
        sliding_window_pattern=every,
        first_full_layer=first,
        qk_norm="head",
        value_norm=True,
        full_head_dim=full_head_dim(values),
        per_layer_input_size=values["hidden_size_per_layer_input"] or 0,
        per_layer_vocab_size=per_layer_vocab,
        layer_scalar=True,
    )
    return config.replace(norm_after_sublayer=True, norm="rms_norm_float")


FAMILY = dataclasses.replace(
    GEMMA3,
    model_type="gemma4_text",
    title="Gemma 4",
    read_config=read_config,
    rules=GEMMA3.rules
    + (
        (r"(embed_tokens_per_layer|per_layer_model_projection|per_layer_projection_norm)\.weight", r"\1.weight"),
        (
            _LAYER + r"(per_layer_input_gate|per_layer_projection|post_per_layer_input_norm)\.weight",
            r"layers.\1.\2.weight",
        ),
        (_LAYER + r"layer_scalar", r"layers.\1.layer_scalar"),
    ),
)
