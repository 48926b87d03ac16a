"""A long computation beside a room's short sentences, on busy cores: how long the short ones stall.

    python bench/priority.py [--seconds 20] [--busy 12] [--ordinary 4] [--nice 19] [--modes none,page,thread,kernels]

One process, as the app server: `--ordinary` threads run short sentences through the bundled model one
after another (a visitor's submit, 20-100 ms apart), while one thread runs a 512-token sentence and its
padded batch over and over (the hostile visitor of bench/load.py), and `--busy` other processes spin
on the same cores (the room's browsers, on a machine that serves and draws at once). Printed per mode:
the short runs' count, median, 95th and 99th percentile and longest time, and how many long rounds
were done. Modes for the long thread:

  none     no long thread: what the short runs get anyway
  page     the long thread at the page's priority
  thread   the whole long thread `--nice` steps lower (ui/compute/priority.py before its KernelsLow)
  kernels  ui/compute/priority.py's low_priority(): its torch kernels `--nice` steps lower, its Python not

A thread set back while it holds Python's interpreter lock holds up every thread in the process until
the busy cores let it run (a priority inversion); `thread` shows such stalls, `kernels` is meant not to
(on 2 cores, README: the longest short run 2.10 s in `thread`, 0.19 s in `kernels`, 0.17 s in `none`).
The long rounds show what the long computation still gets. Needs the privilege to set a thread's
priority back (root, or `ulimit -e 20`); without it the lowered modes are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import ui.compute.priority as priority  # noqa: E402
from attention import load_model  # noqa: E402
from attention.runs.run import run_padded_batch, run_sentence  # noqa: E402

LONG_TEXT = "walrus " * 510  # 512 positions with [CLS] and [SEP], the bundled model's limit


def spin(stop) -> None:
    while not stop.is_set():
        for _ in range(10_000):
            pass


def one_mode(mode: str, model, tokenizer, args) -> str:
    stop_busy = multiprocessing.Event()
    busy = [multiprocessing.Process(target=spin, args=(stop_busy,), daemon=True) for _ in range(args.busy)]
    for proc in busy:
        proc.start()
    stop, times, rounds = threading.Event(), [], [0]

    def long_thread() -> None:
        me = threading.get_native_id()
        while not stop.is_set():
            if mode == "thread":
                os.setpriority(os.PRIO_PROCESS, me, args.nice)
            with priority.low_priority() if mode == "kernels" else contextlib.nullcontext():
                run_sentence(model, tokenizer, LONG_TEXT)
                run_padded_batch(model, tokenizer, [LONG_TEXT, "a walrus"])
            if mode == "thread":
                os.setpriority(os.PRIO_PROCESS, me, 0)
            rounds[0] += 1

    def ordinary(k: int) -> None:
        pause = random.Random(k)
        while not stop.is_set():
            start = time.perf_counter()
            run_sentence(model, tokenizer, f"The zebra {k} didn't cross the road because it was too tired.")
            times.append(time.perf_counter() - start)
            time.sleep(pause.uniform(0.02, 0.1))

    threads = [threading.Thread(target=ordinary, args=(k,)) for k in range(args.ordinary)]
    long = threading.Thread(target=long_thread, daemon=True) if mode != "none" else None
    time.sleep(1)  # the busy processes running
    for thread in threads + ([long] if long else []):
        thread.start()
    time.sleep(args.seconds)
    stop.set()
    for thread in threads:
        thread.join()
    stop_busy.set()  # a lowered long round ends only once the cores are free
    for proc in busy:
        proc.join()
    if long:
        long.join()
    q = statistics.quantiles(times, n=100)

    def ms(s: float) -> str:
        return f"{s * 1000:.0f}"

    return (
        f"{mode:8s} short runs {len(times):4d}: median {ms(statistics.median(times))} ms, p95 {ms(q[94])}, "
        f"p99 {ms(q[98])}, longest {ms(max(times))}; long rounds done {rounds[0]}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--busy", type=int, default=12, help="processes spinning on the cores (the browsers)")
    ap.add_argument("--ordinary", type=int, default=4, help="threads running short sentences")
    ap.add_argument("--nice", type=int, default=priority.BIG_NICE, help="nice steps for the lowered modes")
    ap.add_argument("--modes", default="none,page,thread,kernels")
    args = ap.parse_args()
    priority.BIG_NICE = args.nice
    torch.set_num_threads(1)
    model, tokenizer = load_model(None)
    print(
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__}; "
        f"{args.busy} busy processes, {args.ordinary} short-sentence threads, {args.seconds:.0f} s per mode, "
        f"nice {args.nice}"
    )
    for mode in args.modes.split(","):
        if mode in ("thread", "kernels") and not priority.may_raise_priority(0):
            print(f"{mode:8s} skipped: this process may not set a thread's priority back")
            continue
        print(one_mode(mode, model, tokenizer, args), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
