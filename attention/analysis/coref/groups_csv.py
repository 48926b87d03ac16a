"""A coreference result split by a field, as CSV: one row per group and head with the group's counts, the exact
95% interval and the group's baselines. What the Coreference view's "Group by" download holds."""

from __future__ import annotations

import csv
import io

from .results import CorefResult

HEADER = [
    "field",
    "group",
    "layer",
    "head",
    "accuracy",
    "correct",
    "examples",
    "ci95_low",
    "ci95_high",
    "baseline_nearest",
    "baseline_first",
    "left_out",
]


def groups_csv_text(by: str, groups: list[tuple[str, CorefResult]]) -> str:
    """`groups`: (its label, its result) in the order shown; every head of each, in layer and head order."""
    f = io.StringIO()
    out = csv.writer(f, lineterminator="\n")
    out.writerow(HEADER)
    for name, result in groups:
        correct = result.correct.sum(axis=0)  # (n_layers, H)
        low, high = result.interval
        n_layers, n_heads = result.accuracy.shape
        for layer in range(n_layers):
            for head in range(n_heads):
                out.writerow(
                    [
                        by,
                        name,
                        layer,
                        head,
                        f"{result.accuracy[layer, head]:.4f}",
                        int(correct[layer, head]),
                        result.n,
                        f"{low[layer, head]:.4f}",
                        f"{high[layer, head]:.4f}",
                        f"{result.baselines['nearest']:.4f}",
                        f"{result.baselines['first']:.4f}",
                        len(result.excluded),
                    ]
                )
    return f.getvalue()
