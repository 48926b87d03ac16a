"""Llama: a causal decoder of pre-norm blocks with rotary positions, RMSNorm and a gated SiLU MLP.

No position table and no token types: q and k are turned by their positions (attention/core/rotary.py).
Grouped-query attention with num_key_value_heads, no biases unless attention_bias / mlp_bias say
so, a final norm. Tensor names: embed_tokens, self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
input_layernorm, post_attention_layernorm, norm; a causal LM keeps them under "model.", with an
lm_head that may be tied to embed_tokens (tie_word_embeddings: then only one of them is saved).
Mistral and Qwen2 are this model with their own defaults and a declared difference or two, read
by `read_decoder_config`; their files import it and `RULES` from here.
"""

from __future__ import annotations

from typing import Any

from ..config import ConfigError, ModelConfig
from .family import Family, Rules, config_values

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="hidden_size",
    num_hidden_layers="num_hidden_layers",
    num_attention_heads="num_attention_heads",
    intermediate_size="intermediate_size",
    hidden_act="hidden_act",
    attention_probs_dropout_prob="attention_dropout",
    max_position_embeddings="max_position_embeddings",
    layer_norm_eps="rms_norm_eps",
    num_key_value_heads="num_key_value_heads",
    head_dim="head_dim",
    attention_bias="attention_bias",
    mlp_bias="mlp_bias",
)
# transformers' LlamaConfig defaults, for keys config.json leaves out
DEFAULTS = dict(
    vocab_size=32000,
    hidden_size=4096,
    num_hidden_layers=32,
    num_attention_heads=32,
    intermediate_size=11008,
    hidden_act="silu",
    max_position_embeddings=2048,
    layer_norm_eps=1e-6,
    attention_bias=False,
    mlp_bias=False,
)
_ROPE_FIELDS = dict(
    rope_factor="factor",
    rope_low_freq_factor="low_freq_factor",
    rope_high_freq_factor="high_freq_factor",
    rope_original_max_position_embeddings="original_max_position_embeddings",
    rope_beta_fast="beta_fast",
    rope_beta_slow="beta_slow",
    rope_truncate="truncate",
    rope_attention_factor="attention_factor",
    rope_mscale="mscale",
    rope_mscale_all_dim="mscale_all_dim",
)
_ROPE_NEEDS = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
}


def rope_fields(values: dict) -> dict:
    """ModelConfig's rope_* fields from config.json: transformers 5's `rope_parameters`, or the older
    `rope_theta` with a `rope_scaling` dict ("type" or "rope_type"). A type this package does not
    compute is refused by ModelConfig, naming it."""
    params: dict[str, Any] = values.get("rope_parameters") or values.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"rope_parameters should be a JSON object, not {params!r}")
    kind = params.get("rope_type", params.get("type", "default"))
    if not isinstance(kind, str):
        raise ConfigError(f"rope_type should be a str, not {kind!r}")
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        raise ConfigError("a partial_rotary_factor other than 1 is not supported: every coordinate is rotated")
    missing = [key for key in _ROPE_NEEDS.get(kind, ()) if params.get(key) is None]
    if missing:
        raise ConfigError(f"rope_scaling type '{kind}' needs {', '.join(missing)}")
    fields = {ours: params[theirs] for ours, theirs in _ROPE_FIELDS.items() if params.get(theirs) is not None}
    theta = params.get("rope_theta", values.get("rope_theta", 10000.0))
    return dict(fields, rope_type=kind, rope_theta=theta)


def read_decoder_config(values: dict, model_type: str, defaults: dict = DEFAULTS, **declared) -> ModelConfig:
    """A Llama-style config.json as a ModelConfig: the shared choices, `defaults` for missing keys,
    and what the family declares differently (`declared`, ModelConfig fields)."""
    fields = {**config_values(values, _NAMES, defaults), **rope_fields(values), **declared}
    if fields.get("head_dim") is not None and fields["head_dim"] % 2:
        raise ConfigError(f"head_dim {fields['head_dim']} is odd: rotary positions turn pairs of coordinates")
    return ModelConfig(
        **fields,
        model_type=model_type,
        type_vocab_size=0,
        pad_token_id=None,
        hidden_dropout_prob=0.0,
        position_embedding_type="rotary",
        embedding_norm=False,
        pre_norm=True,
        final_norm=True,
        causal=True,
        norm="rms_norm",
        gated_mlp=True,
    )


_LAYER = r"layers\.(\d+)\."
RULES = (
    (r"embed_tokens\.weight", "embeddings.word_embeddings.weight"),
    (_LAYER + r"self_attn\.(q_proj|k_proj|v_proj|o_proj)\.(weight|bias)", r"layers.\1.attention.\2.\3"),
    (_LAYER + r"mlp\.gate_proj\.(weight|bias)", r"layers.\1.gate.\2"),
    (_LAYER + r"mlp\.up_proj\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (_LAYER + r"mlp\.down_proj\.(weight|bias)", r"layers.\1.output.\2"),
    (_LAYER + r"input_layernorm\.weight", r"layers.\1.attention_norm.weight"),
    (_LAYER + r"post_attention_layernorm\.weight", r"layers.\1.output_norm.weight"),
    (r"norm\.weight", "final_norm.weight"),
)


def decoder_family(model_type: str, title: str, read_config, rules: Rules = RULES) -> Family:
    """A Llama-style family: Llama's tensor names (or `rules`), heads and tied embeddings, its own config reading."""
    return Family(
        model_type=model_type,
        title=title,
        read_config=read_config,
        prefix="model.",
        rules=rules,
        heads=("lm_head.", "score.", "qa_outputs."),
        skipped=(_LAYER + r"self_attn\.rotary_emb\.inv_freq",),  # a buffer older releases saved
        tied=(("embeddings.word_embeddings.weight", "lm_head.weight"),),
    )


FAMILY = decoder_family("llama", "Llama", lambda values: read_decoder_config(values, "llama"))
