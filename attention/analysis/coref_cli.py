"""The coreference command line: python -m attention.analysis.coref FILE [options]."""
from __future__ import annotations

import os

from .coref import CorefResult, ExampleError, load_examples, score_heads


def write_csv(result: CorefResult, path: str | os.PathLike) -> None:
    import csv

    n = len(result.details)
    low, high = result.interval
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["layer", "head", "accuracy", "correct", "examples", "baseline_nearest", "baseline_first",
                      "ci95_low", "ci95_high"])
        for layer, head, accuracy in result.ranked():
            out.writerow([layer, head, f"{accuracy:.4f}", int(round(accuracy * n)), n,
                          f"{result.baselines['nearest']:.4f}", f"{result.baselines['first']:.4f}",
                          f"{low[layer, head]:.4f}", f"{high[layer, head]:.4f}"])


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import time

    from ..loading import ModelLoadError, load_bert

    ap = argparse.ArgumentParser(prog="python -m attention.analysis.coref",
                                 description="Score every attention head on coreference examples.")
    ap.add_argument("file", help="JSON Lines file of examples (text, pronoun, candidates, answer)")
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: the bundled MiniLM)")
    ap.add_argument("--csv", default=None, help="write every head's accuracy to this CSV file")
    ap.add_argument("--top", type=int, default=10, help="how many heads to print (default 10)")
    args = ap.parse_args(argv)
    try:
        examples = load_examples(args.file)
        model, tokenizer = load_bert(args.model)
        start = time.perf_counter()
        result = score_heads(model, tokenizer, examples)
        seconds = time.perf_counter() - start
    except (ExampleError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    n_layers, n_heads = result.accuracy.shape
    print(f"model: {model.load_report.source} ({n_layers} layers x {n_heads} heads); "
          f"{len(examples)} examples scored in {seconds:.2f} s")
    print(f"baselines: nearest {result.baselines['nearest']:.3f}, first {result.baselines['first']:.3f}")
    print(f"{'rank':>4} {'layer':>5} {'head':>4} {'accuracy':>8}  vs nearest  vs first")
    for rank, (layer, head, accuracy) in enumerate(result.ranked(args.top), start=1):
        print(f"{rank:>4} {layer:>5} {head:>4} {accuracy:>8.3f}  {accuracy - result.baselines['nearest']:>+10.3f}"
              f"  {accuracy - result.baselines['first']:>+8.3f}")
    if args.csv:
        write_csv(result, args.csv)
        print(f"all {n_layers * n_heads} heads written to {args.csv}")
    return 0
