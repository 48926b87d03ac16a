"""Every head of a coreference result as CSV, best first: what the command line's --csv writes and the
page's download holds."""
from __future__ import annotations

import csv
import io
import os

from .coref import CorefResult
from .coref_metrics import heads_against_best


def write_csv(result: CorefResult, path: str | os.PathLike, held_out: CorefResult | None = None) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(csv_text(result, held_out))


def csv_text(result: CorefResult, held_out: CorefResult | None = None) -> str:
    """Every head, best first: accuracy, counts, baselines, the exact 95% interval, the exact McNemar
    p-value against the best head (Holm-corrected over all the others), per group accuracy, and with
    `held_out` (the same heads scored on another file) the accuracy and interval there."""
    n = len(result.details)
    low, high = result.interval
    groups = {v: g for v, g in result.by_group.items()}
    ranked = result.ranked()
    against = heads_against_best(result, [(layer, head) for layer, head, _ in ranked])
    other = [] if held_out is None else ["held_out_accuracy", "held_out_ci95_low", "held_out_ci95_high"]
    f = io.StringIO()
    out = csv.writer(f, lineterminator="\n")
    out.writerow(["layer", "head", "accuracy", "correct", "examples", "baseline_nearest", "baseline_first",
                  "ci95_low", "ci95_high", "p_vs_best_holm"] + [f"accuracy_{result.by}={v}" for v in groups]
                 + other)
    for rank, (layer, head, accuracy) in enumerate(ranked):
        row = [layer, head, f"{accuracy:.4f}", round(accuracy * n), n,
               f"{result.baselines['nearest']:.4f}", f"{result.baselines['first']:.4f}",
               f"{low[layer, head]:.4f}", f"{high[layer, head]:.4f}", "" if rank == 0 else f"{against[rank][1]:.4g}"]
        row += [f"{g.accuracy[layer, head]:.4f}" for g in groups.values()]
        if held_out is not None:
            h_low, h_high = held_out.interval
            row += [f"{held_out.accuracy[layer, head]:.4f}", f"{h_low[layer, head]:.4f}", f"{h_high[layer, head]:.4f}"]
        out.writerow(row)
    return f.getvalue()
