"""Time of each analysis view's work after the forward pass: computation and figure, per input size.

    python bench/analysis.py [--model SOURCE] [--repeats 5] [--threads 2] [--flow-sizes 16 32 64]

For a sentence of about 16 tokens (the target: every analysis within 1 s after the forward pass),
each row is the median over `--repeats` of what the app does for that view once the sentence's run
exists: the head statistics and pattern labels with their table; the head comparison over the
app's example sentences (their forward passes included) with its 2-D map; rollout with its figure;
the query·key panel (recording one layer's pass included); ablation of one head; the grouped-query
conversion with its run and grid. Attention flow, the one slow analysis, is timed at each of
`--flow-sizes` tokens (once each: it is deterministic and slow). bertviz, the tool the head and
model views are compared with elsewhere, has none of these analyses, so there is no ratio to print.

Then what attention mixes (attention/analysis/mixing.py, lens.py), on `--mixing-model` (the bundled SmolLM2) at
`--mixing-tokens` tokens, as ratios against the work they are bounded by: value-weighted maps against a forward
pass with maps (target <= 1.3), value zeroing of every token against L passes of one layer (one layer's time taken
as the forward pass with maps over the layers; target <= 1), the logit lens in seconds (target <= 2 s) beside the
floor its LM head sets (n_layers · L · D · V multiply-adds: the head's products alone over as many states, in the
lens's tiles, timed interleaved with it), in wall and CPU time; and, beside it, the same products as one. The
value-weighted ratio is in CPU time: the median of paired rounds' own ratios (paired_ratio), with their range.
`--mixing-only` skips the views above.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attention import load_bert, load_model  # noqa: E402
from attention.analysis.ablation import ablate  # noqa: E402
from attention.analysis.gqa import map_change, to_grouped  # noqa: E402
from attention.analysis.lens import logit_lens, tiles  # noqa: E402
from attention.analysis.mixing import norm_maps, value_zeroing  # noqa: E402
from attention.analysis.query_key import query_key  # noqa: E402
from attention.analysis.rollout import as_attention_tuple, attention_flow, rollout  # noqa: E402
from attention.analysis.stats import (
    embed_heads,
    head_distances,
    head_stats,
    pattern_labels,  # noqa: E402
    punctuation_mask,
)
from attention.runs.run import run_sentence  # noqa: E402
from attention.tracing.trace import trace_layer  # noqa: E402
from attention.writing.generate import lm_head  # noqa: E402
from bench.forward import interleaved_medians, text_of_length  # noqa: E402
from ui.state.state import PRESETS  # noqa: E402
from viz.ablation import ablation_figure  # noqa: E402
from viz.gqa import gqa_change_grid  # noqa: E402
from viz.query_key import query_key_figure  # noqa: E402
from viz.rollout import attention_pair  # noqa: E402
from viz.stats import head_scatter, stats_frame  # noqa: E402

TARGET_S = 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: bundled MiniLM)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flow-sizes", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--mixing-model", default="smollm2", help="a causal decoder (default: the bundled SmolLM2)")
    ap.add_argument("--mixing-tokens", type=int, default=200)
    ap.add_argument("--mixing-only", action="store_true", help="time only what attention mixes")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if not args.mixing_only:
        views(args)
    mixing(args)


def views(args) -> None:
    model, tokenizer = load_bert(args.model)
    text = text_of_length(tokenizer, 16, 0)
    run = run_sentence(model, tokenizer, text)
    enc, L = run.encoded, len(run.tokens)
    layer, head = model.config.num_hidden_layers // 2, 1

    def stats_view():
        stats = head_stats(run.attentions, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))
        return stats_frame(stats, pattern_labels(stats, L))

    def comparison_view():
        maps = [run.attentions] + [run_sentence(model, tokenizer, a, b).attentions for a, b in PRESETS.values()]
        emb = embed_heads(head_distances(maps), heads_per_layer=run.n_heads)
        n = len(emb.layer)
        return head_scatter(emb.coords, emb.layer, np.arange(n) % run.n_heads)

    def rollout_view():
        derived = rollout(as_attention_tuple(run.attentions))[layer, 0].numpy()
        return attention_pair(run.attentions[layer].mean(axis=0), derived, run.tokens, "rollout")

    def query_key_view():
        trace = trace_layer(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, layer=layer)
        return query_key_figure(query_key(trace, head, L // 2), run.tokens)

    def ablation_view():
        mask = np.ones((run.n_layers, run.n_heads), dtype=np.float32)
        mask[layer, head] = 0
        result = ablate(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, head_mask=mask)
        return ablation_figure(result.hidden_cosine, result.attention_change, result.embedding_cosine, mask == 0)

    def gqa_view():
        grouped = run_sentence(to_grouped(model, run.n_heads // 3), tokenizer, text)
        return gqa_change_grid(map_change(run.attentions, grouped.attentions), run.n_heads // 3)

    forward = interleaved_medians([lambda: run_sentence(model, tokenizer, text)], args.repeats)[0]
    print(
        f"model: {model.load_report.source}; torch {torch.__version__}, {args.threads} threads, "
        f"{platform.processor() or platform.machine()}; median of {args.repeats}"
    )
    print(f"load average {os.getloadavg()[0]:.2f} at the start: on a busy machine every figure grows")
    print(f"sentence of {L} tokens; forward pass (tokenize + run) {forward * 1e3:.1f} ms")
    print(f"{'view':<36} {'ms after forward':>17}  target <= {TARGET_S * 1e3:.0f} ms")
    views = [
        ("head statistics, patterns, table", stats_view),
        (f"head comparison over {len(PRESETS) + 1} sentences", comparison_view),
        ("rollout beside raw attention", rollout_view),
        ("query·key panel (layer recorded)", query_key_view),
        ("ablation of one head", ablation_view),
        ("grouped-query conversion and run", gqa_view),
    ]
    for name, fn in views:
        seconds = interleaved_medians([fn], args.repeats)[0]
        flag = "" if seconds <= TARGET_S else "  TARGET MISSED"
        print(f"{name:<36} {seconds * 1e3:>17.1f}{flag}")

    print("\nattention flow into the last layer (scipy max-flow, once per size)")
    print(f"{'tokens':>7} {'max-flow problems':>18} {'s':>8}")
    for tokens in args.flow_sizes:
        sized = run_sentence(model, tokenizer, text_of_length(tokenizer, tokens, 0))
        start = time.perf_counter()
        attention_flow(as_attention_tuple(sized.attentions), max_tokens=max(args.flow_sizes))
        print(f"{tokens:>7} {tokens * tokens:>18} {time.perf_counter() - start:>8.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


def mixing(args) -> None:
    """What attention mixes, as ratios against the work each is bounded by (see the module's docstring)."""
    model, tokenizer = load_model(args.mixing_model)
    ids = tokenizer(text_of_length(tokenizer, args.mixing_tokens, 0), return_tensors="pt")["input_ids"]
    L, n_layers = ids.size(1), len(model.layers)
    layer = n_layers // 2

    def forward_with_maps():
        with torch.inference_mode():
            model(ids)

    # CPU time of this process: a busy machine's other work stops our clock, not only slows it (both use 2 threads)
    rounds = 2 * args.repeats + 1  # about a second each: more rounds than the slow rows, for a steadier median
    ratio, low, high, forward = paired_ratio(
        lambda: norm_maps(model, ids), forward_with_maps, rounds, time.process_time
    )
    zeroing = interleaved_medians(
        [lambda: value_zeroing(model, ids, layer)], max(1, args.repeats // 2), time.process_time
    )[0]
    head = lm_head(model)
    V, D = head.weight.shape
    hidden = torch.randn(n_layers * L, D)  # as many states as the lens reads

    def product():  # the head's products alone, in the lens's tiles, nothing taken from their logits
        with torch.inference_mode():
            for _ in tiles(head, hidden):
                pass

    def whole():  # the same products as one, every logit written out (n_layers · L · V float32)
        with torch.inference_mode():
            head(hidden)

    # wall and CPU time of the lens, and the head's rate on the same machine load, interleaved
    lens, product_s, whole_s = interleaved_medians([lambda: logit_lens(model, ids), product, whole], args.repeats)
    lens_cpu, product_cpu = interleaved_medians(
        [lambda: logit_lens(model, ids), product], args.repeats, time.process_time
    )
    rate = 2 * hidden.size(0) * D * V / product_s  # multiply-adds: 2 flops
    one_layer = forward / n_layers
    print(f"\nwhat attention mixes: {args.mixing_model}, {L} tokens, {n_layers} layers; load {os.getloadavg()[0]:.2f}")
    print(f"CPU time (both threads): forward pass with maps {forward:.3f} s; one layer of it {one_layer * 1e3:.1f} ms")
    print(
        f"value-weighted maps  {ratio * forward:8.3f} s CPU  {ratio:6.2f} x the forward with maps (target <= 1.3; "
        f"median of {rounds} paired rounds, {low:.2f} to {high:.2f})"
    )
    print(
        f"value zeroing, layer {layer} {zeroing:8.3f} s CPU  {zeroing / (L * one_layer):6.2f} x {L} passes of one "
        "layer (target <= 1)"
    )
    floor = 2 * n_layers * L * D * V / rate
    print(
        f"logit lens           {lens:8.3f} s wall  (target <= 2 s); its LM head alone {floor:.3f} s at "
        f"{rate / 1e9:.0f} GFLOP/s, {lens / floor:.2f} x that floor; CPU time {lens_cpu:.3f} s, "
        f"{lens_cpu / (floor * product_cpu / product_s):.2f} x the head's"
    )
    print(f"                     the head as one product writing every logit out: {whole_s:.3f} s wall")


def paired_ratio(numerator, denominator, repeats: int, clock=time.perf_counter) -> tuple[float, float, float, float]:
    """How many times `denominator`'s time `numerator` takes, as the median over `repeats` rounds of each round's own
    ratio, the two run back to back and in alternating order (so that both see the same load, and neither always
    runs first): (median ratio, lowest, highest, the denominator's median seconds), on `clock` (time.process_time:
    this process's CPU time). One warm-up of each first."""
    numerator(), denominator()
    ratios, below = [], []
    for k in range(max(1, repeats)):
        seconds = {}
        for fn in (numerator, denominator) if k % 2 == 0 else (denominator, numerator):
            start = clock()
            fn()
            seconds[fn] = clock() - start
        ratios.append(seconds[numerator] / seconds[denominator])
        below.append(seconds[denominator])
    return statistics.median(ratios), min(ratios), max(ratios), statistics.median(below)


if __name__ == "__main__":
    main()
