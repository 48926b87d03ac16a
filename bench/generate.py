"""Writing with every attention map kept: our attention.generate against transformers' generate(output_attentions=
True, return_dict_in_generate=True), greedy, on the same random checkpoints and the same prompt ids.

    python bench/generate.py [--quick] [--new 32] [--prompt 32] [--repeats 3] [--threads 2] [--clock wall|cpu]
                             [--models gpt2-small llama-gqa ...]

Checkpoints (random weights, a 8000-token vocabulary): GPT-2 small's shape (12 layers, 768 wide, 12 heads),
a small Llama with grouped-query attention (8 layers, 512 wide, 8 query and 2 key/value heads), and tiny BART
and T5 encoder-decoders. Their generation configs name no end-of-sequence token, so both write every token.

Time: per model one fresh process holds both sides; each writes once as a warm-up (one-time costs: lazy
imports, kernels' code paged in, our LM head read), then the two take turns, `repeats` calls each, so both see
the same machine load. Before that the bench waits until other work on the machine keeps less than QUIET_CORES busy
(at most QUIET_WAIT_S), and each row ends with what it found and the cores other work kept busy while the calls
were timed. Each call is timed by the wall clock and by this process's CPU time; the medians of
both are printed, `--clock` says which one the tokens per second and `time x` read (wall by default). On a
machine shared with other work, time spent waiting for a core counts on neither side by the CPU clock (best
with --threads 1, where no worker thread spins while it waits).

Memory: each (model, side) in `--memory-runs` other fresh processes, the run of median MB kept (one process's
figure moves by a few tenths of a MB with where the allocator happens to place things: a tiny BART's 1.1-2.0 MB
over six runs). After the model is loaded and every weight read once
(transformers maps a checkpoint's file lazily; our LM head, which theirs holds as a weight, is read once per
model from the checkpoint by attention.writing.generate.lm_head, so it is read there with the weights), the side writes
2 tokens with the same settings as a warm-up, so that the code of every kernel its call runs is paged in; the
memory the allocator kept from it is handed back (glibc's malloc_trim). Then the kernel's high-water mark of
the resident set is reset to the current resident size (writing 5 to /proc/self/clear_refs), that size is the
baseline, and `MB` is VmHWM minus the baseline after the measured call: the most the call's data added at any
moment, the maps it returns included. `code MB` is what the resident file-backed pages (RssFile: library code
and mapped files) grew by during the measured call; near 0 shows the warm-up left no first-time code loading
in `MB`. The CPU has no allocator statistics as torch.cuda's, and tracemalloc does not see torch's tensors, so
the resident set is what is measured.

Prints the machine's load average before and after, tokens per second, theirs / ours in time (above 1: ours is
faster) by both clocks, each side's MB and ours / theirs in memory (below 1: ours uses less), and whether the
written ids are the same.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VOCAB = 8000
QUIET_CORES = 0.25  # other work's CPU, in cores, under which the machine counts as quiet for the timing
QUIET_WAIT_S = 90  # ... and the longest wait for that
SIDES = ("ours", "theirs")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
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


def writer(which: str, folder: Path, prompt: list[int]):
    """In this process: the model loaded, every weight read, and a call that writes `new` tokens after `prompt`
    and returns the ids."""
    if which == "ours":
        from attention import generate, load_model
        from attention.writing.generate import lm_head

        model, _ = load_model(folder)
        tokenizer = FixedPrompt(prompt)
        resident(model)
        lm_head(model)  # read from the checkpoint once and kept with the model: theirs holds it as a weight
        return lambda new: generate(model, tokenizer, "", max_new_tokens=new, maps_bound=None).ids  # as theirs
    import transformers

    config = transformers.AutoConfig.from_pretrained(str(folder))
    task = transformers.AutoModelForSeq2SeqLM if config.is_encoder_decoder else transformers.AutoModelForCausalLM
    ref = task.from_pretrained(str(folder), attn_implementation="eager").eval()
    resident(ref)
    ids = torch.tensor([prompt])

    def call(new: int) -> torch.Tensor:
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


def time_both(folder: Path, prompt: list[int], new: int, repeats: int) -> dict:
    """In this process: both sides, each warmed up by one call, then called in turn `repeats` times; per side the
    median seconds per call by the wall clock and by this process's CPU time, and the ids written."""
    calls = {side: writer(side, folder, prompt) for side in SIDES}
    written = {side: call(new)[0].tolist() for side, call in calls.items()}  # warm-up: one-time costs left out
    times: dict[str, dict[str, list[float]]] = {side: {clock: [] for clock in CLOCKS} for side in SIDES}
    for _ in range(repeats):
        for side, call in calls.items():
            start = {clock: read() for clock, read in CLOCKS.items()}
            call(new)
            for clock, read in CLOCKS.items():
                times[side][clock].append(read() - start[clock])
    return {
        side: {**{clock: statistics.median(t) for clock, t in times[side].items()}, "ids": written[side]}
        for side in SIDES
    }


def memory_side(which: str, folder: Path, prompt: list[int], new: int) -> dict:
    """In this process, fresh: the MB one call adds to the resident set at its peak after a 2-token warm-up, and
    the MB of file-backed pages it brought in (the module's docstring)."""
    call = writer(which, folder, prompt)
    call(2)  # warm-up: every kernel's code paged in
    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc: free heap pages back to the system
    if trim is not None:
        trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from the current resident size
    before = status_mb()
    call(new)
    after = status_mb()
    return dict(peak_mb=after["VmHWM"] - before["VmRSS"], code_mb=after["RssFile"] - before["RssFile"])


def status_mb() -> dict[str, float]:
    """/proc/self/status's sizes, in MB."""
    sizes = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            sizes[name] = int(value.split()[0]) / 1024
    return sizes


def in_child(measure: str, folder: Path, args, which: str = "both") -> dict:
    """One side's memory, or both sides' times, measured in a fresh process."""
    argv = [sys.executable, __file__, "--child", which, measure, str(folder), "--new", str(args.new)]
    argv += ["--prompt", str(args.prompt), "--repeats", str(args.repeats), "--threads", str(args.threads)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{which} on {folder.name} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def busy_jiffies() -> int:
    """The machine's CPU time so far, in clock ticks, all cores and every process (/proc/stat's first line)."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return user + nice + system + irq + softirq + steal


def other_cores(seconds: float = 1.0) -> float:
    """The cores kept busy over `seconds` by the machine's other work (this process sleeps meanwhile)."""
    start = busy_jiffies()
    time.sleep(seconds)
    return (busy_jiffies() - start) / os.sysconf("SC_CLK_TCK") / seconds


def wait_until_quiet() -> str:
    """Wait (up to QUIET_WAIT_S) until the machine's other work keeps less than QUIET_CORES busy, and say what
    was found. What ran before (a browser, a server) may still be ending, and work on another core shares the
    memory bus with the measured calls, which stream every weight at each step: with a loop summing an 80 MB
    array on the other core, llama-gqa's time x went from 1.04 to 1.00 and gpt2-small's from 1.04 to 1.03."""
    start = time.monotonic()
    while (busy := other_cores()) >= QUIET_CORES and time.monotonic() - start < QUIET_WAIT_S:
        pass
    return f"{busy:.2f} cores busy before, after {time.monotonic() - start:.0f} s"


def timed_in_child(folder: Path, args) -> tuple[dict, str]:
    """Both sides' times (in_child) on a machine as quiet as it gets, and the cores other work kept busy meanwhile:
    the machine's CPU time less the child's."""
    quiet = wait_until_quiet()
    start, child, clock = busy_jiffies(), resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    times = in_child("time", folder, args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (after.ru_utime + after.ru_stime) - (child.ru_utime + child.ru_stime)
    others = ((busy_jiffies() - start) / os.sysconf("SC_CLK_TCK") - own) / (time.monotonic() - clock)
    return times, f"{quiet}, {max(others, 0.0):.2f} while timed"


def median_memory(folder: Path, args, side: str) -> dict:
    """One side's memory measured in `args.memory_runs` fresh processes: the run of median peak MB."""
    runs = sorted((in_child("memory", folder, args, side) for _ in range(args.memory_runs)), key=lambda m: m["peak_mb"])
    return runs[(len(runs) - 1) // 2]


def row(name: str, times: dict, memory: dict, args) -> str:
    ours, theirs = times["ours"], times["theirs"]
    other = "cpu" if args.clock == "wall" else "wall"
    mem_ours, mem_theirs = memory["ours"], memory["theirs"]
    ratio = mem_ours["peak_mb"] / mem_theirs["peak_mb"] if mem_theirs["peak_mb"] else float("nan")
    same = "equal" if ours["ids"] == theirs["ids"] else "DIFFER"
    code = f"{mem_ours['code_mb']:.1f}/{mem_theirs['code_mb']:.1f}"
    return (
        f"{name:<11} {args.new / ours[args.clock]:>10.1f} {args.new / theirs[args.clock]:>12.1f} "
        f"{theirs[args.clock] / ours[args.clock]:>7.2f} {theirs[other] / ours[other]:>7.2f} "
        f"{mem_ours['peak_mb']:>8.1f} {mem_theirs['peak_mb']:>9.1f} {ratio:>6.2f} {code:>9}  {same}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="16 new tokens after a 16-token prompt, 3 repeats")
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory-runs", type=int, default=5, help="fresh processes per side for the memory figure")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="wall", help="wall clock, or this process's CPU time")
    ap.add_argument("--models", nargs="+", choices=tuple(SHAPES), default=list(SHAPES), help="the checkpoints timed")
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "MEASURE", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.new, args.prompt, args.repeats = 16, 16, 3
    torch.set_num_threads(args.threads)
    prompt = [(7 * i + 3) % VOCAB for i in range(args.prompt)]
    if args.child:
        which, measure, folder = args.child
        if measure == "time":
            print(json.dumps(time_both(Path(folder), prompt, args.new, args.repeats)))
        else:
            print(json.dumps(memory_side(which, Path(folder), prompt, args.new)))
        return
    other = "cpu" if args.clock == "wall" else "wall"
    print(f"cpu, {args.threads} threads; {args.prompt} prompt tokens, {args.new} new, greedy, every map kept; "
          f"median of {args.repeats}, {args.clock} clock; memory median of {args.memory_runs} processes; "
          f"load average {load_average()}")  # fmt: skip
    print(f"{'model':<11} {'ours tok/s':>10} {'theirs tok/s':>12} {'time x':>7} {other + ' x':>7} {'ours MB':>8} "
          f"{'theirs MB':>9} {'mem x':>6} {'code MB':>9}  ids")  # fmt: skip
    folders = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            folder = folders[name] = save(name, Path(tmp) / name)
            times, busy = timed_in_child(folder, args)
            memory = {side: median_memory(folder, args, side) for side in SIDES}
            print(row(name, times, memory, args) + f"  (other work: {busy})", flush=True)
        if {"gpt2-small", "llama-gqa"} <= set(folders):
            print(parts(folders))
    print(f"load average {load_average()}")
    print(
        f"time x: theirs ÷ ours in seconds per call by the {args.clock} clock, {other} x by the {other} clock; "
        "mem x: ours ÷ theirs in MB one call's data adds at its peak after a warm-up; "
        "code MB: file-backed pages the measured call paged in, ours/theirs"
    )


def per_call_us(call, calls: int = 20, repeats: int = 25) -> float:
    """The median over `repeats` rounds of a round's time per call, in µs."""
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def head_us(weight: torch.Tensor) -> tuple[float, float]:
    """µs for one hidden state's logits from the head `weight` (V, E) as stored (V, E) and laid out by columns
    (attention.writing.search.by_columns), each read from memory: 8 copies used in turn (over 100 MB), as a writing step
    reads its head after the layers' weights have passed through the caches (one matrix called again and again
    stays in them)."""
    from attention.writing.search import by_columns

    hidden = torch.randn(1, weight.size(1))
    times = []
    for lay_out in (torch.clone, by_columns):
        copies = [lay_out(weight) for _ in range(8)]
        times.append(per_call_us(lambda c=copies: [hidden @ w.T for w in c], calls=3) / 8)
        del copies
    return times[0], times[1]


def parts(folders: dict[str, Path]) -> str:
    """Parts of a writing step timed alone, each beside what it replaced: the LM heads of the Llama checkpoint
    (its own) and of GPT-2's (its word embeddings) applied to one hidden state as stored and by columns, and what
    a lookup of 512 tokens' rows from GPT-2's table costs either way; one step's rotation of q and k, ours
    (rotary.rotate) and transformers' apply_rotary_pos_emb."""
    from safetensors.torch import load_file
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from attention.core.rotary import rotary_angles, rotate
    from attention.writing.search import by_columns

    own = load_file(str(folders["llama-gqa"] / "model.safetensors"))["lm_head.weight"]  # (V, E)
    table = load_file(str(folders["gpt2-small"] / "model.safetensors"))["transformer.wte.weight"]  # (V, E)
    q, k = torch.randn(1, 8, 1, 64), torch.randn(1, 2, 1, 64)  # one step's, as llama-gqa's
    inv_freq = 1.0 / 10000 ** (torch.arange(0, 64, 2).float() / 64)
    cos, sin = rotary_angles(torch.tensor([40]), inv_freq)  # sin signed: its first half negated
    plain_sin = torch.cat((-sin[..., :32], sin[..., 32:]), dim=-1)  # (1, 1, 64): the sines, as theirs takes them
    ids = torch.randint(0, table.size(0), (1, 512))
    with torch.inference_mode():
        heads = {name: head_us(weight) for name, weight in (("llama-gqa", own), ("gpt2-small (tied)", table))}
        lookups = [per_call_us(lambda w=w: torch.nn.functional.embedding(ids, w)) for w in (table, by_columns(table))]
        ours_us = per_call_us(lambda: (rotate(q, cos, sin), rotate(k, cos, sin)), calls=200)
        theirs_us = per_call_us(lambda: apply_rotary_pos_emb(q, k, cos, plain_sin), calls=200)
    lines = [
        f"{name}'s LM head ({w.size(0)} x {w.size(1)}), one hidden state: {rows:.0f} µs as stored, {cols:.0f} µs by "
        f"columns ({rows / cols:.2f} x)"
        for (name, (rows, cols)), w in zip(heads.items(), (own, table), strict=True)
    ]
    lines.append(
        f"512 tokens' rows from gpt2-small's table: {lookups[0]:.0f} µs as stored, {lookups[1]:.0f} µs by columns"
    )
    lines.append(
        f"one step's q and k rotated: ours {ours_us:.1f} µs, transformers' apply_rotary_pos_emb {theirs_us:.1f} µs "
        f"({theirs_us / ours_us:.2f} x)"
    )
    return "\n".join(lines)


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
