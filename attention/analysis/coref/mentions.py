"""Where an example's mentions are in its tokens, how much attention goes from the pronoun to each candidate,
and which candidate a head picks: the rules in scoring.py's docstring, which scores the heads with these."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .examples import CorefExample, ExampleError


class OutsideWindow(ExampleError):
    """The pronoun or a candidate lies past the tokens the model reads."""


@dataclass(frozen=True)
class Located:
    """Token positions of the pronoun and of each candidate in one encoded example."""

    pronoun: list[int]
    candidates: list[list[int]]

    @property
    def nearest(self) -> int:
        """Index of the candidate closest before the pronoun, else the closest after it."""
        p = self.pronoun[0]
        before = [(p - c[0], i) for i, c in enumerate(self.candidates) if c[0] < p]
        if before:
            return min(before)[1]
        return min((c[0] - p, i) for i, c in enumerate(self.candidates))[1]

    @property
    def first(self) -> int:
        return min((c[0], i) for i, c in enumerate(self.candidates))[1]


def word_spans(text: str, word_ids: list[int | None], offsets: list[tuple[int, int]]) -> list[tuple[str, list[int]]]:
    """The tokenizer's words in order: (the word as written in the text, its token positions)."""
    words: list[list[int]] = []
    previous = None
    for pos, word in enumerate(word_ids):
        if word is None:
            previous = None
            continue
        if word == previous:
            words[-1].append(pos)
        else:
            words.append([pos])
        previous = word
    return [(text[offsets[p[0]][0] : offsets[p[-1]][1]].strip(), p) for p in words]


def span_pieces(span: tuple[int, int], offsets) -> list[int]:
    """Positions of the tokens that overlap the characters [start, end); special tokens have none."""
    start, end = span
    return [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]


def locate(example: CorefExample, word_ids, offsets) -> Located:
    """Token positions of the example's mentions; OutsideWindow when the text was cut before one of them."""
    where = f"line {example.line}" if example.line is not None else "example"
    covered = max((b for _, b in offsets), default=0)  # the last character the tokens reach
    truncated = covered < len(example.text.rstrip())
    pronoun_span, candidate_spans = example.pronoun_span, example.candidate_spans
    if pronoun_span is not None and candidate_spans is not None:  # the line gave character spans
        spans = [pronoun_span, *candidate_spans]
        if truncated and any(end > covered for _, end in spans):
            raise OutsideWindow(f"{where}: a mention lies past the tokens the model reads")
        found = [span_pieces(span, offsets) for span in spans]
        for (start, end), pieces in zip(spans, found):
            if not pieces:
                raise ExampleError(f"{where}: no token covers '{example.text[start:end]}' at {start}")
        return Located(found[0], found[1:])
    words = word_spans(example.text, word_ids, offsets)

    def find(word: str, occurrence: int = 1) -> list[int]:
        matches = [positions for written, positions in words if written.lower() == word.lower()]
        if len(matches) < occurrence:
            if truncated:
                raise OutsideWindow(f"{where}: '{word}' lies past the tokens the model reads")
            raise ExampleError(
                f"{where}: the tokenizer's words do not include '{word}'"
                + (f" {occurrence} times" if occurrence > 1 else "")
            )
        return matches[occurrence - 1]

    return Located(find(example.pronoun, example.pronoun_occurrence), [find(c) for c in example.candidates])


def word_attention(attentions: np.ndarray, located: Located) -> np.ndarray:
    """(n_layers, H, L, L) maps -> (n_layers, H, n_candidates): from the pronoun (mean of its
    pieces' rows) to each candidate (sum of its pieces' columns)."""
    rows = attentions[:, :, located.pronoun, :].mean(axis=2)  # (n_layers, H, L)
    return np.stack([rows[:, :, cols].sum(axis=-1) for cols in located.candidates], axis=-1)


def right_heads(scores: np.ndarray, answer: int) -> np.ndarray:
    """(n_layers, H, n_candidates) -> (n_layers, H) bool: the answer strictly above every other."""
    others = np.delete(scores, answer, axis=-1).max(axis=-1)
    return scores[..., answer] > others


def preferred(scores: np.ndarray) -> np.ndarray:
    """(..., n_candidates) -> (...) index of the candidate attended to most; -1 where the top is tied."""
    top = scores.max(axis=-1, keepdims=True)
    return np.where((scores == top).sum(axis=-1) == 1, scores.argmax(axis=-1), -1)
