"""A suite's scores: each example's (ExampleScore), those left out and why (Exclusion), and the whole
(CorefResult: accuracy per head with exact intervals, the baselines, the groups of a field); twin examples
(a shared pair_id) and the heads whose choice flips between them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .examples import CorefExample
from .mentions import Located
from .stats import clopper_pearson


@dataclass(frozen=True)
class ExampleScore:
    example: CorefExample
    tokens: list[str]
    located: Located
    attention: np.ndarray  # (n_layers, H, n_candidates) word-level attention pronoun -> candidate
    correct: np.ndarray | None  # (n_layers, H) bool; None when the example has no answer
    index: int | None = None  # position in the list that was scored

    def heads_right(self) -> np.ndarray:
        """`correct` of an example with an answer, as every counted one has: (n_layers, H) bool."""
        if self.correct is None:
            raise ValueError("an example without an answer has no right or wrong heads")
        return self.correct

    @property
    def margin(self) -> np.ndarray:
        """(n_layers, H): attention to the answer minus the best other candidate."""
        answer = self.example.answer_index
        if answer is None:
            raise ValueError("an example without an answer has no margin")
        return self.attention[..., answer] - np.delete(self.attention, answer, axis=-1).max(axis=-1)

    @property
    def preferred(self) -> np.ndarray:
        """(n_layers, H): index of the candidate each head attends to most."""
        return self.attention.argmax(axis=-1)


@dataclass(frozen=True)
class Exclusion:
    example: CorefExample
    index: int
    reason: str


@dataclass(frozen=True)
class CorefResult:
    accuracy: np.ndarray  # (n_layers, H) fraction of the examples with an answer each head gets right
    baselines: dict[str, float]  # "nearest" and "first"
    details: list[ExampleScore]  # the counted examples, in input order
    excluded: tuple[Exclusion, ...] = ()  # not counted in accuracy, with the reason
    unanswered: tuple[ExampleScore, ...] = ()  # scored, but none of the candidates is the answer
    by_group: dict = field(default_factory=dict)  # value of the `by` field -> CorefResult on that subset
    by: str | None = None

    @property
    def n(self) -> int:
        return len(self.details)

    @property
    def correct(self) -> np.ndarray:
        """(n, n_layers, H) bool: each counted example, each head."""
        if not self.details:
            return np.zeros((0, *self.accuracy.shape), dtype=bool)
        return np.stack([d.heads_right() for d in self.details])

    @property
    def interval(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high), each (n_layers, H): the exact (Clopper-Pearson) 95% interval of each accuracy."""
        return clopper_pearson(self.correct.sum(axis=0), self.n)

    @property
    def excluded_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.excluded:
            counts[e.reason] = counts.get(e.reason, 0) + 1
        return counts

    def ranked(self, top: int | None = None) -> list[tuple[int, int, float]]:
        """(layer, head, accuracy), best first; ties by layer then head."""
        n_layers, n_heads = self.accuracy.shape
        order = sorted(
            (-self.accuracy[layer, head], layer, head) for layer in range(n_layers) for head in range(n_heads)
        )
        return [(layer, head, float(-a)) for a, layer, head in order[:top]]


def summarize(
    details: list[ExampleScore], unanswered: list[ExampleScore], excluded: list[Exclusion], shape: tuple[int, int]
) -> CorefResult:
    """One result from scored examples: accuracy and baselines over those with an answer (NaN if none)."""
    if details:
        accuracy = np.stack([d.heads_right() for d in details]).mean(axis=0)
    else:
        accuracy = np.full(shape, np.nan)
    baselines = {
        name: float(np.mean([getattr(d.located, name) == d.example.answer_index for d in details]))
        if details
        else float("nan")
        for name in ("nearest", "first")
    }
    return CorefResult(accuracy, baselines, details, tuple(excluded), tuple(unanswered))


def group(result: CorefResult, by: str) -> dict:
    """Value of field `by` -> the result on the examples with that value (in order of first appearance)."""
    values: dict = {}
    items: list[ExampleScore | Exclusion] = [*result.details, *result.unanswered, *result.excluded]
    for item in items:
        values.setdefault(item.example.value(by), None)
    shape = result.accuracy.shape
    return {
        v: summarize(
            [d for d in result.details if d.example.value(by) == v],
            [d for d in result.unanswered if d.example.value(by) == v],
            [e for e in result.excluded if e.example.value(by) == v],
            shape,
        )
        for v in values
    }


# ---- twins ----------------------------------------------------------------------------------------


def flipping_heads(a: ExampleScore, b: ExampleScore) -> np.ndarray:
    """(n_layers, H) bool: heads whose preferred candidate (by word) differs between two twins."""
    words_a = np.array([c.lower() for c in a.example.candidates])[a.preferred]
    words_b = np.array([c.lower() for c in b.example.candidates])[b.preferred]
    return words_a != words_b


def twin_pairs(examples: list[CorefExample]) -> list[tuple[int, int]]:
    """Index pairs of the examples sharing a pair_id, in file order."""
    seen: dict[str, int] = {}
    pairs = []
    for i, example in enumerate(examples):
        if example.pair_id is None:
            continue
        if example.pair_id in seen:
            pairs.append((seen[example.pair_id], i))
        else:
            seen[example.pair_id] = i
    return pairs
