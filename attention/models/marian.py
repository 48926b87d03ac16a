"""Marian (MarianMT): BART's model and tensor names with fixed sinusoidal positions and no norm over
the embeddings.

Positions are sines and cosines computed from the position (positions.sinusoids), not weights: older
saves that hold the table (embed_positions) have it skipped. The decoder starts from the padding
token. Only checkpoints whose encoder and decoder share one vocabulary are supported.
"""

from __future__ import annotations

from ..config import ConfigError
from .bart import DEFAULTS, family, read_config

_DEFAULTS = dict(DEFAULTS, vocab_size=58101, pad_token_id=58100, decoder_start_token_id=58100)


def read_marian_config(values: dict):
    if not values.get("share_encoder_decoder_embeddings", True):
        raise ConfigError("Marian with share_encoder_decoder_embeddings=false is not supported")
    if values.get("decoder_vocab_size", values.get("vocab_size")) != values.get("vocab_size"):
        raise ConfigError("Marian with a decoder_vocab_size other than vocab_size is not supported")
    return read_config(values, "marian", _DEFAULTS, position_embedding_type="sinusoidal", embedding_norm=False)


FAMILY = family("marian", "Marian", read_marian_config, learned_positions=False)
