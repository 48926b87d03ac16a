"""GPT-NeoX (Pythia): a causal decoder of pre-norm blocks with LayerNorms, rotary positions on a share
of each head's coordinates, and one fused Q·K·V projection laid out per head.

rotary_pct (transformers 5: rope_parameters' partial_rotary_factor; 0.25 by default) is the share of
each head's d that rotary turns, the first coordinates; the rest pass unchanged. query_key_value's
output holds, for each head in turn, its q, k and v (d columns each), not GPT-2's [Q K V]; the
attention reads it as such a view (core/qkv.py's per_head projection), so the shape flow shows the real layout.
With use_parallel_residual (the default) attention and feed-forward both read the block's input:
x + attention(norm(x)) + feed_forward(norm'(x)). Biases everywhere unless attention_bias is false
(then none on query_key_value and dense).
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig
from .family import Family, config_values
from .llama import rope_fields

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="hidden_size",
    num_hidden_layers="num_hidden_layers",
    num_attention_heads="num_attention_heads",
    intermediate_size="intermediate_size",
    hidden_act="hidden_act",
    hidden_dropout_prob="hidden_dropout",
    attention_probs_dropout_prob="attention_dropout",
    max_position_embeddings="max_position_embeddings",
    layer_norm_eps="layer_norm_eps",
    attention_bias="attention_bias",
)
# transformers' GPTNeoXConfig defaults, for keys config.json leaves out
_DEFAULTS = dict(
    vocab_size=50432,
    hidden_size=6144,
    num_hidden_layers=44,
    num_attention_heads=64,
    intermediate_size=24576,
    hidden_act="gelu",
    max_position_embeddings=2048,
    layer_norm_eps=1e-5,
    attention_bias=True,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def rotary_settings(
    values: dict, share_key: str = "rotary_pct", share: float = 0.25, base_key: str = "rotary_emb_base"
) -> tuple[float, dict]:
    """(the rotated share of each head, rope_fields of the rest): rope_parameters' partial_rotary_factor
    and rope_theta, or the older top-level `share_key` and `base_key` (GPT-NeoX's rotary_pct and
    rotary_emb_base; Phi's partial_rotary_factor and rope_theta); `share` when none is given."""
    params = dict(values.get("rope_parameters") or values.get("rope_scaling") or {})
    if not isinstance(params, dict):
        raise ConfigError(f"rope_parameters should be a JSON object, not {params!r}")
    fraction = params.pop("partial_rotary_factor", values.get(share_key, share))
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise ConfigError(f"{share_key} should be a number, not {fraction!r}")
    params.setdefault("rope_theta", values.get(base_key, 10000.0))
    return float(fraction), rope_fields({"rope_parameters": params})


def read_config(values: dict) -> ModelConfig:
    share, rope = rotary_settings(values)
    parallel = values.get("use_parallel_residual", True)
    if not isinstance(parallel, bool):
        raise ConfigError(f"use_parallel_residual should be a bool, not {parallel!r}")
    return ModelConfig(
        **config_values(values, _NAMES, _DEFAULTS),
        **rope,
        model_type="gpt_neox",
        type_vocab_size=0,
        pad_token_id=None,
        position_embedding_type="rotary",
        rotary_fraction=share,
        embedding_norm=False,
        pre_norm=True,
        final_norm=True,
        causal=True,
        fused_qkv=True,
        qkv_per_head=True,
        parallel_residual=parallel,
    )


_LAYER = r"layers\.(\d+)\."
RULES = (
    (r"embed_in\.weight", "embeddings.word_embeddings.weight"),
    (_LAYER + r"input_layernorm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (_LAYER + r"attention\.query_key_value\.(weight|bias)", r"layers.\1.attention.qkv_proj.\2"),
    (_LAYER + r"attention\.dense\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (_LAYER + r"post_attention_layernorm\.(weight|bias)", r"layers.\1.output_norm.\2"),
    (_LAYER + r"mlp\.dense_h_to_4h\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (_LAYER + r"mlp\.dense_4h_to_h\.(weight|bias)", r"layers.\1.output.\2"),
    (r"final_layer_norm\.(weight|bias)", r"final_norm.\1"),
)

FAMILY = Family(
    model_type="gpt_neox",
    title="GPT-NeoX",
    read_config=read_config,
    prefix="gpt_neox.",
    rules=RULES,
    heads=("embed_out.", "score.", "classifier.", "qa_outputs."),
    skipped=(_LAYER + r"attention\.(bias|masked_bias|rotary_emb\.inv_freq)",),  # buffers older releases saved
    tied=(("embeddings.word_embeddings.weight", "embed_out.weight"),),
)
