"""The app's shared result stores stay bounded in entries and in bytes."""

import threading

import numpy as np
import pandas as pd
import torch

from ui.compute.stores import BoundedStore, size_of


def test_size_of_counts_arrays_and_tensors_inside_results(minilm):
    from attention.runs.run import run_sentence

    model, tokenizer = minilm
    run = run_sentence(model, tokenizer, "The cat sat on the mat.")
    L = len(run.tokens)
    assert size_of(run) >= 6 * 12 * L * L * 4  # the float32 attention maps
    assert size_of({"a": np.zeros(10, np.float32), "b": [torch.zeros(5)]}) == 40 + 20


def test_size_of_counts_a_tables_memory_with_its_strings():
    """The global Q·K view keeps tables of points (float columns and a hover text per point)."""
    frame = pd.DataFrame({"x": np.zeros(1000), "context": ["a few words either side «it» of a token"] * 1000})
    assert size_of(frame) == frame.memory_usage(deep=True).sum()
    assert size_of(frame) > 8_000 + 1000 * 40  # the floats and every string, not only the pointers to them
    assert size_of(({3: frame}, ["text"])) == size_of(frame)  # inside the view's (frames, texts)
    assert size_of(frame["x"]) == frame["x"].memory_usage(deep=True)


def test_evicts_the_least_recently_used_by_count():
    s = BoundedStore(max_entries=2, max_bytes=10**9)
    s.put("a", np.zeros(1))
    s.put("b", np.zeros(1))
    assert s.get("a") is not None  # a is now the most recent
    s.put("c", np.zeros(1))
    assert s.get("b") is None and s.get("a") is not None and s.get("c") is not None


def test_evicts_by_bytes_but_keeps_the_newest():
    s = BoundedStore(max_entries=100, max_bytes=1000)
    s.put("a", np.zeros(100))  # 800 bytes
    s.put("b", np.zeros(50))  # 400: over the limit, a goes
    assert s.get("a") is None and s.get("b") is not None and s.total_bytes == 400
    s.put("big", np.zeros(1000))  # larger than the limit alone: kept as the newest, others go
    assert list(s.items) == ["big"]


def test_get_or_compute_computes_once_and_is_thread_safe():
    s = BoundedStore(max_entries=50, max_bytes=10**9)
    calls = []
    assert s.get_or_compute("k", lambda: calls.append(1) or np.ones(3)).sum() == 3
    s.get_or_compute("k", lambda: calls.append(1) or np.ones(3))
    assert len(calls) == 1

    def worker(i):
        for j in range(200):
            s.put((i, j), np.zeros(2))
            s.get((i, j - 1))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(s.items) == 50


def test_a_budget_bounds_every_store_together_dropping_the_least_recent_anywhere():
    from ui.compute.stores import Budget

    budget = Budget(max_bytes=2000, slots=2)
    runs, traces = BoundedStore(10, 10**9, budget), BoundedStore(10, 10**9, budget)
    runs.put("a", np.zeros(100))  # 800 bytes each
    traces.put("b", np.zeros(100))
    runs.get("a")  # a is now more recent than b
    traces.put("c", np.zeros(100))  # 2400 bytes in all: b, the least recently used anywhere, goes
    assert traces.get("b") is None and runs.get("a") is not None and traces.get("c") is not None
    assert budget.total_bytes == 1600
    runs.put("big", np.zeros(1000))  # alone over the budget: kept, everything else goes
    assert list(runs.items) == ["big"] and not traces.items


def test_compute_slots_bound_concurrent_computations_and_allow_nesting():
    import time

    from ui.compute.stores import Budget

    budget = Budget(max_bytes=10**9, slots=2)
    outer, inner = BoundedStore(50, 10**9, budget), BoundedStore(50, 10**9, budget)
    running, peak, lock = [0], [0], threading.Lock()

    def compute(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        value = inner.get_or_compute(("inner", i), lambda: np.ones(1))  # nested: reuses the slot
        with lock:
            running[0] -= 1
        return value

    threads = [threading.Thread(target=outer.get_or_compute, args=(i, lambda i=i: compute(i))) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)  # no deadlock
    assert peak[0] == 2 and len(outer.items) == 6


def test_a_small_computation_does_not_wait_for_the_slots_a_long_one_holds():
    import time

    from ui.compute.stores import Budget

    budget = Budget(max_bytes=10**9, slots=1)
    store_ = BoundedStore(50, 10**9, budget)
    release = threading.Event()
    long_one = threading.Thread(target=store_.get_or_compute, args=("long", lambda: (release.wait(10), np.ones(1))[1]))
    long_one.start()
    time.sleep(0.1)  # the long one holds the only slot
    done = []
    small = threading.Thread(target=lambda: done.append(store_.get_or_compute("short", lambda: np.ones(1), small=True)))
    small.start()
    small.join(timeout=2)
    ordinary = threading.Thread(target=lambda: done.append(store_.get_or_compute("other", lambda: np.ones(1))))
    ordinary.start()
    ordinary.join(timeout=0.5)
    assert len(done) == 1 and ordinary.is_alive()  # the small one went ahead; a slotted one waits
    release.set()
    long_one.join(timeout=5)
    ordinary.join(timeout=5)
    assert len(done) == 2


def test_a_sentence_is_a_small_run_and_a_long_input_is_not(minilm):
    from ui.compute.runs import is_small_run, token_bound

    assert token_bound("It was.", "Ünïcode") == len("It was.") + len("Ünïcode".encode()) + 4
    assert is_small_run("", "The animal didn't cross the street because it was too tired.")
    assert not is_small_run("", "word " * 100)  # up to 504 tokens: 6 x 12 maps of 504 x 504 are 73 MB
