"""ModernBERT: an encoder of pre-norm blocks with rotary positions, LayerNorms without bias (norm_bias), no
biases in the attention or feed-forward block (attention_bias, mlp_bias), one fused Q·K·V projection ([Q K V],
Wqkv), a GeGLU feed-forward block with one fused projection (Wi: the activated half first, then the gate), a norm
on the word embeddings and a final norm; layer 0's attention reads its input unnormed. Every
global_attn_every_n_layers-th layer, from layer 0, sees every key (or as layer_types says); the others see the keys
at most local_attention / 2 positions away either side, with rotary on their own base (local_rope_theta; the full
layers' is global_rope_theta). No position table and no token types.
"""

from __future__ import annotations

from ..config import ModelConfig
from .family import Family, config_values, integer
from .gemma3 import layer_rope, pattern

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="hidden_size",
    num_hidden_layers="num_hidden_layers",
    num_attention_heads="num_attention_heads",
    intermediate_size="intermediate_size",
    hidden_act="hidden_activation",
    attention_probs_dropout_prob="attention_dropout",
    hidden_dropout_prob="mlp_dropout",
    max_position_embeddings="max_position_embeddings",
    layer_norm_eps="norm_eps",
    pad_token_id="pad_token_id",
    attention_bias="attention_bias",
    mlp_bias="mlp_bias",
    norm_bias="norm_bias",
)
# transformers' ModernBertConfig defaults, for keys config.json leaves out
_DEFAULTS = dict(
    vocab_size=50368,
    hidden_size=768,
    num_hidden_layers=22,
    num_attention_heads=12,
    intermediate_size=1152,
    hidden_act="gelu",
    attention_probs_dropout_prob=0.0,
    hidden_dropout_prob=0.0,
    max_position_embeddings=8192,
    layer_norm_eps=1e-5,
    pad_token_id=50283,
    attention_bias=False,
    mlp_bias=False,
    norm_bias=False,
)


def read_config(values: dict) -> ModelConfig:
    every, first = pattern(values, values.get("global_attn_every_n_layers", 3), first_full=0)
    local = values.get("local_attention", 128)
    fields = config_values(values, _NAMES, _DEFAULTS)
    return ModelConfig(
        **fields,
        **layer_rope(values, "global_rope_theta", 160_000.0, "local_rope_theta", 10_000.0),
        model_type="modernbert",
        type_vocab_size=0,
        position_embedding_type="rotary",
        pre_norm=True,
        final_norm=True,
        fused_qkv=True,
        gated_mlp=True,
        fused_gate_up=True,
        output_bias=fields.get("attention_bias", False),
        sliding_window=integer(dict(local=local), "local") // 2 + 1,  # keys fewer than this many away
        sliding_window_pattern=every,
        first_full_layer=first,
        first_attention_norm=False,
    )


_LAYER = r"layers\.(\d+)\."
RULES = (
    (r"embeddings\.tok_embeddings\.weight", "embeddings.word_embeddings.weight"),
    (r"embeddings\.norm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
    (_LAYER + r"attn_norm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (_LAYER + r"attn\.Wqkv\.(weight|bias)", r"layers.\1.attention.qkv_proj.\2"),
    (_LAYER + r"attn\.Wo\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (_LAYER + r"mlp_norm\.(weight|bias)", r"layers.\1.output_norm.\2"),
    (_LAYER + r"mlp\.Wi\.(weight|bias)", r"layers.\1.gate_up.\2"),
    (_LAYER + r"mlp\.Wo\.(weight|bias)", r"layers.\1.output.\2"),
    (r"final_norm\.(weight|bias)", r"final_norm.\1"),
)

FAMILY = Family(
    model_type="modernbert",
    title="ModernBERT",
    read_config=read_config,
    prefix="model.",
    rules=RULES,
    heads=("head.", "decoder.", "classifier.", "drop."),
)
