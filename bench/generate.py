"""Writing with every attention map kept: our attention.generate against transformers' generate(output_attentions=
True, return_dict_in_generate=True), greedy, on the same random checkpoints and the same prompt ids.

    python bench/generate.py [--quick] [--new 32] [--prompt 32] [--repeats 3] [--threads 2]

Checkpoints (random weights, a 8000-token vocabulary): GPT-2 small's shape (12 layers, 768 wide, 12 heads),
a small Llama with grouped-query attention (8 layers, 512 wide, 8 query and 2 key/value heads), and tiny BART
and T5 encoder-decoders. Their generation configs name no end-of-sequence token, so both write every token.
Time: each (model, side) in a fresh process on the CPU, the median of `repeats` calls after one warm-up call.

Memory: each (model, side) in another fresh process with no warm-up, one call measured. After the model is
loaded and every weight read once (transformers maps a checkpoint's file lazily, so a first call would
otherwise count reading the weights; our LM head, which theirs holds as a weight, is read once per model from
the checkpoint by attention.generate.lm_head, so it is read there with the weights), the kernel's high-water
mark of the resident set is reset to the current resident size (writing 5 to /proc/self/clear_refs), that size
is the baseline, and the call's memory is VmHWM minus the baseline, both read from /proc/self/status: the most
the call added at any moment, the maps it returns included, and the one-time costs of a first call (lazy
imports, library code paged in) too. The CPU has no allocator statistics as torch.cuda's, and tracemalloc does
not see torch's tensors, so the resident set is what is measured; a peak after a warm-up call would instead
mostly show what the allocator kept from that call.

Prints tokens per second, theirs / ours in time (above 1: ours is faster), each side's MB and ours / theirs in
memory (below 1: ours uses less), and whether the written ids are the same.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VOCAB = 8000
SHAPES = {  # name -> (transformers config class, arguments, task class)
    "gpt2-small": ("GPT2Config", dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024), "GPT2LMHeadModel"),
    "llama-gqa": (
        "LlamaConfig",
        dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
             intermediate_size=2048),
        "LlamaForCausalLM",
    ),
    "bart-tiny": (
        "BartConfig",
        dict(d_model=256, encoder_layers=4, decoder_layers=4, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=1024, decoder_ffn_dim=1024, max_position_embeddings=256),
        "BartForConditionalGeneration",
    ),
    "t5-tiny": (
        "T5Config",
        dict(d_model=256, d_kv=32, d_ff=1024, num_layers=4, num_decoder_layers=4, num_heads=4),
        "T5ForConditionalGeneration",
    ),
}  # fmt: skip


class FixedPrompt:
    """A tokenizer stand-in: any text becomes the same prompt ids; ids are shown as their numbers."""

    def __init__(self, ids: list[int]):
        self.ids = ids

    def __call__(self, text, return_tensors=None):
        return {"input_ids": torch.tensor([self.ids])}

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def save(name: str, folder: Path) -> Path:
    import transformers

    config_class, values, task_class = SHAPES[name]
    config = getattr(transformers, config_class)(vocab_size=VOCAB, **values)
    torch.manual_seed(0)
    getattr(transformers, task_class)(config).save_pretrained(str(folder))
    start = {"decoder_start_token_id": 0} if config.is_encoder_decoder else {}
    (folder / "generation_config.json").write_text(json.dumps(start))  # no end of sequence: every token written
    write_tokenizer(folder)
    return folder


def write_tokenizer(folder: Path) -> None:
    """A word-level tokenizer.json of VOCAB tokens t0 ... (load_model reads one; the prompt is given as ids)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(
        models.WordLevel({f"t{i}": i for i in range(VOCAB - 8)}, unk_token="t0")
    )  # room for added specials
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))


def writer(which: str, folder: Path, prompt: list[int], new: int):
    """In this process: the model loaded, and a call that writes `new` tokens after `prompt` and returns the ids."""
    if which == "ours":
        from attention import generate, load_model
        from attention.generate import lm_head

        model, _ = load_model(folder)
        tokenizer = FixedPrompt(prompt)
        resident(model)
        lm_head(model)  # read from the checkpoint once and kept with the model: theirs holds it as a weight
        return lambda: generate(model, tokenizer, "", max_new_tokens=new).ids
    import transformers

    config = transformers.AutoConfig.from_pretrained(str(folder))
    task = transformers.AutoModelForSeq2SeqLM if config.is_encoder_decoder else transformers.AutoModelForCausalLM
    ref = task.from_pretrained(str(folder), attn_implementation="eager").eval()
    resident(ref)
    ids = torch.tensor([prompt])

    def call():
        with torch.inference_mode():
            out = ref.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, num_beams=1,
                max_new_tokens=new, min_new_tokens=new, output_attentions=True, return_dict_in_generate=True,
                pad_token_id=0,
            )  # fmt: skip
        return out.sequences

    return call


def resident(model: torch.nn.Module) -> None:
    """Every weight read once, so that weights mapped from the file but not yet read are resident before a call
    is measured (transformers maps safetensors lazily: its first call would otherwise read 357 MB of GPT-2 small)."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.sum()


def time_side(which: str, folder: Path, prompt: list[int], new: int, repeats: int) -> dict:
    """In this process: the median seconds per call after one warm-up call, and the ids written."""
    call = writer(which, folder, prompt, new)
    written = call()  # warm-up: one-time costs (lazy imports, the LM head read) stay out of the time
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return dict(seconds=sorted(times)[len(times) // 2], ids=written[0].tolist())


def memory_side(which: str, folder: Path, prompt: list[int], new: int) -> dict:
    """In this process, fresh: the MB one first call adds to the resident set at its peak (the module's docstring)."""
    call = writer(which, folder, prompt, new)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from the current resident size
    before = status_mb("VmRSS")
    call()
    return dict(peak_mb=status_mb("VmHWM") - before)


def status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def in_child(which: str, measure: str, folder: Path, args) -> dict:
    """One side's time or memory, measured in a fresh process."""
    argv = [sys.executable, __file__, "--child", which, measure, str(folder), "--new", str(args.new)]
    argv += ["--prompt", str(args.prompt), "--repeats", str(args.repeats), "--threads", str(args.threads)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{which} on {folder.name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="16 new tokens after a 16-token prompt, 2 repeats")
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "MEASURE", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.new, args.prompt, args.repeats = 16, 16, 2
    torch.set_num_threads(args.threads)
    prompt = [(7 * i + 3) % VOCAB for i in range(args.prompt)]
    if args.child:
        which, measure, folder = args.child
        if measure == "time":
            print(json.dumps(time_side(which, Path(folder), prompt, args.new, args.repeats)))
        else:
            print(json.dumps(memory_side(which, Path(folder), prompt, args.new)))
        return
    print(f"cpu, {args.threads} threads; {args.prompt} prompt tokens, {args.new} new, greedy, every map kept")
    print(f"{'model':<11} {'ours tok/s':>10} {'theirs tok/s':>12} {'time x':>7} {'ours MB':>8} {'theirs MB':>9} "
          f"{'mem x':>6}  ids")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in SHAPES:
            folder = save(name, Path(tmp) / name)
            ours, theirs = ({**in_child(side, "time", folder, args), **in_child(side, "memory", folder, args)}
                            for side in ("ours", "theirs"))  # fmt: skip
            rate_ours, rate_theirs = args.new / ours["seconds"], args.new / theirs["seconds"]
            memory = ours["peak_mb"] / theirs["peak_mb"] if theirs["peak_mb"] else float("nan")
            same = "equal" if ours["ids"] == theirs["ids"] else "DIFFER"
            print(
                f"{name:<11} {rate_ours:>10.1f} {rate_theirs:>12.1f} {theirs['seconds'] / ours['seconds']:>7.2f} "
                f"{ours['peak_mb']:>8.1f} {theirs['peak_mb']:>9.1f} {memory:>6.2f}  {same}"
            )
    print("time x: theirs ÷ ours in seconds per call; mem x: ours ÷ theirs in MB a fresh process's first call adds")


if __name__ == "__main__":
    main()
