"""Coreference scoring time: 60 examples of the built-in suite, every head scored.

    python bench/coref.py [--model SOURCE] [--examples 60] [--repeats 5] [--threads 2]

Prints the median time of `score_heads` (our encoder, padded batches) and of the same scoring with
transformers' eager BertModel supplying the attentions, and their ratio. Target: <= 2 s for 60.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attention.analysis.coref import load_examples, score_example, score_heads  # noqa: E402
from bench.forward import interleaved_medians, reference_pair  # noqa: E402


def score_with_reference(reference, tokenizer, examples, batch_size=32):
    """The same batches and rules, attentions from transformers' model."""
    details = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        batch = tokenizer([e.text for e in chunk], padding=True, return_offsets_mapping=True, return_tensors="pt")
        with torch.inference_mode():
            out = reference(batch["input_ids"], attention_mask=batch["attention_mask"],
                            token_type_ids=batch["token_type_ids"], output_attentions=True)
        stacked = torch.stack(out.attentions, dim=1).numpy()
        for row, ex in enumerate(chunk):
            n = int(batch["attention_mask"][row].sum())
            details.append(score_example(ex, stacked[row, :, :, :n, :n], batch.tokens(row)[:n],
                                         batch.word_ids(row)[:n], batch["offset_mapping"][row, :n].tolist()))
    return np.mean([d.correct for d in details], axis=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--examples", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer, reference = reference_pair(args.model)
    examples = load_examples(ROOT / "data" / "coref_examples.jsonl")[: args.examples]
    ours = score_heads(model, tokenizer, examples)
    theirs = score_with_reference(reference, tokenizer, examples)
    assert np.array_equal(ours.accuracy, theirs), "the two models disagree on some head"
    t_ours, t_ref = interleaved_medians([lambda: score_heads(model, tokenizer, examples),
                                         lambda: score_with_reference(reference, tokenizer, examples)], args.repeats)
    layer, head, best = ours.ranked(1)[0]
    print(f"model: {model.load_report.source}; {len(examples)} examples; torch {torch.__version__}, "
          f"{args.threads} threads; median of {args.repeats}")
    print(f"score_heads: {t_ours:.3f} s (target <= 2 s: {'met' if t_ours <= 2 else 'MISSED'}); "
          f"same scoring on transformers' attentions: {t_ref:.3f} s; ratio {t_ours / t_ref:.2f}")
    print(f"best head: layer {layer}, head {head}, accuracy {best:.3f}; baselines: nearest "
          f"{ours.baselines['nearest']:.3f}, first {ours.baselines['first']:.3f} (same accuracies from both models)")


if __name__ == "__main__":
    main()
