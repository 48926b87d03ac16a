"""OPT: a causal decoder with a learned table of positions, LayerNorms before (or, with
do_layer_norm_before false, after) each sub-block, and a ReLU feed-forward block (fc1, fc2).

Positions count the attention mask's real tokens from row 2 of the table (its first two rows are
never a real position: position_offset 2); padding reads row 1, so a left-padded sentence keeps its
positions, as transformers computes them. When word_embed_proj_dim differs from hidden_size (OPT-350m)
the word embeddings are that wide: project_in takes them up to hidden_size before the positions are
added, and project_out takes the last hidden states back down (no biases). A final norm only with
norms before the sub-blocks. q is scaled before Q·Kᵀ there, after it here: the same scores up to rounding.
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig
from .family import Family, config_values, integer

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="hidden_size",
    num_hidden_layers="num_hidden_layers",
    num_attention_heads="num_attention_heads",
    intermediate_size="ffn_dim",
    hidden_act="activation_function",
    hidden_dropout_prob="dropout",
    attention_probs_dropout_prob="attention_dropout",
    max_position_embeddings="max_position_embeddings",
    pad_token_id="pad_token_id",
)
# transformers' OPTConfig defaults, for keys config.json leaves out
_DEFAULTS = dict(
    vocab_size=50272,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    hidden_act="relu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.0,
    max_position_embeddings=2048,
    pad_token_id=1,
)
# settings that change the computation in ways this model does not follow, with the value it needs
_REQUIRED = dict(layer_norm_elementwise_affine=True)


def read_config(values: dict) -> ModelConfig:
    for key, needed in _REQUIRED.items():
        if values.get(key, needed) != needed:
            raise ConfigError(f"OPT with {key}={values[key]!r} is not supported (only {needed})")
    fields = config_values(values, _NAMES, _DEFAULTS)
    pre_norm, bias = values.get("do_layer_norm_before", True), values.get("enable_bias", True)
    width = values.get("word_embed_proj_dim") or integer(fields, "hidden_size")
    projected = width != fields["hidden_size"]
    return ModelConfig(
        **fields,
        model_type="opt",
        type_vocab_size=0,
        layer_norm_eps=1e-5,
        embedding_norm=False,
        position_offset=2,
        positions_from_mask=True,
        pre_norm=pre_norm,
        causal=True,
        final_norm=pre_norm is True and not values.get("_remove_final_layer_norm", False),
        attention_bias=bias,
        mlp_bias=bias,
        embedding_size=width if projected else None,
        positions_after_projection=projected,
        embedding_projection_bias=False,
        final_projection=projected,
    )


_LAYER = r"decoder\.layers\.(\d+)\."
RULES = (
    (r"decoder\.embed_tokens\.weight", "embeddings.word_embeddings.weight"),
    (r"decoder\.embed_positions\.weight", "embeddings.position_embeddings.weight"),
    (r"decoder\.project_in\.weight", "embeddings.project.weight"),
    (_LAYER + r"self_attn\.(q_proj|k_proj|v_proj)\.(weight|bias)", r"layers.\1.attention.\2.\3"),
    (_LAYER + r"self_attn\.out_proj\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (_LAYER + r"self_attn_layer_norm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (_LAYER + r"fc1\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (_LAYER + r"fc2\.(weight|bias)", r"layers.\1.output.\2"),
    (_LAYER + r"final_layer_norm\.(weight|bias)", r"layers.\1.output_norm.\2"),
    (r"decoder\.final_layer_norm\.(weight|bias)", r"final_norm.\1"),
    (r"decoder\.project_out\.weight", "project_out.weight"),
)

FAMILY = Family(
    model_type="opt",
    title="OPT",
    read_config=read_config,
    prefix="model.",
    rules=RULES,
    heads=("lm_head.", "score.", "qa_outputs."),
    tied=(("embeddings.word_embeddings.weight", "lm_head.weight"),),
)
