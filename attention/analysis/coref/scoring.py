"""Which heads link a pronoun to its antecedent? Scoring every head on coreference examples.

Rules (Clark et al. 2019, "What Does BERT Look At?"): a mention's pieces are the tokens of its character
span (a mention given as a word: the tokenizer's word matched case-insensitively, the pronoun's
`pronoun_occurrence`-th occurrence, a candidate's first). Attention from the pronoun is the mean of its
pieces' rows, attention to a candidate the sum of its pieces' columns, over all of a multi-word mention.
A head is right on an example when its attention from the pronoun to the answer is strictly greater than
to every other candidate (a tie is wrong). Baselines: `nearest` picks the candidate closest before the
pronoun (if none is before it, the closest after), `first` the earliest candidate.

Examples that cannot count are kept and reported in `CorefResult.excluded` with a reason: those whose
answer is null (none of the candidates is the antecedent; still scored, in `unanswered`) and those whose
pronoun or a candidate lies past the tokens the model can read (the text is truncated to its positions).

The mentions are located and their attention read in coref_mentions.py, the format lives in coref_examples.py,
intervals and paired tests in coref_stats.py, GAP/Winogender metrics, the held-out best head and model comparison
in coref_metrics.py, the CSV of every head in coref_csv.py; the command line is coref_cli.py, which this module
never imports (run as a script, it hands over to it):

    python -m attention.analysis.coref FILE [--by FIELD] [--csv OUT] [--top N] [--validate-on FILE] [--compare SOURCE]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import torch

from ...inputs import on_model_device
from ...mha import pick_rows
from .examples import CorefExample, ExampleError
from .mentions import Located, OutsideWindow, locate, right_heads, word_attention
from .stats import clopper_pearson

NO_ANSWER = "no antecedent among the candidates"


# ---- results ------------------------------------------------------------------------------------


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


# ---- scoring ------------------------------------------------------------------------------------


def score_example(example: CorefExample, attentions: np.ndarray, tokens: list[str], word_ids, offsets) -> ExampleScore:
    """Score one example from its (n_layers, H, L, L) attention maps."""
    located = locate(example, word_ids, offsets)
    scores = word_attention(attentions, located)
    answer = example.answer_index
    return ExampleScore(example, tokens, located, scores, None if answer is None else right_heads(scores, answer))


def model_attentions(model, input_ids, attention_mask, token_type_ids, rows=None) -> Iterable[torch.Tensor]:
    """The per-layer attention probabilities of one forward pass of our model: (B, H, L, L) each, or
    with `rows` (B, P) only those query rows of each map, (B, H, P, L), the rest run fused. Only the
    maps are computed: the last layer stops at its map (maps_only)."""
    return model(
        input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, rows=rows, maps_only=True
    ).attentions


def token_limit(model, tokenizer) -> int:
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    return int(limit or tokenizer.model_max_length)


def buckets(lengths: dict[int, int], batch_size: int, token_budget: int) -> list[list[int]]:
    """Example indices in batches of similar length: sorted by length, at most `batch_size` examples and
    about `token_budget` padded tokens each."""
    order = sorted(lengths, key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < batch_size and (len(batches[-1]) + 1) * lengths[i] <= token_budget:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def reduce_layer(picked: torch.Tensor, weights: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """One layer's pronoun rows to pronoun -> candidate attention: the mean of the pronoun pieces' rows, the
    sum of each candidate's columns. picked (B, H, P, S) the rows of the pronoun's pieces (repeated to P)
    with weights (B, P) 1/|pronoun| (0 on repeats); cols (B, S, K) ones on each candidate's pieces."""
    from_pronoun = (weights[:, None, None, :] @ picked).squeeze(2)  # (B,1,1,P) x (B,H,P,S) -> (B,H,S)
    return from_pronoun @ cols  # (B,H,S) x (B,S,K) -> (B,H,K)


def attend_batch(model, enc, chunk: list[int], located: dict[int, Located], forward, pad_id: int) -> np.ndarray:
    """(b, n_layers, H, K) pronoun -> candidate attention for a batch. With our model (`forward` is
    model_attentions) only the pronoun pieces' rows of each map are computed; another `forward` returns
    full maps, whose rows are picked one layer at a time."""
    S = max(len(enc["input_ids"][i]) for i in chunk)
    K = max(len(located[i].candidates) for i in chunk)
    P = max(len(located[i].pronoun) for i in chunk)
    ids = torch.full((len(chunk), S), pad_id, dtype=torch.long)
    mask = torch.zeros((len(chunk), S), dtype=torch.long)
    types = torch.zeros((len(chunk), S), dtype=torch.long) if "token_type_ids" in enc else None
    rows, weights = torch.zeros((len(chunk), P), dtype=torch.long), torch.zeros((len(chunk), P))
    cols = torch.zeros((len(chunk), S, K))
    for r, i in enumerate(chunk):
        n, pronoun = len(enc["input_ids"][i]), located[i].pronoun
        ids[r, :n] = torch.tensor(enc["input_ids"][i])
        mask[r, :n] = 1
        if types is not None:
            types[r, :n] = torch.tensor(enc["token_type_ids"][i])
        rows[r] = torch.tensor(pronoun + [pronoun[0]] * (P - len(pronoun)))
        weights[r, : len(pronoun)] = 1.0 / len(pronoun)
        for k, pieces in enumerate(located[i].candidates):
            cols[r, pieces, k] = 1.0
    moved = on_model_device(model, ids, mask, rows, weights, cols)  # none of them None, so none comes back None
    ids, mask, rows, weights, cols = cast(tuple[torch.Tensor, ...], moved)
    (types,) = on_model_device(model, types)  # None where the tokenizer gives no token types
    with torch.inference_mode():
        if forward is model_attentions:
            maps = list(model_attentions(model, ids, mask, types, rows=rows))  # (B, H, P, S) each
        else:
            maps = list(forward(model, ids, mask, types))  # (B, H, S, S) each
        reduced = []
        for layer in range(len(maps)):
            picked = maps[layer] if forward is model_attentions else pick_rows(maps[layer], rows)  # (B, H, P, S)
            reduced.append(reduce_layer(picked.float(), weights, cols))
            maps[layer] = None  # this layer's maps are no longer held
    return torch.stack(reduced, dim=1).cpu().numpy()  # (b, n_layers, H, K)


def score_heads(
    model,
    tokenizer,
    examples: list[CorefExample],
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    by: str | None = None,
    forward: Callable = model_attentions,
    token_budget: int = 4096,
    engine: str = "local",
    address: str | None = None,
) -> CorefResult:
    """Run every example through the model (in length-bucketed padded batches) and score each head.

    `by` names a field (e.g. "gender"): `result.by_group` then maps each of its values to the result on
    that subset alone. `forward(model, input_ids, attention_mask, token_type_ids)` returns the per-layer
    (B, H, L, L) attention maps (the benchmark passes transformers'); by default (model_attentions) our
    model computes only the pronoun's rows of each map and runs its attention fused. `engine`: "local"
    (this process) or "ray" (the same batches as a Ray Data job, on the cluster at `address` if given; see
    coref_engines)."""
    from .engines import attended, check_engine

    check_engine(engine)
    if not examples:
        raise ExampleError("no examples to score")
    limit = token_limit(model, tokenizer)
    enc = tokenizer([e.text for e in examples], truncation=True, max_length=limit, return_offsets_mapping=True)
    located: dict[int, Located] = {}
    excluded: list[Exclusion] = []
    for i, example in enumerate(examples):
        try:
            located[i] = locate(example, enc.word_ids(i), enc["offset_mapping"][i])
        except OutsideWindow:
            excluded.append(Exclusion(example, i, f"a mention lies past the first {limit} tokens"))
    if not located:
        raise ExampleError(
            f"none of the {len(examples)} examples can be scored: every one has a mention past the first {limit} tokens"
        )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    scored: dict[int, ExampleScore] = {}
    done = len(excluded)
    chunks = buckets({i: len(enc["input_ids"][i]) for i in located}, batch_size, token_budget)
    for chunk, attention in attended(engine, model, enc, chunks, located, forward, pad_id, address):
        for r, i in enumerate(chunk):
            ex = examples[i]
            scores = attention[r, :, :, : len(located[i].candidates)]
            answer = ex.answer_index
            right = None if answer is None else right_heads(scores, answer)
            scored[i] = ExampleScore(ex, enc.tokens(i), located[i], scores, right, i)
        done += len(chunk)
        if progress is not None:
            progress(done, len(examples))
    in_order = [scored[i] for i in sorted(scored)]
    excluded += [Exclusion(scored[i].example, i, NO_ANSWER) for i in sorted(scored) if scored[i].correct is None]
    excluded.sort(key=lambda e: e.index)
    shape = in_order[0].attention.shape[:2]
    result = summarize(
        [d for d in in_order if d.correct is not None], [d for d in in_order if d.correct is None], excluded, shape
    )
    if by is not None:
        result = CorefResult(
            result.accuracy, result.baselines, result.details, result.excluded, result.unanswered, group(result, by), by
        )
    return result


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
