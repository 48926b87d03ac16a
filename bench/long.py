"""Exact maps of long inputs (attention.long_maps) against transformers' eager forward with every map, and against
our fused forward with no map (the floor), on one random Llama-shaped model: time and peak memory.

    python bench/long.py [--lengths 1024 2048 4096 8192] [--eager-max 4096] [--blocks 256] [--tile 512]
                         [--threads 2] [--device auto|cpu|cuda]
    python bench/long.py --model smollm2 [--lengths 2048 4096 8192] [--eager-max 2048]

--model smollm2: the bundled writer (SmolLM2-135M, 30 layers × 9 heads of 64, 3 key/value heads, 576 wide, its
GGUF's weights), run as the page runs a long text: `long_run` within the server's default bound for a long run
(512 MB: past it, a few layer inputs kept and q and k made again), every head's thumbnail and strongest entry,
then a 16 × 16 tile of a layer made again (the first made again, then one of the same run) and a row; eager is
transformers' LlamaForCausalLM on the same file (eager attention, output_attentions).

On the CPU (float32): 4 layers × 8 heads of 64 (2 key/value heads), 512 wide, a 1,000-token vocabulary, built here
from a LlamaConfig with random weights (never downloaded), at 1k / 2k / 4k / 8k tokens. On a GPU when one is present
(bfloat16): Llama-3.2-1B's shape (16 layers × 32 heads of 64, 8 key/value heads, 2,048 wide), at 8k / 16k / 32k.
Ours is the long pass (`long_maps(..., pool=--blocks)`: the forward keeping q, k and each row's log-sum-exp, every
head's --blocks × --blocks mean and max blocks in every layer made from the scores its output is made of), reading
those blocks, one --tile × --tile tile and one whole row. Eager is transformers'
LlamaModel(attn_implementation="eager", output_attentions=True); on the CPU it is skipped past --eager-max tokens
(its maps alone are layers · H · L² · 4 bytes: 8 GiB at 8k, which would exhaust the machine), on a GPU it runs and
"out of memory" is printed when it does not fit. Each (method, length) runs in a fresh process: one call after a
warm-up at 64 tokens, its wall time, and its peak memory above what the process held just before (the model's and
the warm-up's): peak RSS on the CPU, peak allocated GPU memory on a GPU. Before the table, ours and eager are
compared at 256 tokens (every layer's and head's map, float32: to 1e-5).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fused import _reset_peak, _status_mb  # noqa: E402

from attention.core.request import MapRequest  # noqa: E402
from attention.load.convert import convert_checkpoint, copy_weights  # noqa: E402
from attention.long_maps import long_maps  # noqa: E402
from attention.models import FAMILIES, Transformer  # noqa: E402

ROPE = dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=8192)  # fmt: skip
LONGEST = 131072  # max_position_embeddings, as Llama-3.2-1B's
SHAPES = {  # device type -> (LlamaConfig's arguments, lengths)
    "cpu": (
        dict(vocab_size=1000, hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
             head_dim=64, intermediate_size=2048, rope_parameters=ROPE),
        [1024, 2048, 4096, 8192],
    ),
    "cuda": (  # Llama-3.2-1B
        dict(vocab_size=128256, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
             num_key_value_heads=8, head_dim=64, intermediate_size=8192, rope_parameters=ROPE),
        [8192, 16384, 32768],
    ),
}  # fmt: skip
METHODS = ("fused", "ours", "eager")
WRITER_BOUND = 512 * 2**20  # ui/serve/settings.py's default ATTENTION_LONG_MAX_MB


def models(device: torch.device, longest: int, which: str):
    """Ours (converted from transformers' tensors) or transformers' eager LlamaModel, random weights (seed 0), on
    `device`, bfloat16 on a GPU."""
    from transformers import LlamaConfig, LlamaModel

    values = dict(SHAPES[device.type][0], max_position_embeddings=max(longest, LONGEST))
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    theirs = LlamaModel(LlamaConfig(**values, attn_implementation="eager")).eval()
    if which == "eager":
        return theirs.to(device=device, dtype=dtype)
    family = FAMILIES["llama"]
    ours = Transformer(family.read_config(theirs.config.to_dict())).eval()
    copy_weights(ours, convert_checkpoint(family, theirs.state_dict())[0])
    del theirs
    return ours.to(device=device, dtype=dtype)


def stopwatch(clock: dict[str, float], device: torch.device):
    """timed(step, fn): fn's result, its wall and CPU seconds put in `clock` as step and "step cpu" (a GPU's work
    waited for)."""

    def timed(step: str, fn):
        start, cpu = time.perf_counter(), time.process_time()
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        clock[step], clock[step + " cpu"] = time.perf_counter() - start, time.process_time() - cpu
        return out

    return timed


def writer(which: str):
    """The bundled writer: ours as the app loads it, or transformers' eager model on the same GGUF file."""
    from attention.load.loading import load_model
    from attention.load.sources import WRITER_NAME, writer_file

    if which != "eager":
        return load_model(WRITER_NAME)[0]
    root = Path(__file__).resolve().parent.parent / "tests"
    sys.path[1:1] = [str(root / "helpers"), str(root / "families")]
    from test_gguf import transformers_gguf  # transformers' GGUF loader, eager attention

    return transformers_gguf(writer_file())


def work_writer(which: str, model, length: int) -> dict[str, float]:
    """The writer's call to time: {step: seconds} (and the run's kept megabytes)."""
    from attention.runs.inputs import Encoded
    from attention.runs.longrun import long_run

    ids = torch.randint(100, 40000, (1, length), generator=torch.Generator().manual_seed(length))
    clock: dict[str, float] = {}
    timed = stopwatch(clock, torch.device("cpu"))
    with torch.inference_mode():
        if which == "fused":
            timed("fused", lambda: model(ids, request=MapRequest(layers=(), keep_hidden=False)))
        elif which == "eager":
            timed("eager", lambda: model(ids, output_attentions=True))
        else:
            ones, zeros, tokens = torch.ones_like(ids), torch.zeros_like(ids), ["x"] * length
            enc = Encoded(ids, ones, zeros, tokens, [0] * length, [0] * length, [(0, 1)] * length, length, None)
            run = timed("pass", lambda: long_run(model, enc, bound=WRITER_BOUND))
            maps, rows = run.maps, slice(length // 2, length // 2 + 16)
            timed("tile", lambda: maps.tile(17, 0, rows, slice(0, 16)))  # a layer made again where inputs are kept
            timed("tile again", lambda: maps.tile(18, 3, rows, slice(0, 16)))  # the same run of layers
            timed("row", lambda: maps.row(17, 0, length - 1))
            clock["kept MB"], clock["every"] = maps.nbytes / 2**20, maps.keep.every or 0
    return clock


def work(which: str, model, length: int, blocks: int, tile: int, device: torch.device):
    """The call to time and measure: returns {step: seconds}."""
    ids = torch.randint(0, 1000, (1, length), generator=torch.Generator().manual_seed(length)).to(device)
    clock: dict[str, float] = {}
    timed = stopwatch(clock, device)
    with torch.inference_mode():
        if which == "fused":
            timed("fused", lambda: model(ids, request=MapRequest(layers=(), keep_hidden=False)))
        elif which == "eager":
            timed("eager", lambda: model(ids, output_attentions=True))
        else:
            maps = timed("pass", lambda: long_maps(model, ids, pool=min(blocks, length)))
            n_layers, H, L, _ = maps.shape
            every = [(layer, head) for layer in range(n_layers) for head in range(H)]
            timed("blocks", lambda: [maps.blocks(layer, head, min(blocks, L)) for layer, head in every])
            middle = slice(L // 2, L // 2 + tile)
            timed("tile", lambda: maps.tile(n_layers - 1, 0, middle, slice(0, tile)))
            timed("row", lambda: maps.tile(n_layers - 1, 0, slice(L - 1, L), slice(None)))
    return clock


def child(which: str, length: int, blocks: int, tile: int, device: torch.device, model_name: str = "") -> dict:
    if model_name == "smollm2":
        model = writer(which)
        work_writer(which, model, 64)  # lazy set-up is not the call's
        reset = _reset_peak()
        baseline = _status_mb("VmRSS")
        clock = work_writer(which, model, length)
        return {"clock": clock, "peak_mb": _status_mb("VmHWM") - baseline if reset else float("nan")}
    model = models(device, length, which)
    work(which, model, 64, 8, 8, device)  # lazy set-up is not the call's
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        baseline = torch.cuda.memory_allocated(device)
        try:
            clock = work(which, model, length, blocks, tile, device)
        except torch.OutOfMemoryError:
            return {"oom": True}
        return {"clock": clock, "peak_mb": (torch.cuda.max_memory_allocated(device) - baseline) / 2**20}
    reset = _reset_peak()
    baseline = _status_mb("VmRSS")
    clock = work(which, model, length, blocks, tile, device)
    return {"clock": clock, "peak_mb": _status_mb("VmHWM") - baseline if reset else float("nan")}


def run_child(which: str, length: int, args, device: torch.device) -> dict:
    command = [sys.executable, __file__, "--child", which, "--lengths", str(length), "--blocks", str(args.blocks),
               "--tile", str(args.tile), "--threads", str(args.threads), "--device", str(device),
               "--model", args.model]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def check(device: torch.device, length: int = 256) -> float:
    """max |Δ| between ours (every layer's and head's tile) and eager's maps at `length` tokens."""
    ours, theirs = models(device, length, "ours"), models(device, length, "eager")
    ids = torch.randint(0, 1000, (1, length), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.inference_mode():
        maps, reference = long_maps(ours, ids), theirs(ids, output_attentions=True).attentions
    every = slice(None)
    return max(
        float(abs(maps.tile(layer, head, every, every) - reference[layer][0, head].float().cpu().numpy()).max())
        for layer in range(len(reference))
        for head in range(reference[layer].size(1))
    )


def cell(result: dict, step: str, places: int = 2) -> str:
    if result.get("oom"):
        return "out of memory"
    if "failed" in result:
        return "failed"
    if "skipped" in result:
        return "skipped"
    return f"{result['clock'][step]:.{places}f}"


def memory(result: dict) -> str:
    return f"{result['peak_mb']:.0f}" if "peak_mb" in result else cell(result, "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", help="default: 1k-8k on the CPU, 8k-32k on a GPU")
    parser.add_argument("--eager-max", type=int, default=4096, help="on the CPU, eager runs up to this many tokens")
    parser.add_argument("--blocks", type=int, default=256, help="each map pooled into blocks × blocks")
    parser.add_argument("--tile", type=int, default=512, help="one tile of tile × tile")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="auto", help="auto (cuda when present, else cpu), cpu, cuda")
    parser.add_argument("--model", default="", choices=("", "smollm2"), help="smollm2: the bundled writer")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    name = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device.replace("auto", "cpu")
    device = torch.device(name)
    if args.child:
        print(json.dumps(child(args.child, args.lengths[0], args.blocks, args.tile, device, args.model)))
        return
    if args.model == "smollm2":
        main_writer(args, device)
        return
    shape, lengths = SHAPES[device.type]
    lengths = args.lengths or lengths
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {args.threads} threads"
    print(
        f"device: {device} ({where}); Llama-shaped, {shape['num_hidden_layers']} layers × "
        f"{shape['num_attention_heads']} heads of 64 ({shape['num_key_value_heads']} K/V heads), "
        f"{shape['hidden_size']} wide, random weights, {'bfloat16' if device.type == 'cuda' else 'float32'}"
    )
    print(f"ours against eager's maps at 256 tokens: max |Δ| {check(device):.1e}")
    print(f"ours: the long pass pooling every head into {args.blocks}×{args.blocks} mean and max blocks in every "
          f"layer, then reading them, one {args.tile}×{args.tile} tile, one row; wall seconds ((pass + blocks) / "
          "fused also by CPU time, steadier on a busy machine), MB of peak memory above the model's")  # fmt: skip
    if device.type == "cpu":
        print(f"eager: skipped past {args.eager_max:,} tokens (its maps alone: layers · H · L² · 4 bytes)")
    print(f"{'tokens':>6} {'fused':>6} {'pass':>6} {'blocks':>7} {'pass+blocks/fused':>17} {'(cpu time)':>10} "
          f"{'tile':>6} {'row':>6} {'eager':>13} {'fused MB':>8} {'ours MB':>8} {'eager MB':>13}")  # fmt: skip
    for length in lengths:
        results = {}
        for which in METHODS:
            skip = which == "eager" and device.type == "cpu" and length > args.eager_max
            results[which] = {"skipped": True} if skip else run_child(which, length, args, device)
        fused, ours, eager = (results[m] for m in METHODS)
        both = "clock" in ours and "clock" in fused
        whole = f"{(ours['clock']['pass'] + ours['clock']['blocks']) / fused['clock']['fused']:.2f}" if both else "-"
        cpu = ours["clock"]["pass cpu"] + ours["clock"]["blocks cpu"] if both else 0.0
        cpu_ratio = f"{cpu / fused['clock']['fused cpu']:.2f}" if both else "-"
        print(
            f"{length:>6} {cell(fused, 'fused'):>6} {cell(ours, 'pass'):>6} {cell(ours, 'blocks', 3):>7} {whole:>17} "
            f"{cpu_ratio:>10} {cell(ours, 'tile', 3):>6} {cell(ours, 'row', 3):>6} {cell(eager, 'eager'):>13} "
            f"{memory(fused):>8} {memory(ours):>8} {memory(eager):>13}",
            flush=True,
        )


def main_writer(args, device: torch.device) -> None:
    lengths = args.lengths or [2048, 4096, 8192]
    print(
        f"SmolLM2-135M (the bundled writer: 30 layers × 9 heads of 64, 3 K/V heads), CPU, {args.threads} threads, "
        f"float32; ours: the page's long run within {WRITER_BOUND / 2**20:.0f} MB (pass, thumbnails, strongest "
        "entries), a 16×16 tile of layer 17 (made again where layer inputs are kept), one of layer 18 (the same "
        "run), layer 17's last row; eager: transformers on the same file, skipped past --eager-max tokens"
    )
    print(
        f"{'tokens':>6} {'fused':>6} {'ours':>6} {'ours/fused':>10} {'(cpu)':>6} {'every':>5} {'kept MB':>7} "
        f"{'tile':>6} {'again':>6} {'row':>6} {'eager':>7} {'fused MB':>8} {'ours MB':>7} {'eager MB':>8}"
    )
    for length in lengths:
        results = {}
        for which in METHODS:
            skip = which == "eager" and length > args.eager_max
            results[which] = {"skipped": True} if skip else run_child(which, length, args, device)
        fused, ours, eager = (results[m] for m in METHODS)
        both = "clock" in ours and "clock" in fused
        ratio = f"{ours['clock']['pass'] / fused['clock']['fused']:.2f}" if both else "-"
        cpu = f"{ours['clock']['pass cpu'] / fused['clock']['fused cpu']:.2f}" if both else "-"
        every = f"{ours['clock']['every']:.0f}" if "clock" in ours else "-"
        kept = f"{ours['clock']['kept MB']:.0f}" if "clock" in ours else "-"
        print(
            f"{length:>6} {cell(fused, 'fused'):>6} {cell(ours, 'pass'):>6} {ratio:>10} {cpu:>6} {every:>5} "
            f"{kept:>7} {cell(ours, 'tile'):>6} {cell(ours, 'tile again', 3):>6} {cell(ours, 'row'):>6} "
            f"{cell(eager, 'eager'):>7} {memory(fused):>8} {memory(ours):>7} {memory(eager):>8}",
            flush=True,
        )


if __name__ == "__main__":
    main()
