"""One file per model family, each a tensor-name map and what the family declares differently;
all of them build the one model in blocks.py from the one attention in attention/core/mha.py (an
encoder-decoder, seq2seq.py, is two stacks of it)."""

from __future__ import annotations

from ..config import ModelConfig
from ..writing.processors import attach
from . import (
    bart,
    bert,
    deberta_v2,
    distilbert,
    electra,
    gemma,
    gemma2,
    gemma3,
    gemma4,
    gpt2,
    gpt_neox,
    gpt_oss,
    llama,
    marian,
    mbart,
    mistral,
    modernbert,
    olmo2,
    olmo3,
    opt,
    phi,
    phi3,
    qwen2,
    qwen3,
    roberta,
    smollm3,
    t5,
    xlm_roberta,
)
from .blocks import ModelOutput, Transformer
from .family import Family, MaskedLMNames
from .seq2seq import EncoderDecoder, Seq2SeqOutput

FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        bert.FAMILY,
        roberta.FAMILY,
        distilbert.FAMILY,
        electra.FAMILY,
        gpt2.FAMILY,
        llama.FAMILY,
        mistral.FAMILY,
        qwen2.FAMILY,
        xlm_roberta.FAMILY,
        qwen3.FAMILY,
        gpt_neox.FAMILY,
        opt.FAMILY,
        olmo2.FAMILY,
        olmo3.FAMILY,
        smollm3.FAMILY,
        gpt_oss.FAMILY,
        gemma.FAMILY,
        gemma2.FAMILY,
        phi.FAMILY,
        phi3.FAMILY,
        gemma3.FAMILY,
        gemma4.FAMILY,
        modernbert.FAMILY,
        deberta_v2.FAMILY,
        bart.FAMILY,
        mbart.FAMILY,
        marian.FAMILY,
        t5.FAMILY,
    )
}


def build_model(config: ModelConfig) -> Transformer | EncoderDecoder:
    """The model a config describes: an EncoderDecoder for encoder-decoders, else a Transformer; its generation
    settings (`model.generation`) are its config's until load_model reads the checkpoint's."""
    model = EncoderDecoder(config) if config.encoder_decoder.is_encoder_decoder else Transformer(config)
    attach(model)
    return model


__all__ = [
    "FAMILIES",
    "EncoderDecoder",
    "Family",
    "MaskedLMNames",
    "ModelOutput",
    "Seq2SeqOutput",
    "Transformer",
    "build_model",
]
