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

The mentions are located and their attention read in mentions.py, the format lives in examples.py, a batch's
attention is computed in attend.py and run by engines.py, the scores are held in results.py; intervals and paired
tests in stats.py, GAP/Winogender metrics, the held-out best head and model comparison in metrics.py, the CSV of
every head in result_csv.py. The command line is cli.py, which no library module imports (the package's
__main__ hands over to it):

    python -m attention.analysis.coref FILE [--by FIELD] [--csv OUT] [--top N] [--validate-on FILE] [--compare SOURCE]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .attend import model_attentions
from .examples import CorefExample, ExampleError
from .mentions import Located, OutsideWindow, locate, right_heads, word_attention
from .results import CorefResult, ExampleScore, Exclusion, group, summarize

NO_ANSWER = "no antecedent among the candidates"


def score_example(example: CorefExample, attentions: np.ndarray, tokens: list[str], word_ids, offsets) -> ExampleScore:
    """Score one example from its (n_layers, H, L, L) attention maps."""
    located = locate(example, word_ids, offsets)
    scores = word_attention(attentions, located)
    answer = example.answer_index
    return ExampleScore(example, tokens, located, scores, None if answer is None else right_heads(scores, answer))


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
    engines.py)."""
    from .engines import attended, check_engine  # here, not above: the engines bring pandas with the corpus's

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
