"""Coreference scoring speed: every head scored on the built-in suite and on GAP development passages.

    python bench/coref.py [--model SOURCE] [--examples 60] [--repeats 5] [--gap 200] [--threads 2]

Times `score_heads` (our encoder; length-bucketed batches; every layer runs torch's fused attention and
keeps only the pronoun pieces' rows of its map, `rows=`, and the last layer stops at its map, `maps_only`)
and the same scoring with transformers' eager BertModel (output_attentions=True) supplying the full maps,
measured in the same run, and prints examples per second and their ratio (ours / theirs in examples per
second: >= 1 is the target). The runs alternate, and both the wall-clock and the process CPU time are
reported: on a shared machine the CPU time is the steadier of the two.
`--gap 2000` times all of GAP development (target: <= 60 s for ours on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attention.analysis.coref import load_examples, score_heads  # noqa: E402
from bench.forward import reference_pair  # noqa: E402


def interleaved_times(fns, repeats: int) -> list[tuple[float, float]]:
    """(median wall-clock seconds, median process CPU seconds) of each function, run in turn so that both
    see the same machine load."""
    for fn in fns:
        fn()  # warm-up
    wall, cpu = [[] for _ in fns], [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[i].append(time.perf_counter() - start)
            cpu[i].append(time.process_time() - start_cpu)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(wall, cpu)]


def reference_attentions(reference, input_ids, attention_mask, token_type_ids):
    """transformers' per-layer attention probabilities for one padded batch."""
    return reference(
        input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, output_attentions=True
    ).attentions


def run(name, model, reference, tokenizer, examples, repeats) -> None:
    ours = score_heads(model, tokenizer, examples)
    theirs = score_heads(reference, tokenizer, examples, forward=reference_attentions)
    differ = int((ours.correct != theirs.correct).sum())
    assert differ <= 1e-3 * ours.correct.size, f"{differ} head decisions differ between the two models"
    (t_ours, cpu_ours), (t_ref, cpu_ref) = interleaved_times(
        [
            lambda: score_heads(model, tokenizer, examples),
            lambda: score_heads(reference, tokenizer, examples, forward=reference_attentions),
        ],
        repeats,
    )
    n = len(examples)
    layer, head, best = ours.ranked(1)[0]
    print(
        f"{name}: {n} examples, median of {repeats}: ours {t_ours:.2f} s ({n / t_ours:.0f} examples/s); "
        f"transformers' attentions {t_ref:.2f} s ({n / t_ref:.0f} examples/s); ratio {t_ref / t_ours:.2f}"
    )
    print(
        f"  process CPU time: ours {cpu_ours:.2f} s, transformers' attentions {cpu_ref:.2f} s; "
        f"ratio {cpu_ref / cpu_ours:.2f}"
    )
    print(
        f"  best head L{layer}H{head} {best:.3f}; baselines nearest {ours.baselines['nearest']:.3f}, first "
        f"{ours.baselines['first']:.3f}; {differ} of {ours.correct.size} head decisions differ between the models"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--examples", type=int, default=60, help="built-in suite examples (default 60)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs on the built-in suite (default 5)")
    ap.add_argument("--gap", type=int, default=200, help="GAP development passages (default 200; 0: skip)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer, reference = reference_pair(args.model)
    print(f"model: {model.load_report.source}; torch {torch.__version__}, {args.threads} threads")
    suite = load_examples(ROOT / "data" / "coref_examples.jsonl")[: args.examples]
    run("built-in suite", model, reference, tokenizer, suite, args.repeats)
    if args.gap:
        gap = load_examples(ROOT / "data" / "gap-development.jsonl")[: args.gap]
        run("GAP development", model, reference, tokenizer, gap, 1)


if __name__ == "__main__":
    main()
