"""RoBERTa: BERT's encoder and names; positions count only real tokens and start after padding.

RoBERTa's position of a token is its count among the non-padding tokens, plus pad_token_id, so
the first pad_token_id + 1 rows of the table are never a real position (config.json says 514
rows for 512 positions). Here that is declared as position_offset, and max_position_embeddings
is the number of positions a token can take. One token type.
"""

from __future__ import annotations

from ..config import BERT_NAMES, ModelConfig
from .bert import BUFFERS, ENCODER_RULES, TASK_HEADS
from .family import Family, MaskedLMNames, config_values, integer

_DEFAULTS = dict(max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=1)


def read_config(values: dict, model_type: str = "roberta") -> ModelConfig:
    fields = config_values(values, {n: n for n in BERT_NAMES}, _DEFAULTS)
    offset = integer(fields, "pad_token_id") + 1
    fields["max_position_embeddings"] = integer(fields, "max_position_embeddings") - offset  # the rest are positions
    return ModelConfig(**fields, model_type=model_type, position_offset=offset, positions_skip_padding=True)


FAMILY = Family(
    model_type="roberta",
    title="RoBERTa",
    read_config=read_config,
    prefix="roberta.",
    rules=ENCODER_RULES,
    heads=TASK_HEADS + ("lm_head.",),
    skipped=BUFFERS,
    masked_lm=MaskedLMNames(
        root="lm_head.", dense="dense", norm="layer_norm", decoder="decoder", bias="bias", activation="gelu"
    ),
)
