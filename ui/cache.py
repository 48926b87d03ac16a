"""Cached computations, shared by every session and never changed after they are made: the model
once per process, results per input in stores bounded both in entries and in bytes, so that a
room full of people cannot grow the server's memory without limit."""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import itertools
import threading
import time
from collections import OrderedDict
from typing import Any, Callable

import numpy as np
import streamlit as st
import torch

from attention import load_model
from attention.run import run_padded_batch, run_sentence
from attention.trace import trace_layer

from .settings import HEAVY_SLOTS, HEAVY_WAIT_S, TIME_LIMITS
from .sources import policy

MB = 1024 * 1024
USES = itertools.count()  # one clock for every store's "last use", so stores sharing a budget compare
# Each computation runs on one core and COMPUTE_SLOTS run at once: on a small machine that also draws
# pages, two threads per forward pass mostly wait for each other (a 16-token submission took 0.2-0.3 s
# of script time with two, 0.05-0.1 s with one). Set before any model runs, so every thread has it.
torch.set_num_threads(1)
TOTAL_MAX_BYTES = 600 * MB  # every store's results together
COMPUTE_SLOTS = 2  # results computed at once (the cores of the machine the targets are set for)
M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h
# Heavy computations (attention flow, suite scoring, the head comparison, ablation, GQA conversion)
# run HEAVY_SLOTS at a time in the whole process, so one visitor's flow cannot starve the room's
# ordinary requests; another session asking meanwhile waits up to HEAVY_WAIT_S, then is told to try
# again. Each kind has a time limit, enforced through the progress callback it takes. The operator
# may set HEAVY_SLOTS, HEAVY_WAIT_S and TIME_LIMITS (seconds per kind) in the environment: ui/settings.py.
WAIT_POLL_S = 0.5  # how often a waiting session's message is updated


def size_of(value: Any) -> int:
    """Bytes held by the arrays and tensors inside a result (dataclasses, lists, dicts)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(size_of(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return sum(size_of(v) for v in value)
    if isinstance(value, dict):
        return sum(size_of(v) for v in value.values())
    return 0


class Budget:
    """What the stores share: one lock, a byte limit over all of them together, and a few compute
    slots. A result is computed in a slot (COMPUTE_SLOTS at once, the machine's cores), so a room
    submitting long inputs together holds a few forward passes' buffers at a time, not one per
    person; the others wait their turn, which costs them no time the cores had to spare."""

    def __init__(self, max_bytes: int, slots: int):
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self.stores: list[BoundedStore] = []
        self.slots = threading.BoundedSemaphore(slots)
        self.held = threading.local()  # slots this thread holds: a computation inside another reuses it

    @property
    def total_bytes(self) -> int:
        return sum(store.total_bytes for store in self.stores)

    def evict(self, keep) -> None:
        """Drop the least recently used results of any store until all fit (never `keep`)."""
        while self.total_bytes > self.max_bytes:
            oldest = [(next(iter(store.items.values()))[2], store) for store in self.stores
                      if store.items and (store, next(iter(store.items))) != keep]  # (last use, store)
            if not oldest:
                return
            min(oldest, key=lambda pair: pair[0])[1].items.popitem(last=False)

    @contextlib.contextmanager
    def slot(self):
        depth = getattr(self.held, "depth", 0)
        if depth == 0:
            self.slots.acquire()
        self.held.depth = depth + 1
        try:
            yield
        finally:
            self.held.depth = depth
            if depth == 0:
                self.slots.release()


class TooLong(Exception):
    """A heavy computation ran past its kind's time limit and was stopped (nothing of it is kept)."""

    def __init__(self, kind: str, limit: float):
        super().__init__(f"{kind} took longer than {limit:g} s and was stopped")
        self.kind, self.limit = kind, limit


class ServerBusy(Exception):
    """Another session held the server's heavy slot for longer than this one may wait."""

    def __init__(self, waited: float):
        super().__init__(f"the server stayed busy for {waited:.0f} s")
        self.waited = waited


@dataclasses.dataclass
class Deadline:
    kind: str
    limit: float
    ends: float

    def check(self) -> None:
        if time.monotonic() > self.ends:
            raise TooLong(self.kind, self.limit)

    def wrap(self, progress: Callable | None) -> Callable:
        """`progress` (or nothing) that first raises TooLong once the deadline has passed."""
        def checked(*args, **kwargs):
            self.check()
            if progress is not None:
                progress(*args, **kwargs)

        return checked


class Heavy:
    """The server's slots for heavy computations: `slots` at once in the process, one per thread
    (a session's script runs on one thread at a time, so one per session), reentrant, and always
    released when the computation ends, fails or is stopped by a rerun."""

    def __init__(self, slots: int):
        self.slots = threading.BoundedSemaphore(slots)
        self.local = threading.local()  # depth of this thread's job, and its on_wait callback

    @contextlib.contextmanager
    def waiting(self, on_wait: Callable[[float, float], None] | None):
        """Within this block, a job that has to wait calls on_wait(seconds waited, most it will wait)."""
        before = getattr(self.local, "on_wait", None)
        self.local.on_wait = on_wait
        try:
            yield
        finally:
            self.local.on_wait = before

    def acquire(self) -> None:
        on_wait = getattr(self.local, "on_wait", None)
        start = time.monotonic()
        while not self.slots.acquire(timeout=WAIT_POLL_S):
            waited = time.monotonic() - start
            if waited >= HEAVY_WAIT_S:
                raise ServerBusy(waited)
            if on_wait is not None:
                on_wait(waited, HEAVY_WAIT_S)

    @contextlib.contextmanager
    def job(self, kind: str):
        """Hold a heavy slot (waiting for one if need be) and yield the job's Deadline."""
        depth = getattr(self.local, "depth", 0)
        if depth == 0:
            self.acquire()
            self.local.deadline = Deadline(kind, TIME_LIMITS[kind], time.monotonic() + TIME_LIMITS[kind])
        self.local.depth = depth + 1
        try:
            yield self.local.deadline
        finally:
            self.local.depth = depth
            if depth == 0:
                self.slots.release()


HEAVY = Heavy(HEAVY_SLOTS)  # one per process, as the model is


class BoundedStore:
    """Least recently used results, at most `max_entries` of them and `max_bytes` in all (the newest
    is always kept); with a `budget`, also within the budget's bytes over every store sharing it.
    Thread-safe; two sessions asking for the same new key may both compute it."""

    def __init__(self, max_entries: int, max_bytes: int, budget: Budget | None = None):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.budget = budget
        self.items: OrderedDict[Any, tuple[Any, int, int]] = OrderedDict()  # key: (value, bytes, last use)
        self.lock = budget.lock if budget else threading.RLock()
        if budget:
            budget.stores.append(self)

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size, _ in self.items.values())

    def get(self, key):
        with self.lock:
            if key not in self.items:
                return None
            value, size, _ = self.items[key]
            self.items[key] = (value, size, next(USES))
            self.items.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        size = size_of(value)
        with self.lock:
            self.items[key] = (value, size, next(USES))
            self.items.move_to_end(key)
            while len(self.items) > 1 and (len(self.items) > self.max_entries or self.total_bytes > self.max_bytes):
                self.items.popitem(last=False)
            if self.budget:
                self.budget.evict(keep=(self, key))

    def get_or_compute(self, key, compute: Callable[[], Any]):
        value = self.get(key)
        if value is None:
            with self.budget.slot() if self.budget else contextlib.nullcontext():
                value = compute()
            self.put(key, value)
        return value

    def get_or_compute_heavy(self, key, kind: str, compute: Callable[[Deadline], Any], heavy: Heavy | None = None):
        """As get_or_compute, for a heavy kind: a cached result is returned at once; else it is
        computed holding the server's heavy slot, within the kind's time limit (compute gets the
        Deadline, to check through its progress callback). A stopped or failed one is not kept."""
        value = self.get(key)
        if value is None:
            with (heavy or HEAVY).job(kind) as deadline:
                value = self.get_or_compute(key, lambda: compute(deadline))
        return value


def return_freed_memory() -> None:
    """Have glibc's malloc serve every block of 1 MB or more by mmap, so a freed result's memory goes
    back to the system. By default the threshold climbs (up to 32 MB) once such a block is freed,
    and arrays below it are then carved from heaps that seldom shrink: the process keeps the peak."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, 1 << 20)
    except (OSError, AttributeError):  # not glibc: nothing to set
        pass


@st.cache_resource(show_spinner=False)
def budget() -> Budget:
    """One per process, shared by every store."""
    return_freed_memory()
    return Budget(TOTAL_MAX_BYTES, COMPUTE_SLOTS)


@st.cache_resource(show_spinner=False)
def store(name: str, max_entries: int, max_bytes: int) -> BoundedStore:
    """One store per name and process, within the process's shared budget."""
    return BoundedStore(max_entries, max_bytes, budget())


LOADED: set[str] = set()  # sources this process has loaded (a hint for the page, not a cache)


@st.cache_resource(max_entries=2, show_spinner=False)
def _load_model(source: str, downloads: bool, bin_files: bool):
    return load_model(source or None, downloads=downloads, bin_files=bin_files)


def get_model(source: str):
    """The model and tokenizer of `source` ("" for the bundled model), loaded once per process, if
    this server's source policy allows it (ui/sources.py); else a ModelLoadError."""
    rules = policy()
    rules.check(source)
    loaded = _load_model(source, rules.downloads, rules.bin_files)
    LOADED.add(source)
    return loaded


def get_run(source: str, text: str, text_b: str, causal: bool = False):
    def compute():
        model, tokenizer = get_model(source)
        return run_sentence(model, tokenizer, text, text_b, causal=causal)

    return store("runs", 32, 400 * MB).get_or_compute((source, text, text_b, causal), compute)


def get_trace(source: str, texts: tuple[str, ...], text_b: str, layer: int):
    """The recorded forward pass of one layer: for one sentence (or pair), or a padded batch."""
    def compute():
        model, tokenizer = get_model(source)
        limit = model.config.max_position_embeddings
        if len(texts) == 1:
            enc = tokenizer(texts[0], text_b or None, truncation=True, max_length=limit, return_tensors="pt")
        else:
            enc = tokenizer(list(texts), padding=True, truncation=True, max_length=limit, return_tensors="pt")
        return trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=layer)

    return store("traces", 8, 200 * MB).get_or_compute((source, texts, text_b, layer), compute)


def get_batch(source: str, texts: tuple[str, ...]):
    def compute():
        model, tokenizer = get_model(source)
        return run_padded_batch(model, tokenizer, list(texts))

    return store("batches", 8, 200 * MB).get_or_compute((source, texts), compute)
