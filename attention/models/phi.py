"""Phi (Phi-1, Phi-1.5, Phi-2): a causal decoder whose attention and feed-forward blocks run side by side on one
shared norm, x + attention(norm(x)) + feed_forward(norm(x)) (input_layernorm, a LayerNorm), with rotary positions
on a share of each head's coordinates (partial_rotary_factor, 0.5 by default), biases everywhere, the attention's
output projection named `dense`, a plain feed-forward block (fc1, fc2; gelu_new) and a final LayerNorm
(final_layernorm). qk_layernorm adds a LayerNorm on each head's q and k over its d before rotary (q_layernorm,
k_layernorm). The LM head (with a bias) is not tied unless tie_word_embeddings says so.
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig
from .family import Family, config_values
from .gpt_neox import rotary_settings

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="hidden_size",
    num_hidden_layers="num_hidden_layers",
    num_attention_heads="num_attention_heads",
    num_key_value_heads="num_key_value_heads",
    intermediate_size="intermediate_size",
    hidden_act="hidden_act",
    hidden_dropout_prob="resid_pdrop",
    attention_probs_dropout_prob="attention_dropout",
    max_position_embeddings="max_position_embeddings",
    layer_norm_eps="layer_norm_eps",
)
# transformers' PhiConfig defaults, for keys config.json leaves out
_DEFAULTS = dict(
    vocab_size=51200,
    hidden_size=2048,
    num_hidden_layers=24,
    num_attention_heads=32,
    intermediate_size=8192,
    hidden_act="gelu_new",
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    max_position_embeddings=2048,
    layer_norm_eps=1e-5,
)


def read_config(values: dict) -> ModelConfig:
    share, rope = rotary_settings(values, "partial_rotary_factor", 0.5, "rope_theta")
    qk_layernorm = values.get("qk_layernorm", False)
    if not isinstance(qk_layernorm, bool):
        raise ConfigError(f"qk_layernorm should be a bool, not {qk_layernorm!r}")
    return ModelConfig(
        **config_values(values, _NAMES, _DEFAULTS),
        **rope,
        model_type="phi",
        type_vocab_size=0,
        pad_token_id=None,
        position_embedding_type="rotary",
        rotary_fraction=share,
        embedding_norm=False,
        pre_norm=True,
        final_norm=True,
        causal=True,
        qk_norm="head" if qk_layernorm else None,
        parallel_residual=True,
        one_block_norm=True,
    )


_LAYER = r"layers\.(\d+)\."
RULES = (
    (r"embed_tokens\.weight", "embeddings.word_embeddings.weight"),
    (_LAYER + r"self_attn\.(q_proj|k_proj|v_proj)\.(weight|bias)", r"layers.\1.attention.\2.\3"),
    (_LAYER + r"self_attn\.dense\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (_LAYER + r"self_attn\.(q|k)_layernorm\.(weight|bias)", r"layers.\1.attention.\2_norm.\3"),
    (_LAYER + r"mlp\.fc1\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (_LAYER + r"mlp\.fc2\.(weight|bias)", r"layers.\1.output.\2"),
    (_LAYER + r"input_layernorm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (r"final_layernorm\.(weight|bias)", r"final_norm.\1"),
)

FAMILY = Family(
    model_type="phi",
    title="Phi",
    read_config=read_config,
    prefix="model.",
    rules=RULES,
    heads=("lm_head.", "score.", "classifier."),
    skipped=(_LAYER + r"self_attn\.rotary_emb\.inv_freq",),
    tied=(("embeddings.word_embeddings.weight", "lm_head.weight"),),
)
