"""mBART: BART's model and tensor names with pre-norm blocks and a norm after each stack
(encoder.layer_norm, decoder.layer_norm), as transformers' MBartModel; positions offset by 2 as BART's."""

from __future__ import annotations

from .bart import DEFAULTS, family, read_config

_DEFAULTS = dict(DEFAULTS, decoder_start_token_id=None)

FAMILY = family(
    "mbart",
    "mBART",
    lambda values: read_config(values, "mbart", _DEFAULTS, position_offset=2, pre_norm=True, final_norm=True),
)
