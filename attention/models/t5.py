"""T5: an encoder-decoder (seq2seq.py) of pre-norm blocks with RMSNorm, no biases, unscaled scores and
relative positions.

No position table: the first layer of each stack holds a learned bias per head for each bucket of
relative distance (positions.relative_buckets: bidirectional in the encoder, causal in the decoder),
which every layer of that stack adds to its scores; here it sits on the stack, relative_attention_bias.
The scores are not scaled by d ** -0.5 (T5's initialisation folds that into q). Heads are d_kv wide,
so H·d may differ from d_model. The feed-forward block is ReLU (v1.0) or gated GELU (v1.1, Flan-T5),
from feed_forward_proj. A norm after each stack (final_layer_norm). Tensor names: block.N.layer.0
(SelfAttention q, k, v, o and its layer_norm), in the decoder block.N.layer.1 (EncDecAttention), then
the feed-forward layer (DenseReluDense wi or wi_0, wi_1, and wo). The decoder starts from the padding
token; the LM head (lm_head, tied to `shared` in v1.0) is a task-head tensor.
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig
from .family import Family, Rules, config_values

_NAMES = dict(
    vocab_size="vocab_size",
    hidden_size="d_model",
    num_hidden_layers="num_layers",
    num_attention_heads="num_heads",
    intermediate_size="d_ff",
    head_dim="d_kv",
    decoder_layers="num_decoder_layers",
    hidden_dropout_prob="dropout_rate",
    layer_norm_eps="layer_norm_epsilon",
    pad_token_id="pad_token_id",
    relative_attention_num_buckets="relative_attention_num_buckets",
    relative_attention_max_distance="relative_attention_max_distance",
    max_position_embeddings="n_positions",
)
# transformers' T5Config defaults (t5-small's sizes); n_positions: the inputs T5 was trained on
_DEFAULTS = dict(
    vocab_size=32128,
    hidden_size=512,
    num_hidden_layers=6,
    num_attention_heads=8,
    intermediate_size=2048,
    head_dim=64,
    layer_norm_eps=1e-6,
    pad_token_id=0,
    relative_attention_num_buckets=32,
    relative_attention_max_distance=128,
    max_position_embeddings=512,
)


def feed_forward(values: dict) -> tuple[str, bool]:
    """(activation, gated) from feed_forward_proj: "relu", "gated-gelu" (GELU's tanh form, as transformers
    takes it there), "gated-silu" ..."""
    proj = values.get("feed_forward_proj", "relu")
    if not isinstance(proj, str) or len(proj.split("-")) > 2 or proj.startswith("-"):
        raise ConfigError(f"feed_forward_proj should be 'relu', 'gated-gelu' or the like, not {proj!r}")
    gated, act = proj.startswith("gated-"), proj.split("-")[-1]
    return ("gelu_new" if gated and act == "gelu" else act), gated


def read_config(values: dict) -> ModelConfig:
    act, gated = feed_forward(values)
    fields = config_values(values, _NAMES, _DEFAULTS)
    start = values.get("decoder_start_token_id", fields.get("pad_token_id"))
    return ModelConfig(
        **fields,
        hidden_act=act,
        gated_mlp=gated,
        model_type="t5",
        is_encoder_decoder=True,
        decoder_start_token_id=start,
        type_vocab_size=0,
        position_embedding_type="relative",
        embedding_norm=False,
        pre_norm=True,
        final_norm=True,
        norm="rms_norm",
        attention_bias=False,
        mlp_bias=False,
        scale_scores=False,
        attention_probs_dropout_prob=0.0,
    )


_STACK = r"(encoder|decoder)\."
_BLOCK = _STACK + r"block\.(\d+)\."


def feed_forward_rules(stack: str, index: int) -> Rules:
    """The feed-forward layer's names: block.N.layer.1 in the encoder, block.N.layer.2 in the decoder."""
    layer = rf"{stack}\.block\.(\d+)\.layer\.{index}\."
    return (
        (layer + r"DenseReluDense\.(wi|wi_1)\.weight", rf"{stack}.layers.\1.intermediate.weight"),
        (layer + r"DenseReluDense\.wi_0\.weight", rf"{stack}.layers.\1.gate.weight"),  # gated: act(wi_0) · wi_1
        (layer + r"DenseReluDense\.wo\.weight", rf"{stack}.layers.\1.output.weight"),
        (layer + r"layer_norm\.weight", rf"{stack}.layers.\1.output_norm.weight"),
    )


RULES = (
    (r"shared\.weight", "encoder.embeddings.word_embeddings.weight"),
    (
        _STACK + r"block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.weight",
        r"\1.relative_attention_bias.weight",
    ),
    (_BLOCK + r"layer\.0\.SelfAttention\.(q|k|v|o)\.weight", r"\1.layers.\2.attention.\3_proj.weight"),
    (_BLOCK + r"layer\.0\.layer_norm\.weight", r"\1.layers.\2.attention_norm.weight"),
    (
        r"decoder\.block\.(\d+)\.layer\.1\.EncDecAttention\.(q|k|v|o)\.weight",
        r"decoder.layers.\1.cross_attention.\2_proj.weight",
    ),
    (r"decoder\.block\.(\d+)\.layer\.1\.layer_norm\.weight", r"decoder.layers.\1.cross_attention_norm.weight"),
    *feed_forward_rules("encoder", 1),
    *feed_forward_rules("decoder", 2),
    (_STACK + r"final_layer_norm\.weight", r"\1.final_norm.weight"),
)

FAMILY = Family(
    model_type="t5",
    title="T5",
    read_config=read_config,
    prefix="",
    rules=RULES,
    heads=("lm_head.",),
    skipped=(_STACK + r"embed_tokens\.weight",),
    shared=(("encoder.embeddings.word_embeddings.weight", "decoder.embeddings.word_embeddings.weight"),),
)
