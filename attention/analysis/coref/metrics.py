"""What a coreference result says about heads, data sets and models, beyond accuracy:

- heads_against_best: each head against the best one, exact McNemar tests with Holm's correction;
- best_against_baselines: the best head against the nearest and first candidate, exact McNemar tests;
- held_out_best: the best head chosen on one split, its accuracy reported on another (no selection bias);
- gap_metrics: F1 as the GAP paper reports it (overall, masculine, feminine, bias = F / M);
- winogender_bias: per head, male minus female accuracy and how the choice of the occupation follows the
  occupation's share of women (US labour statistics);
- paired_groups / compare_models: McNemar tests between paired groups and between two models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mentions import preferred
from .results import CorefResult, ExampleScore, Exclusion
from .stats import McNemar, clopper_pearson, f1, holm, mcnemar_exact, pearson


def best_head(result: CorefResult) -> tuple[int, int]:
    layer, head, _ = result.ranked(1)[0]
    return layer, head


def heads_against_best(result: CorefResult, heads: list[tuple[int, int]]) -> list[tuple[McNemar, float]]:
    """For each head: the exact McNemar test of it against the best head on the same examples, and its
    Holm-adjusted p-value over all the heads given (the best head itself compares as p = 1)."""
    correct = result.correct  # (n, n_layers, H)
    bl, bh = best_head(result)
    tests = [mcnemar_exact(correct[:, layer, head], correct[:, bl, bh]) for layer, head in heads]
    others = [i for i, lh in enumerate(heads) if lh != (bl, bh)]
    adjusted = np.ones(len(heads))
    if others:
        adjusted[others] = holm([tests[i].p for i in others])
    return list(zip(tests, adjusted.tolist()))


def baselines_right(result: CorefResult) -> dict[str, np.ndarray]:
    """Each baseline's right/wrong record over the counted examples: name -> (n,) bool."""
    return {
        name: np.array([getattr(d.located, name) == d.example.answer_index for d in result.details], dtype=bool)
        for name in ("nearest", "first")
    }


def best_against_baselines(result: CorefResult) -> dict[str, McNemar]:
    """The best head against each baseline on the same examples: baseline name -> exact McNemar test
    (only_a: the head right and the baseline wrong)."""
    bl, bh = best_head(result)
    head = result.correct[:, bl, bh]
    return {name: mcnemar_exact(head, right) for name, right in baselines_right(result).items()}


def splits(result: CorefResult) -> list:
    """The values of the examples' `split` field in order of first appearance (every example, counted or not)."""
    items: list[ExampleScore | Exclusion] = [*result.details, *result.unanswered, *result.excluded]
    return list(dict.fromkeys(i.example.value("split") for i in items if i.example.value("split") is not None))


@dataclass(frozen=True)
class HeldOut:
    layer: int
    head: int
    chosen_accuracy: float  # on the split it was chosen on (optimistic: the maximum of many)
    accuracy: float  # on the other split
    interval: tuple[float, float]  # exact 95% interval on the other split
    n: int  # counted examples of the other split
    best_there: tuple[int, int, float]  # the other split's own best head, for contrast
    baselines: dict[str, float]  # the other split's baselines


def held_out_best(chosen_on: CorefResult, reported_on: CorefResult) -> HeldOut:
    """The best head of `chosen_on` and its accuracy on `reported_on` (same model, other examples)."""
    layer, head = best_head(chosen_on)
    k = int(reported_on.correct[:, layer, head].sum())
    low, high = clopper_pearson(k, reported_on.n)
    return HeldOut(
        layer,
        head,
        float(chosen_on.accuracy[layer, head]),
        float(reported_on.accuracy[layer, head]),
        (float(low), float(high)),
        reported_on.n,
        reported_on.ranked(1)[0],
        reported_on.baselines,
    )


# ---- GAP --------------------------------------------------------------------------------------------


def gap_counts(predicted: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True positives, false positives and false negatives over the A/B decisions of every example.

    predicted (n, ...) the candidate each example's decision names coreferent (-1: none); gold (n,) the
    coreferent candidate (-1: neither). A name is predicted coreferent exactly when it is the one named."""
    gold = gold.reshape(-1, *([1] * (predicted.ndim - 1)))
    hit = (predicted == gold) & (gold >= 0)
    tp = hit.sum(axis=0)
    fp = ((predicted >= 0) & ~hit).sum(axis=0)
    fn = ((gold >= 0) & ~hit).sum(axis=0)
    return tp, fp, fn


def gap_metrics(result: CorefResult) -> dict[str, dict[str, np.ndarray | float]]:
    """GAP F1 (Webster et al. 2018) for every head and for the baselines, over every scored example,
    those whose answer is neither name included (there a named candidate is a false positive).

    Decision rule: a head names as coreferent the candidate it attends to most from the pronoun, the other
    not (a tie names neither); a baseline names its candidate. Counts over both A and B decisions, per
    gender of the pronoun: F1 overall (O), masculine (M), feminine (F) and bias F / M, as GAP's scorer."""
    scored: list[ExampleScore] = sorted([*result.details, *result.unanswered], key=lambda d: d.index or 0)
    gold = np.array([-1 if d.example.answer_index is None else d.example.answer_index for d in scored])
    gender = np.array([d.example.value("gender") for d in scored])
    choices = {
        "heads": np.stack([preferred(d.attention) for d in scored]),  # (n, n_layers, H)
        "nearest": np.array([d.located.nearest for d in scored]),
        "first": np.array([d.located.first for d in scored]),
    }
    out = {}
    for name, predicted in choices.items():
        scores = {}
        for label, keep in (
            ("overall", np.ones(len(scored), bool)),
            ("masculine", gender == "masculine"),
            ("feminine", gender == "feminine"),
        ):
            scores[label] = f1(*gap_counts(predicted[keep], gold[keep]))
        with np.errstate(invalid="ignore", divide="ignore"):
            scores["bias"] = scores["feminine"] / scores["masculine"]
        out[name] = scores
    return out


# ---- Winogender -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenderBias:
    gap: np.ndarray  # (n_layers, H) accuracy on male pronouns minus on female pronouns
    correlation: np.ndarray  # (n_layers, H) Pearson r over occupations, see winogender_bias
    occupations: list[str]


def winogender_bias(result: CorefResult) -> GenderBias:
    """Per head: male minus female pronoun accuracy, and the Pearson correlation, over the occupations, of
    the occupation's share of women (bls_pct_female) with how much more often the head picks the occupation
    for "she/her" than for "he/his/him". (The correlation uses the choice, not accuracy: each occupation has
    one template answered by it and one by the participant, so a stereotype helps one and hurts the other
    and cancels in accuracy.)"""
    details = result.details
    gender = np.array([d.example.value("gender") for d in details])
    correct = result.correct
    gap = correct[gender == "male"].mean(axis=0) - correct[gender == "female"].mean(axis=0)
    role = np.array(
        [
            d.example.candidates.index(d.example.value("occupation"))
            if d.example.value("occupation") in d.example.candidates
            else -1
            for d in details
        ]
    )
    picks_occupation = np.stack([preferred(d.attention) for d in details]) == role[:, None, None]  # (n, n_layers, H)
    occupation = np.array([d.example.value("occupation") for d in details])
    names = list(dict.fromkeys(occupation.tolist()))
    shift, share = [], []
    for name in names:
        here = occupation == name
        shift.append(
            picks_occupation[here & (gender == "female")].mean(axis=0)
            - picks_occupation[here & (gender == "male")].mean(axis=0)
        )
        share.append(next(d.example.value("bls_pct_female") for d in details if d.example.value("occupation") == name))
    return GenderBias(gap, pearson(share, np.stack(shift)), names)


# ---- paired comparisons ----------------------------------------------------------------------------


def paired_groups(result: CorefResult, by: str, a, b, pair_on: tuple[str, ...], layer: int, head: int) -> McNemar:
    """McNemar test of one head between two values of `by` on examples paired by the fields `pair_on`
    (e.g. Winogender's male and female sentence of one template: occupation, participant, answer_role)."""

    def keyed(value):
        return {
            tuple(d.example.value(f) for f in pair_on): d.heads_right()[layer, head]
            for d in result.details
            if d.example.value(by) == value
        }

    left, right = keyed(a), keyed(b)
    keys = [k for k in left if k in right]
    return mcnemar_exact([left[k] for k in keys], [right[k] for k in keys])


@dataclass(frozen=True)
class ModelComparison:
    best_a: tuple[int, int, float]
    best_b: tuple[int, int, float]
    test: McNemar  # best head of A against best head of B, on the examples both counted


def compare_models(a: CorefResult, b: CorefResult) -> ModelComparison:
    """Two models scored on the same example list: each one's best head, and the paired McNemar test
    between them on the examples both counted (matched by their index in that list)."""
    (la, ha, acc_a), (lb, hb, acc_b) = a.ranked(1)[0], b.ranked(1)[0]
    right_a = {d.index: d.heads_right()[la, ha] for d in a.details if d.index is not None}
    right_b = {d.index: d.heads_right()[lb, hb] for d in b.details if d.index is not None}
    both = sorted(set(right_a) & set(right_b))
    return ModelComparison(
        (la, ha, acc_a), (lb, hb, acc_b), mcnemar_exact([right_a[i] for i in both], [right_b[i] for i in both])
    )
