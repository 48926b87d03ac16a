"""Explicit attention (the (B, H, L, S) probabilities in memory) against PyTorch's fused kernel.

    python bench/fused.py [--quick] [--lengths 128 256 ...] [--repeats 30] [--budget 20] [--threads 2]
                          [--out data/fused_bench.json]

Compares `attention.core.dot_product.scaled_dot_product_attention`, which builds every attention probability
because the views show them, with `torch.nn.functional.scaled_dot_product_attention`, which on CPU
runs a fused (flash-style) kernel that never holds the full (L, S) matrix. Inputs are random
q, k, v of shape (B=1, H=12, L, d=32), the shape of the default model's heads, without a mask.

For each length: the outputs must agree (allclose), else the script stops with exit code 1;
median time, the two implementations run in turn (bench/forward.py's `interleaved_medians`);
peak memory, each (implementation, length) once in a fresh Python process (see `peak_in_child`).
The full run writes data/fused_bench.json; `--quick` (128, 512 and 1024 tokens) writes nothing
unless --out is given.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from attention.core.dot_product import scaled_dot_product_attention  # noqa: E402
from bench.forward import interleaved_medians  # noqa: E402

B, H, D_HEAD = 1, 12, 32
LENGTHS = (128, 256, 512, 1024, 2048, 4096)
QUICK_LENGTHS = (128, 512, 1024)
ATOL, RTOL = 1e-5, 1e-4
MB = 2**20
IMPLEMENTATIONS = {
    "explicit": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],  # (output, probs) -> output
    "fused": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
}
TIME_NOTE = (
    "median of per-call wall time (time.perf_counter), the two implementations called in turn "
    "after one warm-up call each; torch.inference_mode; inputs built once per length"
)
MEMORY_NOTE = (
    "peak resident set size of a fresh process per (implementation, length), above a baseline "
    "taken after importing torch, building q, k, v and one 8-token warm-up call; {how}; "
    "MB = 2**20 bytes"
)
AGREEMENT_NOTE = f"outputs compared with torch.allclose(atol={ATOL}, rtol={RTOL}) at every length before timing"


def make_inputs(length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, length, D_HEAD, generator=generator) for _ in range(3))  # 3 × (B, H, L, d)


# ---- peak memory, measured in a child process ----------------------------------


def _status_mb(field: str) -> float:
    """VmRSS (resident now) or VmHWM (peak resident since start or the last reset) in MB."""
    kib = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    return int(kib.group(1)) / 1024


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux ≥ 4.0); False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_in_child(implementation: str, length: int, threads: int) -> dict:
    """Run in a fresh process: how far one call raises the peak RSS above what its inputs hold.

    The peak mark is reset (clear_refs) just before the call and read from VmHWM after it; where the
    mark cannot be reset, ru_maxrss before and after is used, which undercounts a call that peaks
    below an earlier high-water mark (such as torch's import).
    """
    torch.set_num_threads(threads)
    fn = IMPLEMENTATIONS[implementation]
    q, k, v = make_inputs(length)
    with torch.inference_mode():
        fn(*make_inputs(8, seed=1))  # lazy kernel and thread-pool set-up is not the call's memory
        gc.collect()
        if _reset_peak():
            how, baseline = "peak mark reset via /proc/self/clear_refs, read from VmHWM", _status_mb("VmRSS")
            output = fn(q, k, v)
            peak = _status_mb("VmHWM")
        else:
            how = "ru_maxrss before and after (peak mark could not be reset)"
            baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            output = fn(q, k, v)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert output.shape == q.shape
    return {"peak_mb": peak - baseline, "baseline_mb": baseline, "how": how}


def measure_peak(implementation: str, length: int, threads: int) -> dict:
    """`peak_in_child` in a new interpreter, so no earlier run's allocations are reused."""
    command = [sys.executable, __file__, "--child", implementation, str(length), "--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"memory run {implementation} at {length} tokens failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- timing and agreement, in this process -------------------------------------


def check_agreement(q, k, v) -> tuple[float, float]:
    """Max |explicit - fused| and the seconds one call of both took; SystemExit(1) if they differ."""
    start = time.perf_counter()
    with torch.inference_mode():
        explicit, fused = IMPLEMENTATIONS["explicit"](q, k, v), IMPLEMENTATIONS["fused"](q, k, v)
    seconds = time.perf_counter() - start
    diff = float((explicit - fused).abs().max())
    if not torch.allclose(explicit, fused, atol=ATOL, rtol=RTOL):
        print(f"OUTPUTS DIFFER at {q.size(2)} tokens: max |explicit - fused| = {diff:.3g}", file=sys.stderr)
        raise SystemExit(1)
    return diff, seconds


def time_length(length: int, repeats: int, budget: float) -> dict:
    """Agreement, then interleaved median times; fewer repeats (at least 3) when one pair of calls
    is slow enough that `repeats` of them would pass `budget` seconds."""
    q, k, v = make_inputs(length)
    diff, pair_seconds = check_agreement(q, k, v)
    repeats = max(3, min(repeats, int(budget / pair_seconds)))
    with torch.inference_mode():
        t_explicit, t_fused = interleaved_medians(
            [lambda: IMPLEMENTATIONS["explicit"](q, k, v), lambda: IMPLEMENTATIONS["fused"](q, k, v)], repeats
        )
    return {
        "tokens": length,
        "explicit_ms": t_explicit * 1e3,
        "fused_ms": t_fused * 1e3,
        "repeats": repeats,
        "max_abs_diff": diff,
    }


# ---- report ------------------------------------------------------------------


def machine_info(threads: int) -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": threads,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def probs_mb(length: int) -> float:
    """Size of one float32 (B, H, L, L) buffer: what the explicit path must hold at least."""
    return B * H * length * length * 4 / MB


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}" if b > 0 else "n/a"


def print_table(rows: list[dict]) -> None:
    print(
        f"{'tokens':>7} {'explicit ms':>12} {'fused ms':>9} {'ratio':>6} {'explicit MB':>12} "
        f"{'fused MB':>9} {'ratio':>6} {'(B,H,L,L) MB':>13} {'max |diff|':>11}"
    )
    for r in rows:
        print(
            f"{r['tokens']:>7} {r['explicit_ms']:>12.2f} {r['fused_ms']:>9.2f} "
            f"{ratio(r['explicit_ms'], r['fused_ms']):>6} {r['explicit_peak_mb']:>12.1f} "
            f"{r['fused_peak_mb']:>9.1f} {ratio(r['explicit_peak_mb'], r['fused_peak_mb']):>6} "
            f"{probs_mb(r['tokens']):>13.1f} {r['max_abs_diff']:>11.1e}"
        )


def run(lengths: list[int], repeats: int, budget: float, threads: int) -> dict:
    machine = machine_info(threads)
    print(
        f"B={B}, H={H}, d={D_HEAD}, float32, no mask; torch {machine['torch']} ({machine['cpu_capability']}), "
        f"{threads} threads, {machine['cpu']}, {machine['cores']} CPUs, "
        f"load {machine['load_average_at_start']}",
        flush=True,
    )
    rows, how = [], None
    for length in lengths:
        row = time_length(length, repeats, budget)
        for implementation in IMPLEMENTATIONS:
            peak = measure_peak(implementation, length, threads)
            row[f"{implementation}_peak_mb"] = round(peak["peak_mb"], 2)
            how = peak["how"]
        row["explicit_ms"], row["fused_ms"] = round(row["explicit_ms"], 3), round(row["fused_ms"], 3)
        rows.append(row)
        print(f"  {length} tokens done ({row['repeats']} repeats)", file=sys.stderr)
    print_table(rows)
    print(
        f"ratios are explicit / fused. time: {TIME_NOTE}.\nmemory: {MEMORY_NOTE.format(how=how)}.\n"
        f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    shape = {"batch": B, "heads": H, "head_dim": D_HEAD, "dtype": "float32", "mask": None}
    method = {"time": TIME_NOTE, "memory": MEMORY_NOTE.format(how=how), "agreement": AGREEMENT_NOTE}
    return {"machine": machine, "shape": shape, "method": method, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(map(str, QUICK_LENGTHS))} tokens")
    ap.add_argument("--lengths", type=int, nargs="+", help=f"token counts (default {' '.join(map(str, LENGTHS))})")
    ap.add_argument("--repeats", type=int, default=30, help="timed calls of each implementation per length, at most")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds of timed calls per length, about")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, help="JSON file (default data/fused_bench.json, none with --quick)")
    ap.add_argument("--child", nargs=2, metavar=("IMPLEMENTATION", "TOKENS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        print(json.dumps(peak_in_child(args.child[0], int(args.child[1]), args.threads)))
        return
    lengths = args.lengths or (QUICK_LENGTHS if args.quick else LENGTHS)
    result = run(sorted(lengths), args.repeats, args.budget, args.threads)
    out = args.out or (None if args.quick else ROOT / "data" / "fused_bench.json")
    if out is not None:
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
