"""ELECTRA: BERT's encoder and names; the embeddings are narrower and projected up.

Its embeddings (and their LayerNorm) are `embedding_size` wide; `embeddings_project`, a linear
layer, takes them to hidden_size before the first layer. The generator's masked-LM head maps back
down to embedding_size before the tied decoder.
"""

from __future__ import annotations

from ..config import BERT_NAMES, ModelConfig
from .bert import BUFFERS, ENCODER_RULES, TASK_HEADS
from .family import Family, MaskedLMNames, config_values

_DEFAULTS = dict(max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0)


def read_config(values: dict) -> ModelConfig:
    names = {n: n for n in BERT_NAMES + ("embedding_size",)}
    fields = config_values(values, names, _DEFAULTS)
    return ModelConfig(**fields, model_type="electra")


FAMILY = Family(
    model_type="electra",
    title="ELECTRA",
    read_config=read_config,
    prefix="electra.",
    rules=ENCODER_RULES + ((r"embeddings_project\.(weight|bias)", r"embeddings.project.\1"),),
    heads=TASK_HEADS + ("discriminator_predictions.", "generator_predictions.", "generator_lm_head."),
    skipped=BUFFERS,
    masked_lm=MaskedLMNames(
        root="generator_",
        dense="predictions.dense",
        norm="predictions.LayerNorm",
        decoder="lm_head",
        bias="lm_head.bias",
        activation="gelu",
    ),
)
