"""Cached computations, shared by every session and never changed after they are made: the model
once per process, results per input in stores bounded both in entries and in bytes, so that a
room full of people cannot grow the server's memory without limit."""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import itertools
import logging
import os
import resource
import threading
import time
from collections import OrderedDict
from typing import Any, Callable

import numpy as np
import streamlit as st
import torch
from torch.overrides import TorchFunctionMode

from attention import ModelLoadError, load_model
from attention.loading import resolve_device
from attention.inputs import on_model_device, within_positions
from attention.run import read_only, run_padded_batch, run_sentence
from attention.trace import trace_layer

from .settings import DEVICE, DTYPE, HEAVY_SLOTS, HEAVY_WAIT_S, TIME_LIMITS
from .sources import policy

log = logging.getLogger("attention-app")
MB = 1024 * 1024
USES = itertools.count()  # one clock for every store's "last use", so stores sharing a budget compare
# Each computation runs on one core and COMPUTE_SLOTS run at once: on a small machine that also draws
# pages, two threads per forward pass mostly wait for each other (a 16-token submission took 0.2-0.3 s
# of script time with two, 0.05-0.1 s with one). Set before any model runs, so every thread has it.
torch.set_num_threads(1)
TOTAL_MAX_BYTES = 600 * MB  # every store's results together
COMPUTE_SLOTS = 2  # results computed at once (the cores of the machine the targets are set for)
SMALL_RUN_BYTES = 8 * MB  # a run whose maps are at most this (a sentence) is computed without a slot
M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h
# Heavy computations (attention flow, suite scoring, the head comparison, ablation, GQA conversion)
# run HEAVY_SLOTS at a time in the whole process, so one visitor's flow cannot starve the room's
# ordinary requests; another session asking meanwhile waits up to HEAVY_WAIT_S, then is told to try
# again. Each kind has a time limit, enforced through the progress callback it takes. The operator
# may set HEAVY_SLOTS, HEAVY_WAIT_S and TIME_LIMITS (seconds per kind) in the environment: ui/settings.py.
WAIT_POLL_S = 0.5  # how often a waiting session's message is updated
# A computation that takes a slot (a long input's run, trace or batch, every heavy job) runs its torch
# kernels this many Linux nice steps below the page's own work (19: the lowest priority): the cores go to
# the room's short sentences first, and the long one takes what they leave. Its Python stays at the page's
# priority (KernelsLow says why; bench/priority.py measures it).
BIG_NICE = 19


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
        Deadline, to check through its progress callback). A stopped or failed one is not kept."""
        value = self.get(key)
        if value is None:
            with (heavy or HEAVY).job(kind) as deadline:
                value = self.get_or_compute(key, lambda: compute(deadline))
        return value


def may_raise_priority(nice: int) -> bool:
    """Whether this process may set a thread back to `nice` once it has lowered its priority: root may,
    and so may anyone whose RLIMIT_NICE (`ulimit -e`) reaches it (the limit r allows nice >= 20 - r)."""
    try:
        return os.geteuid() == 0 or 20 - resource.getrlimit(resource.RLIMIT_NICE)[0] <= nice
    except (OSError, AttributeError, ValueError):  # not Linux
        return False


@contextlib.contextmanager
def low_priority():
    """For the block, each torch kernel this thread runs on a big CPU tensor runs BIG_NICE nice steps
    lower; the Python between them stays at the page's priority (`KernelsLow`). Only where the priority
    can be set back (`may_raise_priority`): the thread goes on to draw the page and serves the session's
    next runs. Elsewhere the block runs at the page's priority, and the server log says so once."""
    if getattr(LOWERED, "on", False):  # inside another such block: lowered once is enough
        yield
        return
    me = threading.get_native_id()
    try:
        before = os.getpriority(os.PRIO_PROCESS, me)
    except (OSError, AttributeError):
        before = None
    if before is None or SETPRIORITY is None or not may_raise_priority(before):
        if not NOTED:
            NOTED.append(True)
            log.warning("long computations run at the page's priority: this process may not set a thread's "
                        "priority back (run it as root, or with `ulimit -e 20`)")
        yield
        return
    LOWERED.on = True
    try:
        with KernelsLow(me, before, min(19, before + BIG_NICE)):
            yield
    finally:
        LOWERED.on = False


class KernelsLow(TorchFunctionMode):
    """Each torch kernel called inside on a CPU tensor of LOW_ELEMENTS or more runs at the `low` priority,
    and the thread is back at `page` when it returns. A kernel runs without the interpreter lock; the
    Python between kernels holds it, and so do calls that convert to or from Python objects. A thread
    that holds the lock at a low priority holds up every session's Python until busy cores let it run
    again (a priority inversion: stalls of about 2 s in bench/priority.py). So the Python, the
    conversions and the small calls stay at the page's priority, and the priority is changed by
    `set_priority`, which lets go of the lock first: Linux reschedules a thread the moment it lowers its
    own priority."""

    def __init__(self, thread: int, page: int, low: int):
        super().__init__()
        self.thread, self.page, self.low = thread, page, low

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in HOLDS_THE_LOCK or cpu_elements(args, kwargs) < LOW_ELEMENTS:
            return func(*args, **kwargs)
        set_priority(self.thread, self.low)
        try:
            return func(*args, **kwargs)
        finally:
            set_priority(self.thread, self.page)


LOW_ELEMENTS = 1 << 16  # a call on smaller tensors is over in microseconds: not worth two system calls
# calls that hold the interpreter lock throughout (they read or make Python objects)
HOLDS_THE_LOCK = {"tolist", "item", "numpy", "__bool__", "__int__", "__float__", "__index__", "__len__",
                  "__iter__", "__repr__", "__str__", "__format__", "__reduce_ex__", "__array__"}


def cpu_elements(args, kwargs) -> int:
    """The most elements of any CPU tensor among a call's arguments (lists of tensors included)."""
    most = 0
    for arg in itertools.chain(args, kwargs.values()):
        if isinstance(arg, (list, tuple)):
            most = max(most, cpu_elements(arg, {}))
        elif isinstance(arg, torch.Tensor) and arg.device.type == "cpu":
            most = max(most, arg.numel())
    return most


def set_priority(thread: int, nice: int) -> None:
    """setpriority(2) for one thread, called without the interpreter lock (ctypes lets go of it)."""
    if SETPRIORITY(os.PRIO_PROCESS, thread, nice) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _libc_setpriority():
    try:
        call = ctypes.CDLL(None, use_errno=True).setpriority
    except (OSError, AttributeError):  # no C library to call: no lowering (the log says so)
        return None
    call.argtypes, call.restype = (ctypes.c_int, ctypes.c_uint, ctypes.c_int), ctypes.c_int
    return call


SETPRIORITY = _libc_setpriority()
LOWERED = threading.local()  # whether this thread is in a low_priority block
NOTED: list[bool] = []  # the server log has said that priorities cannot be set back


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


def _load_model(source: str, downloads: bool, bin_files: bool):
    """The model on the operator's device in the operator's dtype (ATTENTION_DEVICE, ATTENTION_DTYPE:
    the CPU in float32 unless a GPU is asked for). A device this machine does not have is said on the
    page, in one sentence, where the model would be, and the page stops there: no model can load."""
    try:
        device = str(resolve_device(DEVICE))  # "auto" settled once here, so the cache key is the real device
    except ModelLoadError as err:
        reason = str(err).split(" was asked for, but ", 1)[-1].split(": use device=", 1)[0]
        message = (f"This server is set to run the model on '{DEVICE}' (`ATTENTION_DEVICE`), but {reason}: "
                   "set `ATTENTION_DEVICE=cpu`, or `auto` to use a GPU only when there is one, and restart it.")
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        if get_script_run_ctx(suppress_warning=True) is not None:
            log.error(message)
            st.error(message)
            st.stop()
        raise ModelLoadError(message) from None
    return _load_on_device(source, downloads, bin_files, device, DTYPE)


@st.cache_resource(max_entries=2, show_spinner=False)
def _load_on_device(source: str, downloads: bool, bin_files: bool, device: str, dtype: str):
    return load_model(source or None, downloads=downloads, bin_files=bin_files, device=device, dtype=dtype)


def precision_caption(report) -> str:
    """", bfloat16 weights on cuda:0": where and in what dtype a model runs, for its caption; nothing
    for the CPU in float32 (the default)."""
    device, dtype = getattr(report, "device", "cpu"), getattr(report, "dtype", "float32")
    return "" if (device, dtype) == ("cpu", "float32") else f", {dtype} weights on {device}"


def get_model(source: str):
    """The model and tokenizer of `source` ("" for the bundled model), loaded once per process, if
    this server's source policy allows it (ui/sources.py); else a ModelLoadError."""
    rules = policy()
    rules.check(source)
    loaded = _load_model(source, rules.downloads, rules.bin_files)
    LOADED.add(source)
    return loaded


def get_run(source: str, text: str, text_b: str, causal: bool = False):
    """The run of one sentence (or pair): a SentenceRun holding every map, or, when every map together
    would be more than BIG_RUN_BYTES, a PooledRun holding pooled tiles and reading one layer at a time."""
    def compute():
        _, tokenizer = get_model(source)
        model, enc = _encode_for(source, text, text_b)
        c = model.config
        if maps_bytes(c.num_hidden_layers, c.num_attention_heads, len(enc.tokens)) > BIG_RUN_BYTES:
            return pooled_run(model, enc, (source, text, text_b, causal))
        return run_sentence(model, tokenizer, text, text_b, causal=causal)

    return store("runs", 32, 400 * MB).get_or_compute((source, text, text_b, causal), compute,
                                                      small=is_small_run(source, text, text_b))


def token_bound(*texts: str) -> int:
    """At most how many tokens `texts` make together: every token covers at least one byte of the
    UTF-8 text (a character for WordPiece, a byte for byte-level BPE), plus a few special tokens."""
    return sum(len(t.encode()) for t in texts) + 4


def is_small_run(source: str, text: str, text_b: str = "") -> bool:
    """Whether every map of this input, at the most tokens it can make, is within SMALL_RUN_BYTES."""
    c = get_model(source)[0].config
    return maps_bytes(c.num_hidden_layers, c.num_attention_heads, token_bound(text, text_b)) <= SMALL_RUN_BYTES


def get_trace(source: str, texts: tuple[str, ...], text_b: str, layer: int):
    """The recorded forward pass of one layer: for one sentence (or pair), or a padded batch."""
    def compute():
        model, tokenizer = get_model(source)
        limit = model.config.max_position_embeddings
        if len(texts) == 1:
            enc = tokenizer(*within_positions(limit, texts[0], text_b or None), truncation=True, max_length=limit,
                            return_tensors="pt")
        else:
            enc = tokenizer(list(within_positions(limit, *texts)), padding=True, truncation=True, max_length=limit,
                            return_tensors="pt")
        return trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=layer)

    return store("traces", 8, 200 * MB).get_or_compute((source, texts, text_b, layer), compute)


def get_batch(source: str, texts: tuple[str, ...]):
    def compute():
        model, tokenizer = get_model(source)
        return run_padded_batch(model, tokenizer, list(texts))

    return store("batches", 8, 200 * MB).get_or_compute((source, texts), compute)


# ---- big models: pooled tiles as the forward goes, one layer's full maps on demand -----------------

BIG_RUN_BYTES = 96 * MB  # a run whose every map (n_layers·H·L·L float32) is larger keeps pooled tiles only
POOL_CELLS = 32  # each head's thumbnail in a big run: at most this many cells a side (viz.overview's default)
HEAD_MEANS_BYTES = 64 * MB  # a big run keeps each layer's head-averaged map (rollout's input) up to this size
SLICE_BYTES = 16 * MB  # the most a general index into a big run's maps may return (e.g. the pronoun's rows)


class NeedsSmallerInput(ValueError):
    """A view asked for every map of a run too big to hold them all."""

    def __init__(self, n_layers: int, n_heads: int, n_tokens: int):
        full = maps_bytes(n_layers, n_heads, n_tokens) / MB
        super().__init__(
            f"This view needs every head's full map at once: {n_layers} layers × {n_heads} heads at {n_tokens} "
            f"tokens is {full:,.0f} MB, more than the {BIG_RUN_BYTES // MB} MB this server holds for one run. "
            "Try a shorter input with this model, or another view (the head view, overview and GQA view "
            "read one layer at a time).")


def maps_bytes(n_layers: int, n_heads: int, n_tokens: int) -> int:
    """Bytes of every attention map of one run, as float32 (n_layers, H, L, L)."""
    return n_layers * n_heads * n_tokens * n_tokens * 4


def is_big(run) -> bool:
    """Whether `run` is a PooledRun (a big model's run, its full maps fetched one layer at a time)."""
    return isinstance(run, PooledRun)


@contextlib.contextmanager
def layer_hooks(model, on_layer: Callable[[int, np.ndarray], None]):
    """Within this block, each layer of `model` that computes its map in this thread hands it, (H, L, L)
    for the batch's first item, to on_layer(layer, maps), and the model keeps None in its place: the
    forward pass never holds more than one layer's maps. The model is shared by every session: a
    forward pass of another thread meanwhile is left as it is."""
    owner = threading.get_ident()

    def hook_for(index: int):
        def hook(module, args, output):
            x, probs = output
            if probs is None or threading.get_ident() != owner:
                return None  # a fused layer (no map), or another session's forward pass
            on_layer(index, probs[0].float().cpu().numpy())  # float32 on the CPU, whatever the model's
            return x, None

        return hook

    handles = [layer.register_forward_hook(hook_for(i)) for i, layer in enumerate(model.layers)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def forward_maps(model, enc, causal: bool, on_layer, layers=None) -> None:
    """One forward pass of `enc` calling on_layer(layer, (H, L, L) maps) for each layer in `layers` (all
    when None); the other layers run torch's fused attention and make no map."""
    inputs = on_model_device(model, enc.input_ids, enc.attention_mask, enc.token_type_ids)
    with torch.inference_mode(), layer_hooks(model, on_layer):
        model(*inputs, causal=causal, maps_for=layers)


class LayerMaps:
    """A big run's maps, (n_layers, H, L, L), without holding them: an index whose first entry is one
    layer (``maps[layer]``, ``maps[layer, head]``) reads that layer's maps, computed on demand and kept
    in a bounded store; an index over every layer (``maps[:, :, rows, :]``) runs one forward pass that
    keeps only what the index selects, if that is at most SLICE_BYTES. Anything that would need every
    map at once (np.asarray, a slice of whole layers) raises NeedsSmallerInput."""

    def __init__(self, key: tuple, n_layers: int, n_heads: int, n_tokens: int):
        self.key = key  # (source, text, text_b, causal)
        self.shape = (n_layers, n_heads, n_tokens, n_tokens)
        self.ndim, self.dtype = 4, np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def refuse(self):
        """NeedsSmallerInput; on a page, its message is shown instead and the page stops there (a view
        that reads every map, such as rollout, cannot be drawn for this input)."""
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        err = NeedsSmallerInput(*self.shape[:3])
        if get_script_run_ctx(suppress_warning=True) is not None:
            st.info(str(err))
            st.stop()
        raise err

    def __array__(self, dtype=None, copy=None):
        self.refuse()

    def __iter__(self):
        self.refuse()

    def layer(self, layer: int) -> np.ndarray:
        """One layer's maps, (H, L, L), read-only."""
        if not -self.shape[0] <= layer < self.shape[0]:
            raise IndexError(f"layer {layer} is outside this model's {self.shape[0]} layers")
        return get_layer_maps(*self.key, layer % self.shape[0])

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        first, rest = index[0], index[1:]
        if isinstance(first, (int, np.integer)) and not isinstance(first, bool):
            return self.layer(int(first))[rest]
        if isinstance(first, slice) and first == slice(None) and rest:
            shape = np.broadcast_to(np.float32(0), self.shape[1:])[rest].shape  # one layer's selection
            if self.shape[0] * int(np.prod(shape)) * 4 <= SLICE_BYTES:
                return get_layer_selection(*self.key, rest)
        self.refuse()


@dataclasses.dataclass(frozen=True)
class PooledRun:
    """A big model's run (its maps more than BIG_RUN_BYTES): what the views need, gathered layer by
    layer as the forward pass went, and its full maps one layer at a time (``attentions[layer]``)."""
    encoded: Any  # attention.inputs.Encoded
    pooled: np.ndarray  # (n_layers, H, C, C) each map mean-pooled to at most POOL_CELLS a side
    strongest: np.ndarray  # (n_layers, H, 3): query, key and weight of each head's largest entry
    head_means: np.ndarray | None  # (n_layers, L, L) each layer's head-averaged map, None past HEAD_MEANS_BYTES
    attentions: LayerMaps

    @property
    def tokens(self) -> list[str]:
        return self.encoded.tokens

    @property
    def stats(self) -> dict[str, np.ndarray]:
        """attention.analysis.stats.head_stats of every head, (n_layers, H) each: one more forward pass,
        the first time it is asked for (it takes longer than the run itself), then cached."""
        return get_pooled_stats(*self.attentions.key)

    @property
    def n_layers(self) -> int:
        return self.pooled.shape[0]

    @property
    def n_heads(self) -> int:
        return self.pooled.shape[1]


def pooled_run(model, enc, key: tuple) -> PooledRun:
    """One forward pass of `enc` that pools each layer's maps as they come and lets them go."""
    from viz.overview import head_tiles

    c = model.config
    n_layers, H, L = c.num_hidden_layers, c.num_attention_heads, len(enc.tokens)
    keep_means = n_layers * L * L * 4 <= HEAD_MEANS_BYTES
    pooled, strongest, means = [None] * n_layers, [None] * n_layers, [None] * n_layers

    def on_layer(layer: int, maps: np.ndarray) -> None:
        pooled[layer], strongest[layer] = head_tiles(maps, POOL_CELLS)
        if keep_means:
            means[layer] = maps.mean(axis=0)

    forward_maps(model, enc, key[3], on_layer)
    return PooledRun(enc, read_only(np.stack(pooled)), read_only(np.stack(strongest)),
                     read_only(np.stack(means)) if keep_means else None, LayerMaps(key, n_layers, H, L))


def pooled_stats(model, enc, causal: bool) -> dict[str, np.ndarray]:
    """head_stats of every head, (n_layers, H) each, from one forward pass holding one layer at a time."""
    from attention.analysis.stats import head_stats, punctuation_mask

    per_layer, punct = {}, punctuation_mask(enc.tokens)
    forward_maps(model, enc, causal, lambda i, maps: per_layer.setdefault(
        i, head_stats(maps[None], enc.special, enc.sequence_ids, punct)))
    layers = [per_layer[i] for i in range(len(per_layer))]
    return {name: read_only(np.concatenate([s[name] for s in layers])) for name in layers[0]}


def get_pooled_stats(source: str, text: str, text_b: str, causal: bool) -> dict[str, np.ndarray]:
    def compute():
        model, enc = _encode_for(source, text, text_b)
        return pooled_stats(model, enc, causal)

    return store("run-stats", 32, 16 * MB).get_or_compute((source, text, text_b, causal), compute)


def layer_maps(model, enc, causal: bool, layer: int) -> np.ndarray:
    """One layer's maps (H, L, L), from a forward pass in which every other layer runs fused."""
    kept = {}
    forward_maps(model, enc, causal, lambda i, maps: kept.setdefault(i, maps.copy()), layers={layer})
    return read_only(kept[layer])


def layer_selection(model, enc, causal: bool, index: tuple) -> np.ndarray:
    """``maps[:, *index]`` of every layer, (n_layers, ...), from one forward pass holding one layer at a time."""
    kept = {}
    forward_maps(model, enc, causal, lambda i, maps: kept.setdefault(i, np.array(maps[index])))
    return read_only(np.stack([kept[i] for i in range(len(kept))]))


def _encode_for(source: str, text: str, text_b: str):
    from attention.inputs import encode

    model, tokenizer = get_model(source)
    return model, encode(tokenizer, text, text_b or None, max_length=model.config.max_position_embeddings)


def get_layer_maps(source: str, text: str, text_b: str, causal: bool, layer: int) -> np.ndarray:
    """The full maps (H, L, L) of one layer of a big run, cached per (source, text, layer)."""
    def compute():
        model, enc = _encode_for(source, text, text_b)
        return layer_maps(model, enc, causal, layer)

    return store("layer-maps", 4, 300 * MB).get_or_compute((source, text, text_b, causal, layer), compute)


def get_layer_selection(source: str, text: str, text_b: str, causal: bool, index: tuple) -> np.ndarray:
    def compute():
        model, enc = _encode_for(source, text, text_b)
        return layer_selection(model, enc, causal, index)

    return store("layer-selections", 8, 4 * SLICE_BYTES).get_or_compute(
        (source, text, text_b, causal, _index_key(index)), compute)


def _index_key(index: tuple) -> tuple:
    """A hashable, exact stand-in for a numpy index (slices, integers, lists and arrays of them)."""
    def part(item):
        if isinstance(item, slice):
            return ("slice", item.start, item.stop, item.step)
        if item is None or item is Ellipsis:
            return (repr(item),)
        array = np.asarray(item)
        return ("array", str(array.dtype), array.shape, tuple(array.ravel().tolist()))

    return tuple(part(item) for item in index)
