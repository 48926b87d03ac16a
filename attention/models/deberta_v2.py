"""DeBERTa-v2 and -v3: BERT's post-norm encoder with disentangled attention (models/disentangled.py): each score adds to
content-to-content the content-to-position and position-to-content terms pos_att_type names ("c2p", "p2c"), read from
one table of relative positions shared by every layer (encoder.rel_embeddings, normed when norm_rel_ebd says
layer_norm) through each layer's own query and key projections (share_att_key), over relative distances in
position_buckets buckets (exact up to half of them, then log-spaced up to max_relative_positions); all scaled by 1 /
√(d · (1 + the number of position terms)), as query_pre_attn_scalar declares (the factor counts pos_att_type's terms
even without relative attention, as transformers does). A position table is added to the embeddings only without
relative attention (position_biased_input). What this code does not follow is refused by name: separate position
projections (share_att_key false), both a position table and relative attention, the convolution beside the first
layer (conv_kernel_size), an embedding projection (embedding_size ≠ hidden_size).
"""

from __future__ import annotations

from ..config import BERT_NAMES, ConfigError, ModelConfig
from .bert import BUFFERS
from .family import Family, config_values

_DEFAULTS = dict(
    vocab_size=128100,
    hidden_size=1536,
    num_hidden_layers=24,
    num_attention_heads=24,
    intermediate_size=6144,
    max_position_embeddings=512,
    type_vocab_size=0,
    layer_norm_eps=1e-7,
    pad_token_id=0,
)


def _refuse(values: dict, relative: bool) -> None:
    """ConfigError naming the first value this code does not follow."""
    if values.get("conv_kernel_size", 0):
        raise ConfigError("conv_kernel_size is not supported: no convolution beside the first layer")
    if values.get("embedding_size", values.get("hidden_size")) != values.get("hidden_size"):
        raise ConfigError("an embedding_size other than hidden_size is not supported (no embedding projection)")
    if relative and not values.get("share_att_key", False):  # transformers: False when left out
        raise ConfigError("share_att_key false is not supported: positions go through the layers' q and k")
    if relative and values.get("position_biased_input", True):
        raise ConfigError("position_biased_input with relative_attention is not supported: one or the other")


def read_config(values: dict) -> ModelConfig:
    relative = bool(values.get("relative_attention", False))
    _refuse(values, relative)
    kinds = values.get("pos_att_type") or []
    kinds = kinds.lower().split("|") if isinstance(kinds, str) else kinds
    if not isinstance(kinds, list) or not all(isinstance(kind, str) for kind in kinds):
        raise ConfigError(f"pos_att_type should name c2p and p2c, not {kinds!r}")
    norms = [part.strip() for part in str(values.get("norm_rel_ebd", "none")).lower().split("|")]
    if set(norms) - {"none", "layer_norm"}:
        raise ConfigError(f"norm_rel_ebd '{values.get('norm_rel_ebd')}' is not supported: layer_norm or none")
    longest = values.get("max_relative_positions", -1)
    longest = values.get("max_position_embeddings", 512) if not isinstance(longest, int) or longest < 1 else longest
    buckets = values.get("position_buckets", -1)
    heads = values.get("num_attention_heads", _DEFAULTS["num_attention_heads"])
    width = values.get("hidden_size", _DEFAULTS["hidden_size"]) // heads if isinstance(heads, int) and heads else 1
    kinds = [kind.strip() for kind in kinds]
    return ModelConfig(
        **config_values(values, {n: n for n in BERT_NAMES if n != "position_embedding_type"}, _DEFAULTS),
        model_type="deberta-v2",
        position_embedding_type="disentangled" if relative else "absolute",
        position_buckets=max(buckets, 0) if isinstance(buckets, int) else buckets,
        max_relative_positions=longest,
        pos_att_type="|".join(kinds),
        query_pre_attn_scalar=width * (1 + len({"c2p", "p2c"} & set(kinds))),  # with relative attention or not
        relative_norm="layer_norm" in norms,
    )


_LAYER = r"encoder\.layer\.(\d+)\."
RULES = (
    (r"embeddings\.(word_embeddings|position_embeddings|token_type_embeddings)\.weight", r"embeddings.\1.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
    (_LAYER + r"attention\.self\.query_proj\.(weight|bias)", r"layers.\1.attention.q_proj.\2"),
    (_LAYER + r"attention\.self\.key_proj\.(weight|bias)", r"layers.\1.attention.k_proj.\2"),
    (_LAYER + r"attention\.self\.value_proj\.(weight|bias)", r"layers.\1.attention.v_proj.\2"),
    (_LAYER + r"attention\.output\.dense\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (_LAYER + r"attention\.output\.LayerNorm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (_LAYER + r"intermediate\.dense\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (_LAYER + r"output\.dense\.(weight|bias)", r"layers.\1.output.\2"),
    (_LAYER + r"output\.LayerNorm\.(weight|bias)", r"layers.\1.output_norm.\2"),
    (r"encoder\.rel_embeddings\.weight", "rel_embeddings.weight"),
    (r"encoder\.LayerNorm\.(weight|bias)", r"rel_norm.\1"),
)

FAMILY = Family(
    model_type="deberta-v2",
    title="DeBERTa-v2",
    read_config=read_config,
    prefix="deberta.",
    rules=RULES,
    heads=("lm_predictions.", "cls.", "pooler.", "classifier.", "qa_outputs.", "mask_predictions."),
    skipped=BUFFERS,
)
