"""BART: an encoder-decoder (seq2seq.py) of post-norm blocks with learned positions and a norm over
the embeddings (layernorm_embedding).

Its position table has 2 rows before the first position (transformers' offset of 2), declared as
position_offset. Word embeddings may be scaled by sqrt(d_model) (scale_embedding). The word table is
saved once, as `shared`, and read by both stacks; older saves repeat it as each stack's embed_tokens,
skipped here. Tensor names: self_attn, encoder_attn (the decoder's cross-attention), each with its
*_layer_norm, fc1, fc2, final_layer_norm (the feed-forward block's norm). The LM head (lm_head, tied to
`shared`) and final_logits_bias are task-head tensors. mBART and Marian import `RULES` and `family`.
"""

from __future__ import annotations

from ..config import ModelConfig
from .family import Family, config_values

NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="d_model",
    num_hidden_layers="encoder_layers",
    num_attention_heads="encoder_attention_heads",
    intermediate_size="encoder_ffn_dim",
    decoder_layers="decoder_layers",
    decoder_attention_heads="decoder_attention_heads",
    decoder_ffn_dim="decoder_ffn_dim",
    hidden_act="activation_function",
    hidden_dropout_prob="dropout",
    attention_probs_dropout_prob="attention_dropout",
    max_position_embeddings="max_position_embeddings",
    pad_token_id="pad_token_id",
    decoder_start_token_id="decoder_start_token_id",
    scale_embedding="scale_embedding",
)
# transformers' BartConfig defaults, for keys config.json leaves out
DEFAULTS = dict(
    vocab_size=50265,
    hidden_size=1024,
    num_hidden_layers=12,
    num_attention_heads=16,
    intermediate_size=4096,
    decoder_layers=12,
    decoder_attention_heads=16,
    decoder_ffn_dim=4096,
    hidden_act="gelu",
    max_position_embeddings=1024,
    pad_token_id=1,
    decoder_start_token_id=2,
    scale_embedding=False,
)
# what BART-style encoder-decoders share: no token types, LayerNorm with torch's default eps
SEQ2SEQ = dict(is_encoder_decoder=True, type_vocab_size=0, layer_norm_eps=1e-5)


def read_config(values: dict, model_type: str = "bart", defaults: dict = DEFAULTS, **declared) -> ModelConfig:
    """A BART-style config.json as a ModelConfig, with what the family declares differently (`declared`)."""
    fields = {**config_values(values, NAMES, defaults), **SEQ2SEQ, **declared}
    return ModelConfig(**fields, model_type=model_type)


_STACK = r"(encoder|decoder)\."
_LAYER = _STACK + r"layers\.(\d+)\."
POSITION_RULE = (_STACK + r"embed_positions\.weight", r"\1.embeddings.position_embeddings.weight")
RULES = (
    (r"shared\.weight", "encoder.embeddings.word_embeddings.weight"),
    (_STACK + r"layernorm_embedding\.(weight|bias)", r"\1.embeddings.LayerNorm.\2"),
    (_LAYER + r"self_attn\.(q_proj|k_proj|v_proj)\.(weight|bias)", r"\1.layers.\2.attention.\3.\4"),
    (_LAYER + r"self_attn\.out_proj\.(weight|bias)", r"\1.layers.\2.attention.o_proj.\3"),
    (_LAYER + r"self_attn_layer_norm\.(weight|bias)", r"\1.layers.\2.attention_norm.\3"),
    (_LAYER + r"encoder_attn\.(q_proj|k_proj|v_proj)\.(weight|bias)", r"\1.layers.\2.cross_attention.\3.\4"),
    (_LAYER + r"encoder_attn\.out_proj\.(weight|bias)", r"\1.layers.\2.cross_attention.o_proj.\3"),
    (_LAYER + r"encoder_attn_layer_norm\.(weight|bias)", r"\1.layers.\2.cross_attention_norm.\3"),
    (_LAYER + r"fc1\.(weight|bias)", r"\1.layers.\2.intermediate.\3"),
    (_LAYER + r"fc2\.(weight|bias)", r"\1.layers.\2.output.\3"),
    (_LAYER + r"final_layer_norm\.(weight|bias)", r"\1.layers.\2.output_norm.\3"),
    (_STACK + r"layer_norm\.(weight|bias)", r"\1.final_norm.\2"),  # mBART's norm after each stack
)
SHARED_WORDS = (("encoder.embeddings.word_embeddings.weight", "decoder.embeddings.word_embeddings.weight"),)
EMBED_TOKENS = _STACK + r"embed_tokens\.weight"  # the shared table again, in older saves


def family(model_type: str, title: str, read, learned_positions: bool = True) -> Family:
    """A BART-style family: BART's tensor names and task heads, its own config reading. Without
    `learned_positions` a saved table of positions (embed_positions) is skipped: they are computed."""
    rules, skipped = ((POSITION_RULE, *RULES), ()) if learned_positions else (RULES, (POSITION_RULE[0],))
    return Family(
        model_type=model_type,
        title=title,
        read_config=read,
        prefix="model.",
        rules=rules,
        heads=("lm_head.", "final_logits_bias", "classification_head.", "qa_outputs."),
        skipped=(EMBED_TOKENS, *skipped),
        shared=SHARED_WORDS,
    )


FAMILY = family("bart", "BART", lambda values: read_config(values, position_offset=2))
