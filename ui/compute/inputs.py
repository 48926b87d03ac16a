"""One sentence's (or pair's) input as the runs read it, and the most tokens a text can make: what ui/compute/runs.py
and ui/compute/longruns.py both start from."""

from __future__ import annotations

from attention.runs.inputs import encode

from ..state.written import Text, Written
from .models import get_model


def token_bound(*texts: Text) -> int:
    """At most how many tokens `texts` make together: every token covers at least one byte of the
    UTF-8 text (a character for WordPiece, a byte for byte-level BPE), plus a few special tokens; a written
    text, its ids."""
    return sum(len(t.ids) if isinstance(t, Written) else len(t.encode()) for t in texts) + 4


def encoded_input(source: str, text: Text, text_b: str):
    """The model of `source` and one sentence's (or pair's) input to it: a written text's ids, else the
    tokenizer's reading of the text, within the model's positions."""
    model, tokenizer = get_model(source)
    if isinstance(text, Written):  # Continue writes after one sentence: there is no second
        return model, text.encoded
    return model, encode(tokenizer, text, text_b or None, max_length=model.config.max_position_embeddings)
