"""The token-by-token search every generating model shares: an LM head over the last hidden state, the scores
processed (processors.py), the next token taken greedily or drawn, until an end-of-sequence id or the limit.

One sequence is written: greedy search or sampling, never beam search (generate.py and generate_seq2seq.py
say what each does with a checkpoint's num_beams).
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import read_json
from ..core.mha import KeyValueCache
from ..load.checkpoint import read_checkpoint
from ..load.gguf import GGUFCheckpoint
from .processors import Settings, process


class LMHead:
    """Last hidden states (..., E) -> next-token logits (..., V) as float32: weight (V, E), bias (V,) or None,
    the hidden states first multiplied by `scale` if given (T5's d_model ** -0.5 before its tied head), the logits
    capped to tanh(logits / cap) · cap if `cap` is given (Gemma2's and Gemma3's final_logit_softcapping)."""

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        scale: float | None = None,
        cap: float | None = None,
    ):
        self.weight, self.bias, self.scale, self.cap = weight, bias, scale, cap

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.scale is not None:
            hidden = hidden * self.scale  # (..., E)
        logits = hidden @ self.weight.T  # (..., E) x (E, V) -> (..., V), in the model's dtype
        if self.bias is not None:
            logits = logits + self.bias
        if self.cap is not None:
            logits = torch.tanh(logits / self.cap) * self.cap
        return logits.float()

    def part(self, ids: slice) -> LMHead:
        """The head of the vocabulary's ids in `ids` (a slice) alone: their logits, as this head gives them."""
        return LMHead(self.weight[ids], None if self.bias is None else self.bias[ids], self.scale, self.cap)


def by_columns(weight: torch.Tensor) -> torch.Tensor:
    """A head's own weight (V, E), the same values stored as its transpose (E, V): the product with one hidden
    state, hidden @ weight.T, then reads the matrix row by row, 1.2-1.5 times as fast on a CPU (bench/generate.py
    times a Llama head both ways). A causal decoder's head tied to its word embeddings is their table, laid out
    so once (generate.lay_out_by_columns)."""
    return weight.t().contiguous().t()  # (V, E), strides (1, V)


_HEADS: weakref.WeakKeyDictionary[torch.nn.Module, LMHead] = weakref.WeakKeyDictionary()


def kept_head(model: torch.nn.Module, words: torch.Tensor, read: Callable[..., LMHead]) -> LMHead:
    """`read(model)`, the LM head of the checkpoint `model` came from, read once and kept while the model lives
    (the head holds the model's tensors, never the model); read again once the word embeddings `words` are on
    another device or of another dtype (the model moved)."""
    head = _HEADS.get(model)
    if head is None or head.weight.device != words.device or head.weight.dtype != words.dtype:
        head = _HEADS[model] = read(model)
    return head


class BufferedCache(KeyValueCache):
    """A KeyValueCache for `capacity` positions at most: its keys and values are written into two buffers
    (B, G, capacity, d) made at the first extend, and the P + L positions filled are views of them, so a step
    copies only its new positions where torch.cat would copy all of them again."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity, self.filled = capacity, 0
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def length(self) -> int:
        return self.filled

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The new positions' k and v (B, G, L, d) written after the P filled: views (B, G, P + L, d) of all."""
        P, L = self.filled, k.size(2)
        if P + L > self.capacity:
            raise ValueError(f"{P} cached positions and {L} new ones exceed this cache's {self.capacity}")
        if self.buffers is None:
            B, G, _, d = k.shape
            self.buffers = k.new_empty(B, G, self.capacity, d), v.new_empty(B, G, self.capacity, v.size(-1))
        keys, values = self.buffers
        keys[:, :, P : P + L], values[:, :, P : P + L] = k, v
        self.filled = P + L
        self.k, self.v = keys[:, :, : P + L], values[:, :, : P + L]  # (B, G, P + L, d)
        return self.k, self.v


class StepMaps:
    """Each layer's attention maps as the steps of a writing make them, kept compact as transformers keeps them:
    the first step's (B, H, L, S) (a prompt's map), then each new token's row (B, H, 1, S'), copied into one
    buffer per layer that holds `room` keys' columns in all (the rows side by side), made after the first step:
    kept rows left as many small tensors among the steps' temporaries, which grow by a key each step, keep the
    allocator from reusing its freed memory (the resident set grew by up to 20 MB over 32 steps of a Llama)."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.first: list[torch.Tensor] = []  # per layer (B, H, L, S)
        self.rows: list[torch.Tensor] = []  # per layer (B, H, room): the rows' keys one after another
        self.widths: list[int] = []  # each row's number of keys

    def add(self, maps: tuple[torch.Tensor | None, ...]) -> None:
        """One step's maps, one per layer, its queries following those added before: the first step's any
        number of queries, each later step's one."""
        if not self.first:  # the rows' buffers made now, between steps, not among a step's temporaries
            self.first = [probs for probs in maps if probs is not None]
            assert len(self.first) == len(maps)  # the step was asked to keep its maps
            self.rows = [probs.new_empty(*probs.shape[:2], self.room) for probs in self.first]
            return
        start, width = sum(self.widths), maps[0].size(-1)  # type: ignore[union-attr]
        for kept, probs in zip(self.rows, maps, strict=True):
            assert probs is not None and probs.size(2) == 1  # one query
            kept[:, :, start : start + width] = probs[:, :, 0]
        self.widths.append(width)

    def squares(self) -> tuple[torch.Tensor, ...]:
        """One map per layer, (B, H, T, S): the T queries of every step, each row over the S keys of the longest
        (zero past those its step had: a causal map's upper triangle). Each layer's rows are freed as its map is
        made, so they are never held twice."""
        maps = []
        while self.first:
            first, rows = self.first.pop(0), self.rows.pop(0)
            L, S = first.size(2), max(first.size(3), *self.widths)
            whole = first.new_zeros(*first.shape[:2], L + len(self.widths), S)
            whole[:, :, :L, : first.size(3)] = first
            start = 0
            for row, width in enumerate(self.widths, start=L):
                whole[:, :, row, :width] = rows[:, :, start : start + width]
                start += width
            maps.append(whole)
            del first, rows
        return tuple(maps)


def check_options(max_new_tokens, temperature, top_k, top_p, top) -> None:
    def whole(value) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1

    if not whole(max_new_tokens) or not whole(top) or (top_k is not None and not whole(top_k)):
        raise ValueError("max_new_tokens, top and top_k must be integers of at least 1")
    if not temperature > 0 or (top_p is not None and not 0 < top_p <= 1):
        raise ValueError(f"temperature must be above 0 and top_p in (0, 1], got {temperature!r} and {top_p!r}")


@dataclass(frozen=True)
class Sampling:
    """How the next token is taken from the processed scores: the most probable one, or drawn (do_sample) with
    `generator`; temperature, top_k and top_p reshape the scores either way (the top probabilities show it)."""

    do_sample: bool
    temperature: float
    top_k: int | None
    top_p: float | None
    generator: torch.Generator

    @classmethod
    def seeded(cls, do_sample, temperature, top_k, top_p, seed: int | None, device: torch.device) -> Sampling:
        generator = torch.Generator(device)
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()
        return cls(do_sample, temperature, top_k, top_p, generator)


@dataclass(frozen=True)
class Written:
    ids: torch.Tensor  # (1, T): the sequence given, then the new tokens
    top_ids: torch.Tensor  # (n_new, top): at each step the most probable next tokens, best first
    top_probs: torch.Tensor  # (n_new, top): their probabilities, those the choice was made from


def picked(token: int, vocabulary: int, chosen: torch.Tensor) -> torch.Tensor:
    """The id `token` as the (1, 1) tensor `chosen` is; ValueError outside the `vocabulary`'s ids."""
    if not 0 <= token < vocabulary:
        raise ValueError(f"the token id {token} picked is not in the model's {vocabulary:,} ids")
    return torch.full_like(chosen, token)


def search(
    logits_after: Callable[[torch.Tensor], torch.Tensor],
    ids: torch.Tensor,
    settings: Settings,
    sampling: Sampling,
    max_new_tokens: int,
    top: int,
    forced: Mapping[int, int] | None = None,
) -> Written:
    """ids (1, L) continued by up to max_new_tokens tokens. `logits_after(new)` gives the next-token logits
    (1, V) once the tokens `new` (1, n) follow those already given to it: first all of ids, then each token.
    `forced`: new token number → the id written there instead of the one chosen (a branch of the text; the draw
    is made all the same, so a sampled text's later draws come from the same generator)."""
    start = ids.size(1)
    forced = dict(forced or {})
    tops: list[tuple[torch.Tensor, torch.Tensor]] = []
    logits = logits_after(ids)  # (1, V)
    while True:
        s = sampling
        scores = process(logits, ids, settings, s.temperature, s.top_k, s.top_p, start, start + max_new_tokens)
        probs = scores.softmax(dim=-1)  # (1, V)
        token = torch.multinomial(probs, 1, generator=s.generator) if s.do_sample else scores.argmax(-1, keepdim=True)
        if len(tops) in forced:
            token = picked(forced[len(tops)], probs.size(-1), token)
        tops.append(probs[0].topk(min(top, probs.size(-1))))
        ids = torch.cat((ids, token), dim=1)  # (1, T)
        if int(token) in settings.eos_ids or len(tops) == max_new_tokens:
            break
        logits = logits_after(token)  # (1, V): one new position
    return Written(ids, torch.stack([i for _, i in tops]), torch.stack([p for p, _ in tops]))


def head_source(report) -> tuple[Mapping[str, torch.Tensor], dict]:
    """The checkpoint's tensors and config values, for the LM head of a causal decoder or an encoder-decoder: the
    folder's weights and config.json, or a GGUF file's (gguf.py: its metadata as config values, Gemma2's
    final_logit_softcapping among them), whose output head is the token embeddings when it has no output.weight
    (tie_word_embeddings true: T5's then scaled), which load_model lists among the tensors it did not use (read
    again from the file only then)."""
    folder = Path(report.path)
    if not report.weights_file.endswith(".gguf"):
        return read_checkpoint(folder)[0], read_json(folder / "config.json")
    checkpoint = GGUFCheckpoint(folder / report.weights_file)
    values = checkpoint.config_values()
    if "lm_head.weight" not in report.ignored_keys:
        return {}, dict(values, tie_word_embeddings=True)
    return checkpoint, dict(values, tie_word_embeddings=False)
