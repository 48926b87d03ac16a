"""A Llama-style decoder: our forward keeping one layer's attention maps against transformers' eager
LlamaModel returning every layer's maps, same random weights, same inputs.

    python bench/decoder.py [--lengths 256 1024] [--repeats 5] [--threads 2] [--layer 4]
                            [--device auto|cpu|cuda] [--dtype auto|float32|bfloat16|float16]

The shape is Llama-3.2-1B's scaled down for a CPU: head width 64, 4 query heads per key/value
head, llama3 rope scaling, a feed-forward 4x the width; but 512 wide (1B: 2048), 8 layers (16),
8 query and 2 key/value heads (32 and 8), a 1000-token vocabulary (128256). Ours is run with
`MapRequest({layer})`: that layer's maps, every other layer through torch's fused attention.
Prints per length the median time per forward (seconds; milliseconds on a GPU) and the peak memory of
one forward, each in a fresh process (on the CPU: peak RSS above the process's resident size just before
the call; on a GPU: peak allocated GPU memory above what was allocated before it), and ours / theirs.
By default (auto) both run on CUDA in bfloat16 when a GPU is present (ours keeps its maps in float32,
transformers' eager returns bfloat16 ones), else on the CPU in float32; the first line says which.
Then, per causal family (GPT-2, GPT-NeoX, OPT, Phi, Phi-3, Qwen3, OLMo2, Gemma, Gemma2, Gemma3; bench/forward.py's
random checkpoints, 768 wide, 12 heads, `--family-layers` layers), the time per forward of ours keeping one layer's
maps against transformers' eager returning all of them, and the ratio, at the first of --lengths (--no-families:
the Llama table only).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from forward import DECODERS, family_pair, interleaved_medians  # noqa: E402
from fused import _reset_peak, _status_mb  # noqa: E402

from attention.core.request import MapRequest  # noqa: E402
from attention.load.convert import convert_checkpoint, copy_weights  # noqa: E402
from attention.models import FAMILIES, Transformer  # noqa: E402

SHAPE = dict(
    vocab_size=1000,
    hidden_size=512,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=64,
    intermediate_size=2048,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    rope_parameters=dict(
        rope_type="llama3",
        rope_theta=500000.0,
        factor=32.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=2048,
    ),
)


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device_and_dtype(device: str, dtype: str) -> tuple[torch.device, torch.dtype]:
    """ "auto": CUDA in bfloat16 when a GPU is present, else the CPU in float32."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch finds no CUDA GPU on this machine (use --device cpu or auto)")
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    return torch.device(device), DTYPES[dtype]


def model_pair(device: torch.device | None = None, dtype: torch.dtype = torch.float32):
    """transformers' eager LlamaModel with random weights, and ours converted from its tensors, both on
    `device` (the CPU by default) in `dtype`."""
    from transformers import LlamaConfig, LlamaModel

    device = device or torch.device("cpu")

    torch.manual_seed(0)
    theirs = LlamaModel(LlamaConfig(**SHAPE, attn_implementation="eager")).eval()
    family = FAMILIES["llama"]
    ours = Transformer(family.read_config(theirs.config.to_dict())).eval()
    copy_weights(ours, convert_checkpoint(family, theirs.state_dict())[0])
    return ours.to(device=device, dtype=dtype), theirs.to(device=device, dtype=dtype)


def forwards(ours, theirs, length: int, layer: int):
    device = next(ours.parameters()).device
    ids = torch.randint(0, SHAPE["vocab_size"], (1, length), generator=torch.Generator().manual_seed(length))
    ids = ids.to(device)
    mask = torch.ones_like(ids)

    def done(maps: torch.Tensor) -> torch.Tensor:  # a GPU's work is finished before the clock stops
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return maps

    def run_ours():
        return done(ours(ids, mask, request=MapRequest({layer})).attentions[layer])

    def run_theirs():
        return done(theirs(ids, attention_mask=mask, output_attentions=True).attentions[layer])

    return {"ours": run_ours, "theirs": run_theirs}


def peak_in_child(which: str, length: int, threads: int, layer: int, device: torch.device, dtype: torch.dtype) -> dict:
    torch.set_num_threads(threads)
    fn = forwards(*model_pair(device, dtype), length, layer)[which]
    with torch.inference_mode():
        fn()  # lazy set-up is not the call's memory
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
            fn()
            return {"peak_mb": (torch.cuda.max_memory_allocated(device) - baseline) / 2**20}
        if not _reset_peak():
            return {"peak_mb": float("nan")}
        baseline = _status_mb("VmRSS")
        fn()
        return {"peak_mb": _status_mb("VmHWM") - baseline}


def measure_peak(which: str, length: int, threads: int, layer: int, device: torch.device, dtype: torch.dtype) -> float:
    command = [
        sys.executable,
        __file__,
        "--child",
        which,
        "--lengths",
        str(length),
        "--threads",
        str(threads),
        "--layer",
        str(layer),
        "--device",
        str(device),
        "--dtype",
        str(dtype).removeprefix("torch."),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layer", type=int, default=4, help="the layer whose maps ours keeps")
    parser.add_argument("--device", default="auto", help="auto (cuda when present, else cpu), cpu, cuda or cuda:N")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", *DTYPES],
        help="the weights' dtype; auto: bfloat16 on a GPU, float32 on the CPU",
    )
    parser.add_argument("--family-layers", type=int, default=4, help="layers of each family's random model")
    parser.add_argument("--no-families", action="store_true", help="the Llama table only")
    parser.add_argument("--child", choices=["ours", "theirs"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    device, dtype = pick_device_and_dtype(args.device, args.dtype)
    if args.child:
        print(json.dumps(peak_in_child(args.child, args.lengths[0], args.threads, args.layer, device, dtype)))
        return
    torch.set_num_threads(args.threads)
    ours, theirs = model_pair(device, dtype)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {args.threads} threads"
    memory = "peak GPU memory allocated" if device.type == "cuda" else "peak RSS"
    print(
        f"Llama-3.2-1B-like, scaled down: {SHAPE['hidden_size']} wide, {SHAPE['num_hidden_layers']} layers, "
        f"{SHAPE['num_attention_heads']} heads / {SHAPE['num_key_value_heads']} K/V heads of 64; "
        f"ours keeps layer {args.layer}'s maps, transformers eager all of them"
    )
    print(f"device: {device} ({where}); weights {str(dtype).removeprefix('torch.')}; memory: {memory}")
    # a GPU's forward takes milliseconds: seconds to three places would show one significant digit
    unit, scale, places = ("ms", 1000, 2) if device.type == "cuda" else ("s", 1, 3)
    print(
        f"{'tokens':>6}  {'ours ' + unit:>8}  {'theirs ' + unit:>8}  {'time ratio':>10}  {'ours MB':>8}  "
        f"{'theirs MB':>9}  {'memory ratio':>12}"
    )
    for length in args.lengths:
        fns = forwards(ours, theirs, length, args.layer)
        with torch.inference_mode():
            # the same map: to float32's precision, or to a half dtype's rounding of probabilities (<= 1)
            atol = 1e-5 if dtype == torch.float32 else 2e-2
            torch.testing.assert_close(fns["ours"]().float(), fns["theirs"]().float(), atol=atol, rtol=0)
            mine, ref = interleaved_medians([fns["ours"], fns["theirs"]], args.repeats)
        peak_ours, peak_theirs = (
            measure_peak(w, length, args.threads, args.layer, device, dtype) for w in ("ours", "theirs")
        )
        print(
            f"{length:>6}  {mine * scale:>8.{places}f}  {ref * scale:>8.{places}f}  {mine / ref:>10.2f}  "
            f"{peak_ours:>8.0f}  {peak_theirs:>9.0f}  "
            f"{peak_ours / peak_theirs if peak_theirs else float('nan'):>12.2f}"
        )
    if not args.no_families:
        family_table(args.lengths[0], args.repeats, args.family_layers, device, dtype)


def family_table(length: int, repeats: int, layers: int, device: torch.device, dtype: torch.dtype) -> None:
    """Per causal family, ours keeping the middle layer's maps against transformers' eager keeping all of them."""
    unit, scale = ("ms", 1000) if device.type == "cuda" else ("s", 1)
    print(f"\nfamilies: random, 768 wide, 12 heads, {layers} layers, {length} tokens; ours keeps layer {layers // 2}'s")
    print(f"{'family':<12}  {'ours ' + unit:>8}  {'theirs ' + unit:>8}  {'time ratio':>10}")
    for family in DECODERS:
        pair = family_pair(family, layers)
        ours, theirs = (model.to(device=device, dtype=dtype) for model in pair)
        fns = forwards(ours, theirs, length, layers // 2)
        with torch.inference_mode():
            mine, ref = interleaved_medians([fns["ours"], fns["theirs"]], repeats)
        print(f"{family:<12}  {mine * scale:>8.3f}  {ref * scale:>8.3f}  {mine / ref:>10.2f}")
        del ours, theirs, pair


if __name__ == "__main__":
    main()
