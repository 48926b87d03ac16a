"""How a heavy computation looks on the page: a note while the server's heavy slot is busy with
another visitor's job, and a message (never a traceback) when the wait or the computation runs
past its limit. The caps themselves are operator settings (ui/serve/settings.py), used by ui/compute/slots.py."""

from __future__ import annotations

import contextlib

import streamlit as st

from .slots import HEAVY, ServerBusy, SessionBusy, TooLong

ADVICE = {
    "flow": "try a shorter sentence or Rollout",
    "suite": "try a smaller suite",
    "comparison": "try again with a shorter sentence",
    "ablation": "try a shorter sentence",
    "gqa": "try a shorter sentence or a smaller model",
    "global": "try fewer tokens, one head, or PCA",
    "long": "try a shorter text or a smaller model",
}


def waiting_message(waited: float, most: float) -> str:
    return (
        f"Another visitor's computation is running; yours starts when it ends… "
        f"(waiting {waited:.0f} s, at most {most:.0f} s)"
    )


def too_long_message(err: TooLong) -> str:
    return (
        f"This took longer than {err.limit:g} s and was stopped; {ADVICE.get(err.kind, 'try a smaller input')}. "
        "Nothing of it was kept."
    )


def busy_message(err: ServerBusy) -> str:
    return (
        f"The server stayed busy with other visitors' computations for {err.waited:.0f} s, so yours did not "
        "start. Try again in a moment."
    )


def session_busy_message() -> str:
    return (
        "Your previous computation is still running or waiting for the server (each visitor has one at a "
        "time), so this one did not start. Try again when it has ended."
    )


def deadline_check():
    """A progress callback that raises TooLong once this thread's heavy job is past its time limit;
    None outside a heavy job. For a computation called inside a job without its Deadline at hand."""
    deadline = HEAVY.deadline()
    return None if deadline is None else deadline.wrap(None)


class Outcome:
    """Whether the guarded block finished: `ok` is False when it was stopped (the message is shown)."""

    ok = True


@contextlib.contextmanager
def heavy_guard():
    """Around a view's call of a heavy computation: while it waits for the server's slot a note says
    so and counts the seconds; a time limit or a wait that runs out becomes a warning on the page,
    and `outcome.ok` is False so the view can skip what needed the result."""
    note = st.empty()
    outcome = Outcome()

    def on_wait(waited: float, most: float) -> None:
        note.info(waiting_message(waited, most))

    try:
        with HEAVY.waiting(on_wait):
            yield outcome
    except TooLong as err:
        outcome.ok = False
        note.warning(too_long_message(err))
    except ServerBusy as err:
        outcome.ok = False
        note.warning(busy_message(err))
    except SessionBusy:
        outcome.ok = False
        note.warning(session_busy_message())
    else:
        note.empty()
