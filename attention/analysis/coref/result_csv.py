"""A coreference result as CSV: every head best first (what the command line's --csv writes and the page's
first download holds), and every counted example's right/wrong per head (the page's second download).
Both name the model and the examples in columns of their own, and the file names carry them too."""

from __future__ import annotations

import csv
import io
import os
import re

from .metrics import baselines_right, heads_against_best
from .results import CorefResult


def write_csv(
    result: CorefResult, path: str | os.PathLike, held_out: CorefResult | None = None, model: str = "", suite: str = ""
) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(csv_text(result, held_out, model, suite))


def holm_column(result: CorefResult) -> str:
    """The p-value column's name, with the size of the family Holm's correction is over: every other head."""
    return f"p_vs_best_holm_{result.accuracy.size - 1}"


def file_name(kind: str, model: str, suite: str) -> str:
    """e.g. coreference-heads_all-MiniLM-L6-v2_built-in.csv: letters, digits, '.', '-' and '_' only."""

    def slug(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9.-]+", "-", os.path.basename(text.rstrip("/\\")) or text).strip("-.")[:60]

    return "_".join(part for part in (f"coreference-{kind}", slug(model), slug(suite)) if part) + ".csv"


def csv_text(result: CorefResult, held_out: CorefResult | None = None, model: str = "", suite: str = "") -> str:
    """Every head, best first: accuracy, counts, baselines, the exact 95% interval, the exact McNemar
    p-value against the best head (Holm-corrected over all the others, as on the page: the family's size
    is in the column's name), per group accuracy, with `held_out` (the same heads scored on another file)
    the accuracy and interval there, and the model and the examples' names."""
    n = len(result.details)
    low, high = result.interval
    groups = {v: g for v, g in result.by_group.items()}
    ranked = result.ranked()
    against = heads_against_best(result, [(layer, head) for layer, head, _ in ranked])
    other = [] if held_out is None else ["held_out_accuracy", "held_out_ci95_low", "held_out_ci95_high"]
    f = io.StringIO()
    out = csv.writer(f, lineterminator="\n")
    out.writerow(
        [
            "layer",
            "head",
            "accuracy",
            "correct",
            "examples",
            "baseline_nearest",
            "baseline_first",
            "ci95_low",
            "ci95_high",
            holm_column(result),
        ]
        + [f"accuracy_{result.by}={v}" for v in groups]
        + other
        + ["model", "suite"]
    )
    for rank, (layer, head, accuracy) in enumerate(ranked):
        row = [
            layer,
            head,
            f"{accuracy:.4f}",
            round(accuracy * n),
            n,
            f"{result.baselines['nearest']:.4f}",
            f"{result.baselines['first']:.4f}",
            f"{low[layer, head]:.4f}",
            f"{high[layer, head]:.4f}",
            "" if rank == 0 else f"{against[rank][1]:.4g}",
        ]
        row += [f"{g.accuracy[layer, head]:.4f}" for g in groups.values()]
        if held_out is not None:
            h_low, h_high = held_out.interval
            row += [f"{held_out.accuracy[layer, head]:.4f}", f"{h_low[layer, head]:.4f}", f"{h_high[layer, head]:.4f}"]
        out.writerow(row + [model, suite])
    return f.getvalue()


def examples_csv_text(result: CorefResult, model: str = "", suite: str = "") -> str:
    """Every counted example, in file order: where it is (its position, 1 first, and line), its text,
    pronoun and answer, whether each baseline is right, and 1/0 for every head (columns L0H0, L0H1, ...)."""
    n_layers, n_heads = result.accuracy.shape
    heads = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    right = result.correct  # (n, n_layers, H)
    baselines = baselines_right(result)
    f = io.StringIO()
    out = csv.writer(f, lineterminator="\n")
    out.writerow(
        ["example", "line", "text", "pronoun", "answer", "nearest_right", "first_right"]
        + [f"L{layer}H{head}" for layer, head in heads]
        + ["model", "suite"]
    )
    for i, d in enumerate(result.details):
        e = d.example
        where = ["" if d.index is None else d.index + 1, "" if e.line is None else e.line]
        out.writerow(
            where
            + [e.text, e.pronoun, e.answer, int(baselines["nearest"][i]), int(baselines["first"][i])]
            + [int(right[i, layer, head]) for layer, head in heads]
            + [model, suite]
        )
    return f.getvalue()
