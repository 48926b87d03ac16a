"""Slots: how many computations run at once. A thread holding a slot that asks for another (a result
computed inside another) reuses the one it holds (`Reentrant`). Heavy computations (attention flow, suite
scoring, the head comparison, ablation, GQA conversion) run HEAVY_SLOTS at a time in the whole process,
so one visitor's flow cannot starve the room's ordinary requests; the slot goes to the sessions waiting in
the order they came (`FairSlots`), each session has at most one heavy job waiting or running, and one
that waits longer than HEAVY_WAIT_S is told to try again. Each kind has a time limit, enforced through
the progress callback it takes; a job stopped there is remembered, so the same job asked for again is
told at once. The operator may set HEAVY_SLOTS, HEAVY_WAIT_S and TIME_LIMITS in the environment
(ui/serve/settings.py). Every slot here is process state: no session's request clears it."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable

from streamlit.runtime.scriptrunner import get_script_run_ctx

from ..serve.settings import HEAVY_SLOTS, HEAVY_WAIT_S, TIME_LIMITS

WAIT_POLL_S = 0.5  # how often a waiting session's message is updated
STOPPED_KEPT = 256  # jobs stopped at their time limit that are remembered (the most recent)


class Reentrant:
    """One slot per thread, however deeply it nests: `hold()` calls acquire() on the outermost entry of
    this thread and release() when that entry ends (after an error, or a rerun's stop, too)."""

    def __init__(self, acquire: Callable[[], object], release: Callable[[], object]):
        self.acquire, self.release = acquire, release
        self.local = threading.local()

    @property
    def depth(self) -> int:
        """How many holds this thread is inside (0: it holds no slot)."""
        return getattr(self.local, "depth", 0)

    @contextlib.contextmanager
    def hold(self):
        """Hold the slot for the block; yields whether this is the thread's outermost hold."""
        depth = self.depth
        if depth == 0:
            self.acquire()
        self.local.depth = depth + 1
        try:
            yield depth == 0
        finally:
            self.local.depth = depth
            if depth == 0:
                self.release()


class FairSlots:
    """`capacity` slots handed out in the order they were asked for: a slot released while others wait
    goes to the one that has waited longest, never to a thread that asks after them."""

    def __init__(self, capacity: int):
        self.capacity = self.free = capacity
        self.cond = threading.Condition()
        self.queue: deque[object] = deque()  # one ticket per waiting thread, the oldest first

    def acquire(
        self,
        blocking: bool = True,
        timeout: float | None = None,
        on_wait: Callable[[float], None] | None = None,
        every: float = WAIT_POLL_S,
    ) -> bool:
        """Take a slot; False if none came within `timeout`. While it waits, on_wait(seconds waited) is
        called every `every` seconds, without the lock (it may draw on a page, or raise to stop)."""
        start = time.monotonic()
        with self.cond:
            if self.free and not self.queue:
                self.free -= 1
                return True
            if not blocking:
                return False
            ticket = object()
            self.queue.append(ticket)
        try:
            while True:
                left = None if timeout is None else timeout - (time.monotonic() - start)
                wait = every if left is None else max(0.0, min(every, left))
                with self.cond:
                    if self.cond.wait_for(lambda: self.free and self.queue[0] is ticket, timeout=wait):
                        self.queue.popleft()
                        self.free -= 1
                        self.cond.notify_all()  # the next in line may find a second free slot
                        return True
                waited = time.monotonic() - start
                if timeout is not None and waited >= timeout:
                    return False
                if on_wait is not None:
                    on_wait(waited)
        finally:
            with self.cond:
                if ticket in self.queue:  # gave up, or stopped: the ones behind move up
                    self.queue.remove(ticket)
                    self.cond.notify_all()

    def release(self) -> None:
        with self.cond:
            if self.free >= self.capacity:
                raise ValueError("a slot released more times than it was taken")
            self.free += 1
            self.cond.notify_all()


class TooLong(Exception):
    """A heavy computation ran past its kind's time limit and was stopped (nothing of it is kept)."""

    def __init__(self, kind: str, limit: float):
        super().__init__(f"{kind} took longer than {limit:g} s and was stopped")
        self.kind, self.limit = kind, limit


class ServerBusy(Exception):
    """Other sessions held the server's heavy slots for longer than this one may wait."""

    def __init__(self, waited: float):
        super().__init__(f"the server stayed busy for {waited:.0f} s")
        self.waited = waited


class SessionBusy(Exception):
    """This session's previous heavy job is still waiting or running (a rerun's thread started while the
    stopped run's thread had not let go yet): a session queues one job at a time."""

    def __init__(self):
        super().__init__("this session's previous heavy computation is still waiting or running")


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


def session_id() -> Hashable:
    """The Streamlit session this thread runs a script for; outside a session, the thread itself."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return ("session", ctx.session_id) if ctx is not None else ("thread", threading.get_ident())


class Heavy:
    """The server's slots for heavy computations: `slots` at once in the process, handed out in arrival
    order, one job per session waiting or running, reentrant within a thread, and always released when
    the computation ends, fails or is stopped by a rerun."""

    def __init__(self, slots: int):
        self.slots = FairSlots(slots)
        self.held = Reentrant(self.acquire, self.release)
        self.local = threading.local()  # this thread's job's Deadline, its session, and its on_wait callback
        self.lock = threading.Lock()
        self.sessions: set[Hashable] = set()  # sessions with a heavy job waiting or running
        self.stopped: OrderedDict[tuple, TooLong] = OrderedDict()  # (kind, key, limit): jobs stopped at their limit

    @contextlib.contextmanager
    def waiting(self, on_wait: Callable[[float, float], None] | None):
        """Within this block, a job that has to wait calls on_wait(seconds waited, most it will wait)."""
        before = getattr(self.local, "on_wait", None)
        self.local.on_wait = on_wait
        try:
            yield
        finally:
            self.local.on_wait = before

    def deadline(self) -> Deadline | None:
        """This thread's job's Deadline; None outside a heavy job."""
        return self.local.deadline if self.held.depth else None

    def acquire(self) -> None:
        """Take a slot in turn for this thread's session; SessionBusy if that session has a job already."""
        session = session_id()
        with self.lock:
            if session in self.sessions:
                raise SessionBusy()
            self.sessions.add(session)
        on_wait, start = getattr(self.local, "on_wait", None), time.monotonic()
        try:
            if not self.slots.acquire(
                timeout=HEAVY_WAIT_S,
                every=WAIT_POLL_S,
                on_wait=on_wait and (lambda waited: on_wait(waited, HEAVY_WAIT_S)),
            ):
                raise ServerBusy(time.monotonic() - start)
        except BaseException:
            self.leave(session)
            raise
        self.local.session = session

    def release(self) -> None:
        self.slots.release()
        self.leave(self.local.session)

    def leave(self, session: Hashable) -> None:
        with self.lock:
            self.sessions.discard(session)

    def remember_stop(self, stop: tuple, err: TooLong) -> None:
        with self.lock:
            self.stopped[stop] = err
            self.stopped.move_to_end(stop)
            while len(self.stopped) > STOPPED_KEPT:
                self.stopped.popitem(last=False)

    def stopped_before(self, stop: tuple) -> TooLong | None:
        with self.lock:
            return self.stopped.get(stop)

    @contextlib.contextmanager
    def job(self, kind: str, key: Hashable = None):
        """Hold a heavy slot (waiting for one if need be) and yield the job's Deadline. A job of `key`
        (its result's store key) stopped at its time limit before is TooLong at once, under the same limit."""
        limit = TIME_LIMITS[kind]
        stop = (kind, key, limit) if key is not None and not self.held.depth else None
        if stop is not None and self.stopped_before(stop) is not None:
            raise TooLong(kind, limit)
        try:
            with self.held.hold() as outermost:
                if outermost:
                    self.local.deadline = Deadline(kind, limit, time.monotonic() + limit)
                yield self.local.deadline
        except TooLong as err:
            if stop is not None:
                self.remember_stop(stop, err)
            raise


HEAVY = Heavy(HEAVY_SLOTS)  # one per process, as the model is
