"""CPU priority of long computations: a computation that takes a slot (a long input's run, trace or batch,
every heavy job) runs its torch kernels BIG_NICE Linux nice steps below the page's own work, so the cores
go to the room's short sentences first and the long one takes what they leave. Its Python stays at the
page's priority (KernelsLow says why; bench/priority.py measures it)."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import os
import resource
import threading

import torch
from torch.overrides import TorchFunctionMode

log = logging.getLogger("attention-app")
BIG_NICE = 19  # nice steps below the page (19: the lowest priority)


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
            log.warning(
                "long computations run at the page's priority: this process may not set a thread's "
                "priority back (run it as root, or with `ulimit -e 20`)"
            )
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
HOLDS_THE_LOCK = {
    "tolist",
    "item",
    "numpy",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "__len__",
    "__iter__",
    "__repr__",
    "__str__",
    "__format__",
    "__reduce_ex__",
    "__array__",
}


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
