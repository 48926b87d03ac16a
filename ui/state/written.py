"""A continuation as the views read it: the prompt and the tokens a causal model wrote, encoded from the ids
it wrote. The text read again by the tokenizer can give other ids (a token ending inside a character, pieces
that merge otherwise); the views show the sequence the model wrote, so no run of it tokenizes its text."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attention.runs.inputs import Encoded, encode


@dataclass(frozen=True)
class Written:
    """The text of a prompt and its continuation with the ids the model wrote and their encoding (`encoded`):
    every run of it (ui/compute/runs.py) reads those instead of tokenizing the text. Not a str: it is equal only to a
    Written of the same text and the same ids, so a result kept for the text typed, or written with other ids,
    is never taken for its own (the stores' keys hold it as they hold any text)."""

    text: str
    ids: tuple[int, ...]
    encoded: Encoded = field(compare=False, repr=False)  # of `ids`: equal ids, equal encodings

    @classmethod
    def of(cls, text: str, encoded: Encoded) -> Written:
        return cls(text, tuple(encoded.input_ids[0].tolist()), encoded)


Text = str | Written  # what a run reads: a text the tokenizer reads, or a continuation's ids as written


def text_of(text: Text) -> str:
    """The characters of a text, a continuation's included."""
    return text.text if isinstance(text, Written) else text


def written_encoding(tokenizer, prompt: str, text: str, ids: list[int], prompt_len: int, positions: int) -> Encoded:
    """`ids` (the prompt's `prompt_len` as the tokenizer read `prompt`, then the ones written) encoded over
    `text` (the prompt and the decoded continuation): the prompt's pieces keep the tokenizer's offsets, each
    written piece spans the characters its id added to the decoded text; a piece's word is the word (as the
    tokenizer cuts `text`) where its first character is, or its previous piece's."""
    read = encode(tokenizer, prompt, max_length=positions)  # the ids the prompt was written after
    offsets = read.offsets[:prompt_len]
    before = len(tokenizer.decode(ids[:prompt_len], clean_up_tokenization_spaces=False))
    start = len(prompt)
    for k in range(prompt_len, len(ids)):
        added = len(tokenizer.decode(ids[: k + 1], clean_up_tokenization_spaces=False)) - before
        end = min(max(len(prompt) + added, start), len(text))
        offsets.append(_trimmed(text, start, end))
        start = end
    special = [bool(s) for s in tokenizer.get_special_tokens_mask(ids, already_has_special_tokens=True)]
    word_ids = _words(encode(tokenizer, text, max_length=positions), text, offsets, special)
    tensor = torch.tensor([ids])
    return Encoded(
        input_ids=tensor,
        attention_mask=torch.ones_like(tensor),
        token_type_ids=torch.zeros_like(tensor),
        tokens=tokenizer.convert_ids_to_tokens(ids),
        word_ids=word_ids,
        sequence_ids=[None if s else 0 for s in special],
        offsets=offsets,
        total_tokens=len(ids),
        notice=None,
        special_tokens_mask=tuple(special),
        byte_level=read.byte_level,
    )


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """A piece's span without the spaces it starts with (as the tokenizer's offsets are), unless it is all spaces."""
    first = start
    while first < end and text[first].isspace():
        first += 1
    return (first, end) if first < end else (start, end)


def _words(read: Encoded, text: str, offsets: list[tuple[int, int]], special: list[bool]) -> list[int | None]:
    word_at: list[int | None] = [None] * len(text)  # the word of each character, as the tokenizer cuts the text
    for word, (start, end) in zip(read.word_ids, read.offsets):
        if word is not None:
            word_at[start:end] = [word] * (end - start)
    words: list[int | None] = []
    last = None
    for (start, end), is_special in zip(offsets, special):
        found = next((word_at[i] for i in range(start, end) if word_at[i] is not None), None)
        last = found if found is not None else last
        words.append(None if is_special else last)
    return words
