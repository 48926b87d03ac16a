"""Gemma: Llama's model and tensor names with a GeGLU feed-forward block (gelu_pytorch_tanh on the gate by
default), word embeddings scaled by sqrt(hidden_size) rounded to their dtype, RMSNorms that multiply by
(1 + weight) in float32, its own head_dim (256 by default, so H·d need not be hidden_size), and the LM head tied
to the embeddings. The activation is config.json's hidden_act, as transformers 5 reads it ("gelu", which the
released checkpoints say, meaning the tanh approximation). Gemma2 (gemma2.py) reads its config with
`read_gemma_config` from here.
"""

from __future__ import annotations

from ..config import ConfigError, ModelConfig
from .llama import DEFAULTS, decoder_family, read_decoder_config

DEFAULTS = dict(
    DEFAULTS,
    vocab_size=256000,
    hidden_size=3072,
    intermediate_size=24576,
    num_hidden_layers=28,
    num_attention_heads=16,
    head_dim=256,
    hidden_act="gelu_pytorch_tanh",
    max_position_embeddings=8192,
)


def read_gemma_config(values: dict, model_type: str, **declared) -> ModelConfig:
    """A Gemma-style config.json: Llama's reading with Gemma's norms, scaled embeddings and no MLP bias."""
    if values.get("use_bidirectional_attention"):
        raise ConfigError("use_bidirectional_attention is not supported: every layer is causal")
    config = read_decoder_config(
        values, model_type, DEFAULTS, mlp_bias=False, scale_embedding=True, scale_embedding_in_dtype=True, **declared
    )
    return config.replace(norm="rms_norm_offset")


def read_config(values: dict) -> ModelConfig:
    # the released checkpoints say hidden_act "gelu" and mean the tanh approximation: transformers runs
    # gelu_pytorch_tanh for it (and reads no hidden_activation), and so do we
    if values.get("hidden_act") == "gelu":
        values = dict(values, hidden_act="gelu_pytorch_tanh")
    return read_gemma_config(values, "gemma")


FAMILY = decoder_family("gemma", "Gemma", read_config)
