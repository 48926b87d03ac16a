"""Text to model inputs, with the tokens, words and offsets the views need."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TypeVar

import torch

MaybeTensor = TypeVar("MaybeTensor", torch.Tensor, torch.Tensor | None)  # tensors in, tensors out; None stays None


def on_model_device(model, *tensors: MaybeTensor) -> tuple[MaybeTensor, ...]:
    """The tensors moved to where the model's weights are (None stays None): a model's inputs."""
    device = next(model.parameters()).device
    return tuple(None if t is None else t.to(device) for t in tensors)


@dataclass(frozen=True)
class Encoded:
    input_ids: torch.Tensor  # (1, L)
    attention_mask: torch.Tensor  # (1, L), all ones for one sentence
    token_type_ids: torch.Tensor  # (1, L), 0 for segment A, 1 for segment B; zeros if the tokenizer has none
    tokens: list[str]  # the tokenizer's pieces, its special tokens ([CLS], [SEP], <s> ...) included
    word_ids: list[int | None]  # word index of each piece; None for special tokens
    sequence_ids: list[int | None]  # 0 or 1 for the segment of each piece; None for special tokens
    offsets: list[tuple[int, int]]  # character span of each piece in its own text
    total_tokens: int  # length before truncation
    notice: str | None  # set when the input was truncated
    special_tokens_mask: tuple[bool, ...] | None = None  # the tokenizer's: True for the tokens it added
    byte_level: bool = False  # byte-level BPE's pieces (``byte_level``): half a character is shown as its bytes

    @property
    def truncated(self) -> bool:
        return self.total_tokens > len(self.tokens)

    @property
    def special(self) -> list[bool]:
        """True for special tokens: marked by the tokenizer, or part of no word ([CLS], [SEP], <s> ...).
        GPT-2's tokenizer adds none."""
        marked = self.special_tokens_mask or (False,) * len(self.word_ids)
        return [bool(m) or w is None for m, w in zip(marked, self.word_ids)]


# Ordinary text makes a token per 4 to 5 characters: 4.2 for the bundled WordPiece tokenizer and 4.7 for a
# byte-level BPE of 50,000 tokens trained on the very text it was measured on (this repository's data, docs
# and code, 1.4 M characters); its worst 512-token stretch, 7.0 and 8.6. So a text cut at 64 characters per
# position (32,768 for 512: 7 times the worst) still fills every position, and the tokenizer never reads
# megabytes the model cannot take (5 MB whole: 12 s and 850 MB; cut: milliseconds).
CHARS_PER_POSITION = 64
_backend_settings = threading.Lock()  # held while `encode` sets a tokenizer's truncation and encodes


def within_positions(max_length: int, *texts: str | None) -> tuple[str | None, ...]:
    """Each text cut to CHARS_PER_POSITION × `max_length` characters (None stays None): what any tokenizer
    call on a visitor's text reads, so that its time and memory are bounded by the model's positions."""
    bound = CHARS_PER_POSITION * max_length
    return tuple(t if t is None or len(t) <= bound else t[:bound] for t in texts)


def byte_level(tokenizer) -> bool:
    """Whether a fast tokenizer's pieces are byte-level BPE's (GPT-2's, Llama 3's, SmolLM2's): each character a
    byte, so one piece may hold half a character (viz._text.readable shows those as their bytes)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    parts = (getattr(backend, "decoder", None), getattr(backend, "pre_tokenizer", None))
    return any(type(part).__name__ == "ByteLevel" for part in parts)


def encode(tokenizer, text: str, text_pair: str | None = None, max_length: int = 512) -> Encoded:
    """Tokenize one sentence (or a pair) for a model with `max_length` positions.

    Longer input is truncated to fit (from the longer segment first), and `notice` says so; it
    is never an error. A text past CHARS_PER_POSITION × `max_length` characters is cut there before
    the tokenizer reads it (the notice then says "at least"). Works with any fast tokenizer: one that
    adds no special tokens (GPT-2's) or gives no token types (their ids are then all zeros).
    """
    pair = text_pair if text_pair else None
    cut_text, cut_pair = within_positions(max_length, text, pair)
    cut = cut_text != text or cut_pair != pair
    # what tokenizer(text, pair, truncation=True, max_length=...) runs, run directly: the `tokenizers` tokenizer
    # that a fast tokenizer wraps. Its truncation is a setting of that shared object (transformers sets it before
    # each of its calls), so it is set and cleared under a lock.
    backend = tokenizer.backend_tokenizer
    with _backend_settings:
        if backend.padding is not None:
            backend.no_padding()
        if backend.truncation is not None:
            backend.no_truncation()
        enc = backend.encode(cut_text, cut_pair)
        total = len(enc.ids)
        if total > max_length:
            backend.enable_truncation(max_length, strategy="longest_first", direction=tokenizer.truncation_side)
            enc = backend.encode(cut_text, cut_pair)
            backend.no_truncation()
    length = len(enc.ids)
    notice = None
    if total > length:
        notice = (
            f"The input has {'at least ' if cut else ''}{total} tokens; the model reads at most "
            f"{max_length} positions, so only the first {length} tokens are shown."
        )
    elif cut:  # text of very long words or runs of spaces: the characters cut made no tokens past the positions
        notice = (
            f"The input has {len(text) + len(pair or ''):,} characters; the model reads at most "
            f"{max_length} positions, so only the first {CHARS_PER_POSITION * max_length:,} characters "
            f"of each sentence are read ({length} tokens)."
        )
    return Encoded(
        input_ids=torch.tensor([enc.ids]),
        attention_mask=torch.tensor([enc.attention_mask]),
        token_type_ids=torch.tensor([enc.type_ids]),
        tokens=enc.tokens,
        word_ids=enc.word_ids,
        sequence_ids=enc.sequence_ids,
        offsets=[tuple(o) for o in enc.offsets],
        total_tokens=total,
        notice=notice,
        special_tokens_mask=tuple(bool(m) for m in enc.special_tokens_mask),
        byte_level=byte_level(tokenizer),
    )
