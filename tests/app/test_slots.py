"""The heavy slot's fairness: handed to the sessions waiting in the order they came, one job per session
waiting or running, and a job stopped at its time limit answered at once when asked for again."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.runtime.scriptrunner_utils import script_run_context

from ui.compute import slots
from ui.compute.slots import FairSlots, Heavy, SessionBusy, TooLong
from ui.compute.stores import BoundedStore


def in_session(session: str | None, target) -> threading.Thread:
    """A started thread running target(), as a script thread of Streamlit session `session` (None: none)."""
    thread = threading.Thread(target=target, daemon=True)
    if session is not None:
        setattr(thread, script_run_context.SCRIPT_RUN_CONTEXT_ATTR_NAME, SimpleNamespace(session_id=session))
    thread.start()
    return thread


def until(condition, timeout: float = 5) -> None:
    ends = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < ends, "timed out"
        time.sleep(0.005)


def holder(heavy: Heavy, session: str, started: threading.Event, release: threading.Event, then=None):
    def run():
        with heavy.job("flow"):
            started.set()
            release.wait(5)
        if then is not None:
            then()

    return in_session(session, run)


def test_the_slot_goes_to_the_waiting_sessions_in_arrival_order_not_to_the_one_that_just_finished():
    heavy, order = Heavy(1), []
    started, release = threading.Event(), threading.Event()

    def job(name):
        def run():
            with heavy.job("flow"):
                order.append(name)
                time.sleep(0.02)

        return run

    first = holder(heavy, "a", started, release, then=job("a again"))  # at once asks for a second job
    started.wait(5)
    waiting = []
    for name in ("b", "c", "d"):
        waiting.append(in_session(name, job(name)))
        count = len(waiting)
        until(lambda count=count: len(heavy.slots.queue) == count)  # queued before the next one comes
    release.set()
    for thread in [first, *waiting]:
        thread.join(5)
    assert order == ["b", "c", "d", "a again"]
    assert heavy.slots.free == 1 and not heavy.sessions


def test_fair_slots_hand_two_slots_to_the_two_oldest_waiters():
    fair, got = FairSlots(2), []
    assert fair.acquire() and fair.acquire() and not fair.acquire(blocking=False)
    threads = []
    for name in "xyz":
        threads.append(in_session(None, lambda n=name: fair.acquire(timeout=5) and got.append(n)))
        count = len(threads)
        until(lambda count=count: len(fair.queue) == count)
    fair.release()
    fair.release()
    until(lambda: len(got) == 2)
    assert sorted(got) == ["x", "y"] and list(fair.queue) and threads[2].is_alive()
    fair.release()
    for thread in threads:
        thread.join(5)
    assert got[2] == "z"


@pytest.mark.parametrize("running", [True, False])
def test_a_session_with_a_job_waiting_or_running_cannot_queue_a_second(running):
    """A rerun's new thread of the same session is told at once; another session waits its turn."""
    heavy, ran = Heavy(1), []
    started, release = threading.Event(), threading.Event()

    def job(name):
        def run():
            try:
                with heavy.job("flow"):
                    ran.append(name)
            except SessionBusy:
                ran.append(f"{name} refused")

        return run

    first = holder(heavy, "s" if running else "other", started, release)
    started.wait(5)
    queued = [] if running else [in_session("s", job("s first"))]  # waits for the other session's job
    until(lambda: len(heavy.slots.queue) == len(queued))
    start = time.monotonic()
    in_session("s", job("s second")).join(5)
    assert ran == ["s second refused"] and time.monotonic() - start < 0.2  # told without waiting
    queued.append(in_session("t", job("t")))
    until(lambda: len(heavy.slots.queue) == len(queued))  # another session queues
    release.set()
    for thread in [first, *queued]:
        thread.join(5)
    assert ran == ["s second refused", *([] if running else ["s first"]), "t"]
    assert not heavy.sessions and heavy.slots.free == 1


def test_the_same_session_may_queue_again_once_its_job_has_ended():
    heavy, ran = Heavy(1), []

    def twice():
        for k in range(2):
            with heavy.job("flow"):
                ran.append(k)

    in_session("s", twice).join(5)
    assert ran == [0, 1] and not heavy.sessions and heavy.slots.free == 1


def test_a_job_stopped_at_its_time_limit_is_answered_at_once_when_asked_for_again(monkeypatch):
    monkeypatch.setitem(slots.TIME_LIMITS, "flow", 0.05)
    heavy, store, calls = Heavy(1), BoundedStore(4, 10**9), []

    def compute(deadline):
        calls.append(1)
        for _ in range(100):
            time.sleep(0.01)
            deadline.check()
        return np.zeros(3)

    with pytest.raises(TooLong):
        store.get_or_compute_heavy("key", "flow", compute, heavy=heavy)
    assert len(calls) == 1
    started, release = threading.Event(), threading.Event()
    other = holder(heavy, "other", started, release)  # the slot is busy: a rerun that queued would wait
    started.wait(5)
    start = time.monotonic()
    with pytest.raises(TooLong, match="took longer than 0.05 s and was stopped"):
        store.get_or_compute_heavy("key", "flow", compute, heavy=heavy)
    assert time.monotonic() - start < 0.05 and len(calls) == 1  # not run again, not queued
    release.set()
    other.join(5)
    with pytest.raises(TooLong):  # another input runs (and is stopped in its turn)
        store.get_or_compute_heavy("other key", "flow", compute, heavy=heavy)
    assert len(calls) == 2
    monkeypatch.setitem(slots.TIME_LIMITS, "flow", 60)  # under another limit it is tried again
    assert store.get_or_compute_heavy("key", "flow", compute, heavy=heavy) is not None and len(calls) == 3


def test_the_stopped_jobs_remembered_are_bounded(monkeypatch):
    monkeypatch.setattr(slots, "STOPPED_KEPT", 2)
    monkeypatch.setitem(slots.TIME_LIMITS, "flow", 0)
    heavy = Heavy(1)
    for key in ("a", "b", "c"):
        with pytest.raises(TooLong), heavy.job("flow", key) as deadline:
            deadline.check()
    assert [stop[1] for stop in heavy.stopped] == ["b", "c"]


def test_a_sessions_second_job_is_a_message_on_the_page(monkeypatch):
    from test_app import no_errors, start, submit

    at = start(view="rollout", layer="2")
    at.radio(key="rollout_kind").set_value("Flow").run()
    monkeypatch.setattr(slots, "session_id", lambda: "this session")
    slots.HEAVY.sessions.add("this session")  # the session's earlier run's thread still waits for the slot
    try:
        submit(at, "A sentence only the second-job test uses.")
    finally:
        slots.HEAVY.sessions.discard("this session")
    no_errors(at)
    assert any(w.value.startswith("Your previous computation is still running") for w in at.warning)
    at.run()  # that job has ended: the flow is drawn
    no_errors(at)
    assert not at.warning
