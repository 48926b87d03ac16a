"""DistilBERT: BERT's post-norm blocks under its own tensor and config names; no token types.

Tensors: q_lin, k_lin, v_lin, out_lin, sa_layer_norm, ffn.lin1, ffn.lin2, output_layer_norm.
Config: dim, n_layers, n_heads, hidden_dim, activation, dropout, attention_dropout; its
LayerNorms always use eps 1e-12.
"""

from __future__ import annotations

from ..config import ModelConfig
from .bert import BUFFERS
from .family import Family, MaskedLMNames, config_values

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="dim",
    num_hidden_layers="n_layers",
    num_attention_heads="n_heads",
    intermediate_size="hidden_dim",
    hidden_act="activation",
    hidden_dropout_prob="dropout",
    attention_probs_dropout_prob="attention_dropout",
    max_position_embeddings="max_position_embeddings",
    pad_token_id="pad_token_id",
)
_DEFAULTS = dict(
    vocab_size=30522,
    hidden_size=768,
    num_hidden_layers=6,
    num_attention_heads=12,
    intermediate_size=3072,
    hidden_act="gelu",
    max_position_embeddings=512,
    pad_token_id=0,
)


def read_config(values: dict) -> ModelConfig:
    return ModelConfig(
        **config_values(values, _NAMES, _DEFAULTS), model_type="distilbert", type_vocab_size=0, layer_norm_eps=1e-12
    )


_LAYER = r"transformer\.layer\.(\d+)\."
RULES = (
    (r"embeddings\.(word_embeddings|position_embeddings)\.weight", r"embeddings.\1.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
    (_LAYER + r"attention\.q_lin\.(weight|bias)", r"layers.\1.attention.q_proj.\2"),
    (_LAYER + r"attention\.k_lin\.(weight|bias)", r"layers.\1.attention.k_proj.\2"),
    (_LAYER + r"attention\.v_lin\.(weight|bias)", r"layers.\1.attention.v_proj.\2"),
    (_LAYER + r"attention\.out_lin\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (_LAYER + r"sa_layer_norm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (_LAYER + r"ffn\.lin1\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (_LAYER + r"ffn\.lin2\.(weight|bias)", r"layers.\1.output.\2"),
    (_LAYER + r"output_layer_norm\.(weight|bias)", r"layers.\1.output_norm.\2"),
)

FAMILY = Family(
    model_type="distilbert",
    title="DistilBERT",
    read_config=read_config,
    prefix="distilbert.",
    rules=RULES,
    heads=(
        "vocab_transform.",
        "vocab_layer_norm.",
        "vocab_projector.",
        "pre_classifier.",
        "classifier.",
        "qa_outputs.",
    ),
    skipped=BUFFERS,
    masked_lm=MaskedLMNames(
        root="vocab_", dense="transform", norm="layer_norm", decoder="projector", bias="projector.bias"
    ),
)
