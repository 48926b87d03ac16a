"""XLM-RoBERTa: RoBERTa's model, config names and tensor names (a larger, multilingual vocabulary),
under its own model_type; task checkpoints keep the base model under "roberta." as RoBERTa's do."""

from __future__ import annotations

import dataclasses

from . import roberta

FAMILY = dataclasses.replace(
    roberta.FAMILY,
    model_type="xlm-roberta",
    title="XLM-RoBERTa",
    read_config=lambda values: roberta.read_config(values, "xlm-roberta"),
)
