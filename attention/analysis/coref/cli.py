"""The coreference command line:

    python -m attention.analysis.coref FILE [--model SOURCE] [--by FIELD] [--csv OUT] [--top N]
                                       [--validate-on FILE] [--compare SOURCE] [--engine ray] [--address ADDR]

Prints the baselines, the top heads with exact 95% intervals and McNemar p-values against the best head
(Holm-corrected), and, as the data allow: accuracy per group (--by), GAP F1 (lines with gender
masculine/feminine), Winogender's gender gap and its correlation with occupation statistics (lines with
bls_pct_female), the best head's accuracy on a held-out file (--validate-on) and a second model (--compare).
With --engine ray the batches run as a Ray Data job (engines.py), on the cluster at --address if given.
"""

from __future__ import annotations

import numpy as np

from .engines import ENGINES
from .examples import ExampleError, load_examples
from .metrics import (
    best_against_baselines,
    best_head,
    compare_models,
    gap_metrics,
    heads_against_best,
    held_out_best,
    paired_groups,
    winogender_bias,
)
from .result_csv import write_csv
from .results import CorefResult
from .scoring import score_heads


def excluded_line(result: CorefResult) -> str:
    counts = result.excluded_counts
    return "none excluded" if not counts else "excluded: " + "; ".join(f"{n} {why}" for why, n in counts.items())


def print_heads(result: CorefResult, top: int) -> None:
    low, high = result.interval
    heads = [(layer, head) for layer, head, _ in result.ranked()]  # Holm over every other head, as the CSV
    print(
        f"{'rank':>4} {'layer':>5} {'head':>4} {'accuracy':>8}  vs nearest  vs first   95% interval  "
        f"p vs best (Holm over {result.accuracy.size - 1})"
    )
    for rank, ((layer, head, accuracy), (_, p)) in enumerate(
        zip(result.ranked(top), heads_against_best(result, heads)), start=1
    ):
        print(
            f"{rank:>4} {layer:>5} {head:>4} {accuracy:>8.3f}  {accuracy - result.baselines['nearest']:>+10.3f}"
            f"  {accuracy - result.baselines['first']:>+8.3f}   [{low[layer, head]:.3f}, {high[layer, head]:.3f}]"
            f"  {'-' if rank == 1 else f'{p:.3g}':>10}"
        )


def print_baselines(result: CorefResult) -> None:
    layer, head = best_head(result)
    for name, t in best_against_baselines(result).items():
        print(
            f"best head L{layer}H{head} vs baseline {name}: right only for the head {t.only_a}, only for the "
            f"baseline {t.only_b}, exact McNemar p = {t.p:.3g}"
        )


def print_groups(result: CorefResult) -> None:
    layer, head = best_head(result)
    indent = " " * len(result.by or "")
    print(
        f"by {result.by}: {'value':>12} {'n':>5} {'nearest':>7} {'first':>6}  best head there   L{layer}H{head} there"
    )
    for value, g in result.by_group.items():
        if g.n == 0:
            print(f"   {indent} {value!s:>12} {0:>5}  (nothing counted; {excluded_line(g)})")
            continue
        gl, gh, ga = g.ranked(1)[0]
        print(
            f"   {indent} {value!s:>12} {g.n:>5} {g.baselines['nearest']:>7.3f} "
            f"{g.baselines['first']:>6.3f}  L{gl}H{gh} {ga:.3f}       {g.accuracy[layer, head]:.3f}"
        )


def print_gap(result: CorefResult, label: str, chosen: tuple[int, int] | None = None) -> None:
    metrics = gap_metrics(result)
    layer, head = chosen or best_head(result)
    heads = {name: np.asarray(value) for name, value in metrics["heads"].items()}  # each (n_layers, H)
    top = divmod(int(heads["overall"].argmax()), heads["overall"].shape[1])
    print(f"GAP F1 on {label} (a head names the candidate it attends to most; neither-rows count):")
    print(f"  {'':<28} {'O':>6} {'M':>6} {'F':>6} {'F/M':>6}")
    rows = [
        (f"L{layer}H{head} (best accuracy)", {k: v[layer, head] for k, v in heads.items()}),
        (f"L{top[0]}H{top[1]} (best F1 here)", {k: v[top] for k, v in heads.items()}),
        ("baseline nearest", metrics["nearest"]),
        ("baseline first", metrics["first"]),
    ]
    for name, m in rows:
        print(
            f"  {name:<28} {float(m['overall']):>6.3f} {float(m['masculine']):>6.3f} {float(m['feminine']):>6.3f} "
            f"{float(m['bias']):>6.3f}"
        )


def print_winogender(result: CorefResult) -> None:
    bias = winogender_bias(result)
    layer, head = best_head(result)
    test = paired_groups(result, "gender", "male", "female", ("occupation", "participant", "answer_role"), layer, head)
    print(
        f"Winogender, best head L{layer}H{head}: male - female accuracy {bias.gap[layer, head]:+.3f} "
        f"(paired McNemar over {test.n} sentence pairs: {test.only_a} right only for he, "
        f"{test.only_b} only for she, p = {test.p:.3g}); r(BLS % women, she-minus-he choice of the occupation) "
        f"= {bias.correlation[layer, head]:+.3f} over {len(bias.occupations)} occupations"
    )
    gl, gh = divmod(int(abs(bias.gap).argmax()), bias.gap.shape[1])
    cl, ch = divmod(int(np.nanargmax(abs(bias.correlation))), bias.gap.shape[1])
    print(
        f"  largest gap: L{gl}H{gh} {bias.gap[gl, gh]:+.3f}; largest |r|: L{cl}H{ch} {bias.correlation[cl, ch]:+.3f} "
        f"(the largest of {bias.gap.size} heads: a screen, not a test)"
    )


def is_gap(result: CorefResult) -> bool:
    values = {d.example.value("gender") for d in result.details}
    return bool(values) and values <= {"masculine", "feminine"}


def is_winogender(result: CorefResult) -> bool:
    return all(d.example.value("bls_pct_female") is not None for d in result.details)


def load_scorable(source: str | None):
    """(model, tokenizer) of any family load_model reads whose self-attention maps the heads are scored on:
    an encoder (BERT, RoBERTa ...) or a causal decoder (GPT-2, Llama ...), whose pronoun sees only the
    candidates before it. An encoder-decoder is refused with a ModelLoadError."""
    from ...errors import ModelLoadError
    from ...load.loading import load_model

    model, tokenizer = load_model(source)
    if model.config.encoder_decoder.is_encoder_decoder:
        raise ModelLoadError(f"{model.load_report.source} is an encoder-decoder: coreference scores one stack's heads")
    return model, tokenizer


def main(argv: list[str] | None = None) -> int:
    import argparse
    import functools
    import sys
    import time

    from ...errors import ModelLoadError

    ap = argparse.ArgumentParser(
        prog="python -m attention.analysis.coref", description="Score every attention head on coreference examples."
    )
    ap.add_argument("file", help="JSON Lines file of examples (text, pronoun, candidates, answer)")
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: the bundled MiniLM)")
    ap.add_argument("--csv", default=None, help="write every head's accuracy to this CSV file")
    ap.add_argument("--top", type=int, default=10, help="how many heads to print (default 10)")
    ap.add_argument("--by", default=None, help="a field of the lines to group by, e.g. gender")
    ap.add_argument("--validate-on", default=None, help="choose the best head on FILE, report it on this file")
    ap.add_argument("--compare", default=None, help="a second checkpoint scored on the same examples")
    ap.add_argument("--engine", choices=ENGINES, default="local", help="where the batches run (default: local)")
    ap.add_argument("--address", default=None, help="a Ray cluster's address (default: start Ray here)")
    args = ap.parse_args(argv)
    try:
        examples = load_examples(args.file)
        held = load_examples(args.validate_on) if args.validate_on else None
        model, tokenizer = load_scorable(args.model)
        score = functools.partial(score_heads, engine=args.engine, address=args.address)
        start = time.perf_counter()
        result = score(model, tokenizer, examples, by=args.by)
        seconds = time.perf_counter() - start
        other = score(model, tokenizer, held, by=args.by) if held else None
        if args.compare:
            second, second_tokenizer = load_scorable(args.compare)
            rival = score(second, second_tokenizer, examples)
    except (ExampleError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    n_layers, n_heads = result.accuracy.shape
    print(
        f"model: {model.load_report.source} ({n_layers} layers x {n_heads} heads); "
        f"{len(examples)} examples scored in {seconds:.2f} s; {result.n} counted, {excluded_line(result)}"
    )
    print(f"baselines: nearest {result.baselines['nearest']:.3f}, first {result.baselines['first']:.3f}")
    print_heads(result, args.top)
    print_baselines(result)
    if args.by:
        print_groups(result)
    if is_gap(result):
        print_gap(result, args.file)
    if is_winogender(result) and {"male", "female"} <= {d.example.value("gender") for d in result.details}:
        print_winogender(result)
    if other is not None:
        h = held_out_best(result, other)
        bl, bh, ba = h.best_there
        print(
            f"held out: L{h.layer}H{h.head}, chosen on {args.file} ({h.chosen_accuracy:.3f} there), scores "
            f"{h.accuracy:.3f} [{h.interval[0]:.3f}, {h.interval[1]:.3f}] on {args.validate_on} ({h.n} counted, "
            f"{excluded_line(other)}); baselines there: nearest {h.baselines['nearest']:.3f}, first "
            f"{h.baselines['first']:.3f}; that file's own best, L{bl}H{bh} {ba:.3f}, is chosen on it (optimistic)"
        )
        if args.by:
            print_groups(other)
        if is_gap(other):
            print_gap(other, args.validate_on, (h.layer, h.head))
    if args.compare:
        c = compare_models(result, rival)
        (la, ha, aa), (lb, hb, ab) = c.best_a, c.best_b
        print(
            f"compare: {model.load_report.source} best L{la}H{ha} {aa:.3f} vs {second.load_report.source} best "
            f"L{lb}H{hb} {ab:.3f} ({rival.n} counted, {excluded_line(rival)}); on {c.test.n} examples both count: "
            f"{c.test.only_a} right only for the first, {c.test.only_b} only for the second, exact McNemar "
            f"p = {c.test.p:.3g}"
        )
    if args.csv:
        write_csv(result, args.csv, other, model=model.load_report.source, suite=args.file)
        print(f"all {n_layers * n_heads} heads written to {args.csv}")
    return 0
