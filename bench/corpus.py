"""Texts per second of per-head statistics over a corpus: ours against transformers' eager forward.

    python bench/corpus.py [--limit 2000] [--batch-size 32] [--threads 2] [--sizes 250 500 1000] [--ray-texts 200]

The corpus is the 2,000 GAP development passages (data/gap-development.jsonl, field `text`, about 100 tokens
each) on the bundled MiniLM. Ours is attention.analysis.corpus.head_stats (engine "local"). transformers'
BertModel on the same checkpoint (attn_implementation="eager", output_attentions=True) runs batches of the same
size in the corpus's order, each padded to its longest text (the plain way), and again in our length-ordered
batches (so the forward passes alone compare), with the same reductions on its maps (stats.head_stats and
pattern_labels on each text's own square, summed as ours are); the results are compared. Prints texts per
second of each and the ratio ours / transformers in corpus order (target >= 1.5). Before that, the peak
memory of ours as the corpus grows (`--sizes`: the process's peak RSS, which never goes down, and
tracemalloc's peak of Python and numpy memory in that run: flat when one batch's maps are all that is ever
held); after, Ray's overhead on this machine: engine "ray" (Ray started with 2 CPUs, one actor) against
"local" on `--ray-texts` texts.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
import tracemalloc
from itertools import islice
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attention import encode, load_model  # noqa: E402
from attention.analysis.corpus import add_sums, finish, head_stats, head_sums, length_order, padded  # noqa: E402
from attention.analysis.stats import head_stats as text_head_stats  # noqa: E402
from attention.analysis.stats import pattern_labels, punctuation_mask  # noqa: E402
from attention.analysis.texts import read_texts  # noqa: E402

TARGET = 1.5
GAP = ROOT / "data" / "gap-development.jsonl"


def reference_stats(theirs, tokenizer, texts: list[str], batch_size: int, max_length: int, by_length: bool):
    """head_stats' frame from transformers' maps: the same reductions and sums as ours, in batches of the
    corpus's order (`by_length` False: padded to each batch's longest text) or in ours (length-ordered)."""
    ordered = iter(length_order(tokenizer, enumerate(texts), batch_size, max_length) if by_length else enumerate(texts))
    total = None
    while batch := list(islice(ordered, batch_size)):
        index, chunk = zip(*batch)
        encoded = [encode(tokenizer, text, max_length=max_length) for text in chunk]
        ids, mask, types = padded(encoded)
        with torch.inference_mode():
            maps = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, output_attentions=True).attentions
        maps = torch.stack(maps, dim=1).numpy()  # (B, n_layers, H, S, S)
        rows: dict[str, list] = {"layer": [], "head": [], "tokens": [], "pattern": []}
        for b, e in enumerate(encoded):
            L = len(e.tokens)
            stats = text_head_stats(maps[b, :, :, :L, :L], e.special, e.sequence_ids, punctuation_mask(e.tokens))
            layer, head = np.indices(stats["entropy"].shape)
            for name, value in (("layer", layer), ("head", head), ("tokens", np.full(layer.shape, L))):
                rows[name].append(value.ravel())
            for name, value in stats.items():
                rows.setdefault(name, []).append(value.ravel())
            rows["pattern"].append(pattern_labels(stats, L).ravel())
        total = add_sums(total, head_sums({name: np.concatenate(parts) for name, parts in rows.items()}))
    return finish(total)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def speed(model, tokenizer, texts: list[str], batch_size: int) -> None:
    from transformers import BertModel

    theirs = BertModel.from_pretrained(model.load_report.path, attn_implementation="eager").eval()
    limit = model.config.max_position_embeddings
    head_stats(model, tokenizer, texts[:batch_size], batch_size=batch_size)  # warm-up
    reference_stats(theirs, tokenizer, texts[:batch_size], batch_size, limit, False)
    ref, t_plain = timed(lambda: reference_stats(theirs, tokenizer, texts, batch_size, limit, False))
    _, t_same = timed(lambda: reference_stats(theirs, tokenizer, texts, batch_size, limit, True))
    ours, t_ours = timed(lambda: head_stats(model, tokenizer, texts, batch_size=batch_size))
    numbers = ours.columns[2:]
    diff = np.abs(ours[numbers].to_numpy() - ref[numbers].to_numpy()).max()
    print(f"{'speed, ' + str(len(texts)) + ' texts':<46} {'texts/s':>9} {'s':>8} {'ours faster by':>15}")
    for name, seconds in (
        ("transformers eager + head_stats, corpus order", t_plain),
        ("transformers eager + head_stats, our batches", t_same),
        ("ours (engine local)", t_ours),
    ):
        print(f"{name:<46} {len(texts) / seconds:>9.2f} {seconds:>8.1f} {seconds / t_ours:>15.2f}")
    flag = "" if t_plain / t_ours >= TARGET else "  TARGET MISSED"
    print(f"ratio ours / transformers (corpus order), texts/s: {t_plain / t_ours:.2f}  target >= {TARGET}{flag}")
    print(f"largest difference between ours and transformers' frames: {diff:.2e}")


def memory(model, tokenizer, texts: list[str], sizes: list[int], batch_size: int) -> None:
    print(f"peak memory of ours as the corpus grows (batch {batch_size}), before anything else runs")
    print(f"{'texts':>7} {'largest batch B x S':>20} {'peak RSS MB':>12} {'tracemalloc peak MB':>20} {'s':>8}")
    for size in sizes:
        ordered = [t for _, t in length_order(tokenizer, enumerate(texts[:size]), batch_size, 512)]
        lengths = [len(ids) for ids in tokenizer(ordered, verbose=False)["input_ids"]]
        B, S = max(
            ((len(b), max(b)) for b in np.array_split(lengths, range(batch_size, size, batch_size))),
            key=lambda bs: bs[0] * bs[1] ** 2,
        )  # the batch whose maps are largest
        tracemalloc.start()
        _, seconds = timed(lambda size=size: head_stats(model, tokenizer, texts[:size], batch_size=batch_size))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(f"{min(size, len(texts)):>7} {f'{B} x {S}':>20} {rss:>12.0f} {peak / 2**20:>20.1f} {seconds:>8.1f}")
    print("(the RSS follows the largest batch's maps, B x S x S a layer, not the number of texts; tracemalloc sees")
    print(" Python's and numpy's memory: one text's maps in float64 as stats.head_stats reduces them)\n")


def ray_overhead(model, tokenizer, texts: list[str], batch_size: int) -> None:
    import ray

    _, start = timed(lambda: ray.init(num_cpus=2, include_dashboard=False))
    ray_frame, t_ray = timed(lambda: head_stats(model, tokenizer, texts, engine="ray", batch_size=batch_size))
    local, t_local = timed(lambda: head_stats(model, tokenizer, texts, batch_size=batch_size))
    diff = np.abs(ray_frame.iloc[:, 2:].to_numpy() - local.iloc[:, 2:].to_numpy()).max()
    print(f"\nRay on this machine ({len(texts)} texts; ray.init {start:.1f} s, not counted below)")
    print(f"local {t_local:.1f} s, ray {t_ray:.1f} s: ray / local {t_ray / t_local:.2f}; largest difference {diff:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=2000, help="GAP passages timed (default: all 2,000)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000])
    ap.add_argument("--ray-texts", type=int, default=200, help="texts for Ray's overhead (0: skip it)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model()
    texts = read_texts(GAP, limit=max(args.limit, *args.sizes, args.ray_texts))
    print(
        f"model: {model.load_report.source}; torch {torch.__version__}, {args.threads} threads, "
        f"{platform.processor() or platform.machine()}; batch {args.batch_size}; {args.limit} GAP passages"
    )
    print(f"load average {os.getloadavg()[0]:.2f} at the start: on a busy machine every figure grows")
    memory(model, tokenizer, texts, args.sizes, args.batch_size)  # first: the peak RSS never goes down
    speed(model, tokenizer, texts[: args.limit], args.batch_size)
    if args.ray_texts:
        ray_overhead(model, tokenizer, texts[: args.ray_texts], args.batch_size)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
