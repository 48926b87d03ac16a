"""One sentence (or pair) through the model, kept as read-only numpy arrays for the views."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .aggregate import drop_special, merge_labels, merge_word_pieces
from .inputs import Encoded, encode, on_model_device, within_positions


@dataclass(frozen=True)
class SentenceRun:
    encoded: Encoded
    attentions: np.ndarray  # (n_layers, H, L, L) float32, read-only

    @property
    def tokens(self) -> list[str]:
        return self.encoded.tokens

    @property
    def n_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def n_heads(self) -> int:
        return self.attentions.shape[1]


def read_only(array: np.ndarray) -> np.ndarray:
    """The array itself, no longer writable: results shared by every session are not changed in place."""
    array.setflags(write=False)
    return array


def stack_attentions(attentions, batch: int = 0) -> np.ndarray:
    """The model's per-layer (B, H, L, L) attentions as one (n_layers, H, L, L) float32 array.

    Given a list, each layer is dropped from it once copied, so that the maps are held about once
    rather than twice while the array is filled (at 512 tokens a 6-layer model's maps are 75 MB).
    """
    out = np.empty((len(attentions), *attentions[0][batch].shape), dtype=np.float32)  # (n_layers, H, L, L)
    for layer in range(len(attentions)):
        out[layer] = attentions[layer][batch].float().cpu().numpy()  # from the GPU too
        if isinstance(attentions, list):
            attentions[layer] = None
    return read_only(out)


def run_sentence(model, tokenizer, text: str, text_b: str | None = None, causal: bool = False) -> SentenceRun:
    """Tokenize (truncating at the model's positions, with a notice) and run the model once, on its device."""
    enc = encode(tokenizer, text, text_b or None, max_length=model.config.max_position_embeddings)
    return run_encoded(model, enc, causal)


def run_encoded(model, enc: Encoded, causal: bool = False) -> SentenceRun:
    """Run the model once on an input already encoded, on its device."""
    with torch.inference_mode():
        inputs = on_model_device(model, enc.input_ids, enc.attention_mask, enc.token_type_ids)
        attentions = list(model(*inputs, causal=causal).attentions)
    return SentenceRun(enc, stack_attentions(attentions))


@dataclass(frozen=True)
class HeadMap:
    matrix: np.ndarray  # (rows, cols)
    labels: list[str]  # one per row and per column
    note: str  # what was done to the raw map, for a caption
    positions: tuple[tuple[int, ...], ...] = ()  # the sentence's token positions each row and column stands for

    def row_of(self, position: int) -> int | None:
        """The row (and column) that holds the sentence's token at `position`; None where it is hidden."""
        return next((i for i, held in enumerate(self.positions) if position in held), None)


def head_map(
    run: SentenceRun,
    layer: int,
    head: int,
    hide_special: bool = False,
    renormalize: bool = True,
    merge_words: bool = False,
) -> HeadMap:
    """One head's map, optionally with word pieces merged into words and [CLS]/[SEP] hidden."""
    matrix = run.attentions[layer, head]
    labels = list(run.tokens)
    special = np.array(run.encoded.special)
    positions: list[tuple[int, ...]] = [(i,) for i in range(len(labels))]
    notes = []
    if merge_words:
        matrix, groups = merge_word_pieces(matrix, run.encoded.word_ids, run.encoded.tokens, run.encoded.offsets)
        labels = merge_labels(labels, groups)
        positions = [tuple(g) for g in groups]
        special = np.array([bool(special[g[0]]) for g in groups])
        notes.append(
            "word pieces merged: a word's row is the mean of its pieces' rows, "
            "its column the sum of its pieces' columns"
        )
    if hide_special and special.any() and not special.all():
        matrix = drop_special(matrix, ~special, renormalize)
        labels = [label for label, s in zip(labels, special) if not s]
        positions = [held for held, s in zip(positions, special) if not s]
        notes.append(
            "[CLS] and [SEP] hidden; rows renormalised to sum to 1"
            if renormalize
            else "[CLS] and [SEP] hidden; rows not renormalised, so they sum to less than 1"
        )
    note = "; ".join(notes) or "raw attention probabilities; each row sums to 1"
    return HeadMap(matrix, labels, note, tuple(positions))


@dataclass(frozen=True)
class PaddedBatch:
    names: list[str]  # one per batch item
    tokens: list[list[str]]  # per item, padded to the same length with [PAD]
    mask: np.ndarray  # (B, S) 1 = token, 0 = padding
    attentions: np.ndarray  # (n_layers, B, H, S, S)


def run_padded_batch(model, tokenizer, texts: list[str]) -> PaddedBatch:
    """Several sentences in one padded batch, as the model sees them."""
    limit = model.config.max_position_embeddings
    batch = tokenizer(
        list(within_positions(limit, *texts)), padding=True, truncation=True, max_length=limit, return_tensors="pt"
    )
    tokens = [batch.tokens(i) for i in range(len(texts))]
    return run_batch(model, batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"), tokens)


def run_batch(model, input_ids, attention_mask, token_type_ids, tokens: list[list[str]]) -> PaddedBatch:
    """A padded batch already tokenized, (B, S) each, through the model once; `tokens`: each item's pieces."""
    with torch.inference_mode():
        out = model(*on_model_device(model, input_ids, attention_mask, token_type_ids))
    stacked = read_only(torch.stack(out.attentions).float().cpu().numpy())  # (n_layers, B, H, S, S)
    return PaddedBatch(
        [f"sentence {i + 1}" for i in range(len(tokens))],
        tokens,
        read_only(attention_mask.cpu().numpy().copy()),
        stacked,
    )
