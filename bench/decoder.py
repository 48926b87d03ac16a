"""A Llama-style decoder: our forward keeping one layer's attention maps against transformers' eager
LlamaModel returning every layer's maps, same random weights, same inputs.

    python bench/decoder.py [--lengths 256 1024] [--repeats 5] [--threads 2] [--layer 4]

The shape is Llama-3.2-1B's scaled down for a CPU: head width 64, 4 query heads per key/value
head, llama3 rope scaling, a feed-forward 4x the width; but 512 wide (1B: 2048), 8 layers (16),
8 query and 2 key/value heads (32 and 8), a 1000-token vocabulary (128256). Ours is run with
`maps_for={layer}`: that layer's maps, every other layer through torch's fused attention.
Prints per length the median time per forward and the peak memory of one forward, each in a fresh
process (peak RSS above the process's resident size just before the call), and ours / theirs.
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
from attention.loading import convert_checkpoint, copy_weights  # noqa: E402
from attention.models import FAMILIES, Transformer  # noqa: E402
from forward import interleaved_medians  # noqa: E402
from fused import _reset_peak, _status_mb  # noqa: E402

SHAPE = dict(vocab_size=1000, hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
             head_dim=64, intermediate_size=2048, max_position_embeddings=4096, tie_word_embeddings=True,
             rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0,
                                  high_freq_factor=4.0, original_max_position_embeddings=2048))


def model_pair():
    """transformers' eager LlamaModel with random weights, and ours converted from its tensors."""
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    theirs = LlamaModel(LlamaConfig(**SHAPE, attn_implementation="eager")).eval()
    family = FAMILIES["llama"]
    ours = Transformer(family.read_config(theirs.config.to_dict())).eval()
    copy_weights(ours, convert_checkpoint(family, theirs.state_dict())[0])
    return ours, theirs


def forwards(ours, theirs, length: int, layer: int):
    ids = torch.randint(0, SHAPE["vocab_size"], (1, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones_like(ids)

    def run_ours():
        return ours(ids, mask, maps_for={layer}).attentions[layer]

    def run_theirs():
        return theirs(ids, attention_mask=mask, output_attentions=True).attentions[layer]

    return {"ours": run_ours, "theirs": run_theirs}


def peak_in_child(which: str, length: int, threads: int, layer: int) -> dict:
    torch.set_num_threads(threads)
    fn = forwards(*model_pair(), length, layer)[which]
    with torch.inference_mode():
        fn()  # lazy set-up is not the call's memory
        if not _reset_peak():
            return {"peak_mb": float("nan")}
        baseline = _status_mb("VmRSS")
        fn()
        return {"peak_mb": _status_mb("VmHWM") - baseline}


def measure_peak(which: str, length: int, threads: int, layer: int) -> float:
    command = [sys.executable, __file__, "--child", which, "--lengths", str(length), "--threads", str(threads),
               "--layer", str(layer)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layer", type=int, default=4, help="the layer whose maps ours keeps")
    parser.add_argument("--child", choices=["ours", "theirs"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(peak_in_child(args.child, args.lengths[0], args.threads, args.layer)))
        return
    torch.set_num_threads(args.threads)
    ours, theirs = model_pair()
    print(f"Llama-3.2-1B-like, scaled down: {SHAPE['hidden_size']} wide, {SHAPE['num_hidden_layers']} layers, "
          f"{SHAPE['num_attention_heads']} heads / {SHAPE['num_key_value_heads']} K/V heads of 64; "
          f"{args.threads} threads; ours keeps layer {args.layer}'s maps, transformers eager all of them")
    print(f"{'tokens':>6}  {'ours s':>8}  {'theirs s':>8}  {'time ratio':>10}  {'ours MB':>8}  {'theirs MB':>9}  "
          f"{'memory ratio':>12}")
    for length in args.lengths:
        fns = forwards(ours, theirs, length, args.layer)
        with torch.inference_mode():
            torch.testing.assert_close(fns["ours"](), fns["theirs"](), atol=1e-5, rtol=0)  # the same map
            mine, ref = interleaved_medians([fns["ours"], fns["theirs"]], args.repeats)
        peak_ours, peak_theirs = (measure_peak(w, length, args.threads, args.layer) for w in ("ours", "theirs"))
        print(f"{length:>6}  {mine:>8.3f}  {ref:>8.3f}  {mine / ref:>10.2f}  {peak_ours:>8.0f}  {peak_theirs:>9.0f}  "
              f"{peak_ours / peak_theirs:>12.2f}")


if __name__ == "__main__":
    main()
