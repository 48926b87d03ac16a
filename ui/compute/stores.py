"""Cached computations, shared by every session and never changed after they are made: results per input
in stores bounded both in entries and in bytes, so that a room full of people cannot grow the server's
memory without limit, and resources (models, worker processes) kept per process by `kept`.

All of it is process state, made once and guarded by locks: a visitor's "Clear caches" (which Streamlit
honours from any browser, clearing st.cache_data and st.cache_resource) leaves it as it is."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import inspect
import itertools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .priority import low_priority
from .slots import HEAVY, Deadline, Heavy, Reentrant

MB = 1024 * 1024
USES = itertools.count()  # one clock for every store's "last use", so stores sharing a budget compare
TOTAL_MAX_BYTES = 600 * MB  # every store's results together
COMPUTE_SLOTS = 2  # results computed at once (the cores of the machine the targets are set for)
M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h


def size_of(value: Any) -> int:
    """Bytes held by the arrays, tensors and tables inside a result (dataclasses, lists, dicts); a table
    (a DataFrame or Series) counts its strings too, which is most of a table of points with their texts."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    pd = sys.modules.get("pandas")  # not imported: no table to count (a page run never sees it half-imported)
    if pd is not None and isinstance(value, pd.DataFrame):
        return int(value.memory_usage(deep=True).sum())
    if pd is not None and isinstance(value, pd.Series):
        return int(value.memory_usage(deep=True))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(size_of(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(getattr(type(value), "nbytes", None), property):  # an object that counts its own (LongMaps)
        return int(value.nbytes)
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
        self.held = Reentrant(self.slots.acquire, self.slots.release)  # a computation inside another reuses it

    @property
    def total_bytes(self) -> int:
        return sum(store.total_bytes for store in self.stores)

    def evict(self, keep) -> None:
        """Drop the least recently used results of any store until all fit (never `keep`)."""
        while self.total_bytes > self.max_bytes:
            oldest = [
                (next(iter(store.items.values()))[2], store)
                for store in self.stores
                if store.items and (store, next(iter(store.items))) != keep
            ]  # (last use, store)
            if not oldest:
                return
            min(oldest, key=lambda pair: pair[0])[1].items.popitem(last=False)

    def slot(self):
        """Hold one of the compute slots for the block (the one this thread holds, when nested)."""
        return self.held.hold()


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

    def get_or_compute(self, key, compute: Callable[[], Any], small: bool = False):
        """The stored value of `key`, or compute() in one of the budget's compute slots, at a lower
        CPU priority (`low_priority`), and kept. A `small` computation (a short sentence's run) goes
        ahead without a slot, at the page's priority: its buffers are small, and a room's ordinary
        submissions must not queue behind a long one holding the slots."""
        value = self.get(key)
        if value is None:
            if small:
                value = compute()
            else:
                with self.budget.slot() if self.budget else contextlib.nullcontext(), low_priority():
                    value = compute()
            self.put(key, value)
        return value

    def get_or_compute_heavy(self, key, kind: str, compute: Callable[[Deadline], Any], heavy: Heavy | None = None):
        """As get_or_compute, for a heavy kind: a cached result is returned at once; else it is
        computed holding the server's heavy slot, within the kind's time limit (compute gets the
        Deadline, to check through its progress callback). A stopped or failed one is not kept; one
        stopped at its time limit is TooLong at once when asked for again (Heavy.job)."""
        value = self.get(key)
        if value is None:
            with (heavy or HEAVY).job(kind, key) as deadline:
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


_LOCK = threading.Lock()
_BUDGET: list[Budget] = []  # the process's one budget, made with the first store
_STORES: dict[tuple, BoundedStore] = {}


def budget() -> Budget:
    """One per process, shared by every store."""
    with _LOCK:
        if not _BUDGET:
            return_freed_memory()
            _BUDGET.append(Budget(TOTAL_MAX_BYTES, COMPUTE_SLOTS))
        return _BUDGET[0]


def store(name: str, max_entries: int, max_bytes: int) -> BoundedStore:
    """One store per name (and bounds) and process, within the process's shared budget."""
    shared = budget()
    with _LOCK:
        key = (name, max_entries, max_bytes)
        if key not in _STORES:
            _STORES[key] = BoundedStore(max_entries, max_bytes, shared)
        return _STORES[key]


class Kept:
    """`func`'s results per arguments, kept for the process (the `max_entries` most recently used, if
    given); arguments named with a leading underscore are not part of the key. Two threads asking for
    the same new key wait for one computation; a failure is not kept."""

    def __init__(self, func: Callable, max_entries: int | None):
        functools.update_wrapper(self, func)
        self.func, self.max_entries = func, max_entries
        self.signature = inspect.signature(func)
        self.lock = threading.Lock()
        self.values: OrderedDict[tuple, Any] = OrderedDict()
        self.computing: dict[tuple, threading.Lock] = {}  # one lock per key being computed
        KEPT.append(self)

    def key(self, args, kwargs) -> tuple:
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple((name, value) for name, value in bound.arguments.items() if not name.startswith("_"))

    def lookup(self, key):
        """(True, value) if kept (now the most recently used), else (False, None); under self.lock."""
        if key not in self.values:
            return False, None
        self.values.move_to_end(key)
        return True, self.values[key]

    def __call__(self, *args, **kwargs):
        key = self.key(args, kwargs)
        with self.lock:
            found, value = self.lookup(key)
            if found:
                return value
            gate = self.computing.setdefault(key, threading.Lock())
        with gate:
            with self.lock:
                found, value = self.lookup(key)
            if found:
                return value
            try:
                value = self.func(*args, **kwargs)
            except BaseException:
                with self.lock:
                    self.computing.pop(key, None)
                raise
            with self.lock:
                self.values[key] = value
                while self.max_entries and len(self.values) > self.max_entries:
                    self.values.popitem(last=False)
                self.computing.pop(key, None)
            return value

    def clear(self) -> None:
        with self.lock:
            self.values.clear()


KEPT: list[Kept] = []  # every kept function, for forget_everything


def kept(max_entries: int | None = None) -> Callable[[Callable], Kept]:
    """Decorator: keep the function's results for the process (`Kept`); in place of st.cache_resource,
    whose entries any visitor's "Clear caches" drops."""
    return lambda func: Kept(func, max_entries)


def forget_everything() -> None:
    """Drop every kept resource and every stored result of this process (tests that change what a
    result depends on; an operator's script). The stores, budget and slots themselves stay."""
    for memo in KEPT:
        memo.clear()
    with _LOCK:
        stores = list(_STORES.values())
    for one in stores:
        with one.lock:
            one.items.clear()
