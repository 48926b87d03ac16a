"""What the first page waits for, done once per process, before any view is drawn: the page's modules,
and (when the server starts) the bundled model and the default sentence's run; then what no first page
needs (LATER_MODULES: pandas for tables, scipy, the views using them). transformers is not among them: the
bundled model's tokenizer builds its transformers part when a view first asks for more than `encode`
(attention/load/tokenizer.py), which no page of one sentence does; imported here, it held up the runs arriving
meanwhile (a first 252-token run took 1.7 s, not 0.3-0.5).

Two sessions opening their first views at once would otherwise import a module from two script threads
together, and one of them can be handed a half-initialised module; plotly even peeks at pandas (in
sys.modules) while it builds any figure, and a half-imported pandas breaks it. So one thread imports
while the page runs wait: the first part under one lock that every run waits for (`preload`), the
second only while no page run is under way (`page_run` marks one; runs arriving meanwhile wait).

`streamlit run app.py` imports app.py as a module to find its `st.App`, and that import calls
`start_warm_up`: a thread then does all of the above (torch, the model, the first run: seconds) while
the server starts and the first browser loads the page, and the first script run waits for it in
`preload`. LATER_MODULES come once a page is shown (`page_shown`); whatever needs them first calls
`later`, which waits for that (or, with no warm-up, imports them). Then the bundled writer is loaded
(`warm_writer`), so that a talk's first page of SmolLM2 does not wait for it.
The garbage collector is off while the thread imports (its passes would find nothing to free), and
what the imports made is then frozen out of its sight.
Without a server (AppTest, a notebook) nothing is warmed and `preload` imports LATER_MODULES itself
(the page then sets torch's threads: `one_thread_per_computation`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import sys
import threading

from ..page import registry

# the modules a first page needs: the page's own (app.py imports them inside main, the views' on first use), torch
# and the figures
PAGE_MODULES = (
    "ui.compute.models",
    "ui.compute.runs",
    "ui.state.state",
    "ui.page.page",
    "ui.page.controls",
    "ui.compute.computations",
    *dict.fromkeys(v.module for v in registry.VIEWS if not v.later),
    "ui.page.present",
    "ui.page.outline",
    "viz",
)
# what no first page needs, imported after one is shown: pandas and pyarrow (tables), scipy (attention flow where
# no worker process starts: ui/compute/workers.py); the warm-up imports the views that use them too (LATER_VIEWS:
# registry
# rows marked `later`)
LATER_MODULES = ("pandas", "pyarrow", "scipy.sparse", "scipy.sparse.csgraph")
LATER_VIEWS = tuple(dict.fromkeys(v.module for v in registry.VIEWS if v.later))
LATER_AFTER_S = 10  # the warm-up imports LATER_MODULES once a page is shown, or after this long without one
# ... and this long after the page's run ended, unless a view asks for them: meanwhile the server sends the page its
# last messages and the browser draws it, which an import holding the interpreter would hold up by tenths of a second
SHOWN_GRACE_S = 1.5
# While the warm-up imports (holding the GIL for seconds), the server's thread must still answer the
# browser loading the page promptly: it gets the GIL within this long of asking, not Python's 5 ms.
SWITCH_S = 0.0005
# ... and the thread runs a step below the server's own threads (Linux's niceness, 10 more than theirs): the CPU goes
# first to the server sending the page and its scripts, and to the browser where it runs on the same machine, which
# must still fetch and start its chart library after the warm-up is done. `python bench/render.py --quick --no-bertviz
# --no-big`, 2 cores, twice each way: cold start medians 2.71 and 2.82 s (single starts 2.65-2.84) against 2.98 and
# 2.97 s (2.90-3.06) at the server's priority.
WARM_UP_NICE = 10
_SWITCH_BEFORE = sys.getswitchinterval()
_lock = threading.Lock()
_done = False
_later_lock = threading.Lock()  # held while LATER_MODULES are imported where no warm-up imports them
_later_done = False
_page_shown = threading.Event()
_runs_changed = threading.Condition()  # guards the three below
_runs = 0  # page runs under way (page_run): threads that may build a figure
_wanted = 0  # callers of `later` waiting for LATER_MODULES: new runs wait too, so that the import comes
_importing = False  # the warm-up is importing LATER_MODULES: new runs wait for it
_depth = threading.local()  # how many page_run blocks this thread is in
_started = False
_one_thread = False  # torch set to one thread per computation
_loading_figure = None  # built first, so the page can show it while the rest is warmed
_loading_ready = threading.Event()
log = logging.getLogger("attention-app")


def preload() -> None:
    """Wait for the warm-up's first part (the page's modules, the model, the default run); without a
    warm-up, import LATER_MODULES once, here. Callers arriving meanwhile wait."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        later()  # no warm-up (AppTest, a notebook): everything at once, as nothing is drawn meanwhile
        _done = True


@contextlib.contextmanager
def page_run():
    """A script run, or anything else that builds figures or tables off the warm-up's thread. plotly peeks
    at pandas while it builds a figure (sys.modules) and a half-imported pandas breaks it: so the warm-up
    imports LATER_MODULES only once no page run is under way, and runs arriving meanwhile wait for it (a
    few tenths of a second, once per process). A page run ending says a page was shown (`page_shown`)."""
    global _runs
    with _runs_changed:
        _runs_changed.wait_for(lambda: _later_done or not (_importing or _wanted))
        _runs += 1
    _depth.n = getattr(_depth, "n", 0) + 1
    try:
        yield
    finally:
        _depth.n -= 1
        with _runs_changed:
            _runs -= 1
            _runs_changed.notify_all()
        page_shown()


def later() -> None:
    """Have LATER_MODULES imported before going on: wait for the warm-up to import them (stepping out of this
    thread's page runs meanwhile, and asking for them now: no first page to wait for), or, where no warm-up
    started, import them here."""
    global _later_done, _runs, _wanted
    if _later_done:
        return
    if not _started:
        with _later_lock:
            if not _later_done:
                _import(LATER_MODULES)
                _later_done = True
        return
    inside = getattr(_depth, "n", 0)
    with _runs_changed:
        _runs -= inside
        _wanted += 1
        _runs_changed.notify_all()
        _page_shown.set()
        _runs_changed.wait_for(lambda: _later_done)
        _wanted -= 1
        _runs += inside


def page_shown() -> None:
    """A page has been drawn: the warm-up may go on to LATER_MODULES without holding it up."""
    _page_shown.set()


def ready() -> bool:
    """Whether `preload` returns at once."""
    return _done


def loading_figure():
    """The "Loading the model…" figure, built first by the warm-up thread (None without a warm-up): a page
    may draw it while the warm-up goes on."""
    if _started:
        _loading_ready.wait(timeout=30)
    return _loading_figure


def start_warm_up() -> threading.Thread | None:
    """Start the warm-up thread, once per process; it holds the lock until its first part is done."""
    global _started
    if not _lock.acquire(blocking=False):  # a script run is importing: nothing left to warm ahead of it
        return None
    if _started or _done:
        _lock.release()
        return None
    _started = True  # the lock stays taken, so no session slips in before the thread: it releases it
    sys.setswitchinterval(SWITCH_S)
    thread = threading.Thread(target=_warm_up, name="warm-up", daemon=True)
    thread.start()
    return thread


def _warm_up() -> None:
    global _done, _loading_figure
    # The collector is off for the imports below and what they made is frozen after (gc.freeze): it all
    # lives as long as the process. `python bench/warmup.py`, 10 fresh processes each on 2 cores: the
    # warm-up took a median 2.12 CPU-s against 2.49 with the collector left alone (its 5 full collections
    # freed next to nothing), and a full collection after it, which stops every session, 0.000 s against
    # 0.12-0.40 s (318,636 objects walked).
    gc.disable()
    if sys.platform.startswith("linux"):  # a thread's own priority (elsewhere this call would set the process's)
        with contextlib.suppress(OSError):
            thread = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + WARM_UP_NICE, 19))
    try:
        try:
            # first the figure, so that the page can draw it while the rest is imported (pandas is not: plotly
            # finds no pandas to peek at, and LATER_MODULES wait for the page runs)
            from viz._style import message_figure

            _loading_figure = message_figure("Loading the model…")
        finally:
            _loading_ready.set()
        _import(PAGE_MODULES)
        one_thread_per_computation()

        from ui.compute.models import get_model
        from ui.compute.runs import get_run
        from ui.state.state import DEFAULT_SENTENCE

        log_how_served()

        gc.freeze()  # before the model and the run: a model can be dropped from the cache

        get_model("")  # refused by a server whose model list leaves out the bundled one: then nothing to warm
        get_run("", DEFAULT_SENTENCE, "")
    except Exception:  # the page meets the same failure and says so
        log.warning("warming up failed", exc_info=True)
    finally:
        _done = True
        gc.enable()
        sys.setswitchinterval(_SWITCH_BEFORE)
        _lock.release()
    _import_later()


def _import_later() -> None:
    """The warm-up's second part: LATER_MODULES, once a page is shown (the first page goes first: these would
    only share its core) and no page run is under way."""
    global _importing, _later_done
    _page_shown.wait(LATER_AFTER_S)
    with _runs_changed:
        _runs_changed.wait_for(lambda: _wanted > 0, timeout=SHOWN_GRACE_S)
        _runs_changed.wait_for(lambda: _runs <= 0)
        _importing = True
    gc.disable()  # as for the first part: the imports' objects live as long as the process
    try:
        _import(LATER_MODULES + LATER_VIEWS)
        # then frozen out of every later full collection's walk (left in it, they took the head view's drawing
        # at 512 tokens from 0.2 to 0.4 s). First a collection, so that no garbage is frozen: the loaded model
        # and runs are frozen too, and are freed by their reference counts when dropped (they hold no cycle)
        gc.collect()
        gc.freeze()
    finally:
        gc.enable()
        with _runs_changed:
            _importing, _later_done = False, True
            _runs_changed.notify_all()
    warm_writer()


WARM_WRITER_VAR = "ATTENTION_WARM_WRITER"  # "0": the bundled writer is loaded when a page first asks for it


def warm_writer() -> None:
    """The bundled writer loaded too, last (its GGUF read and dequantized: 6-7 s on 2 quiet cores, 16 s at a load
    average of 6; 1 GB resident), so that a talk's first page of it (`?model=smollm2`) finds it loaded; a page
    asking for it meanwhile waits for this load, not a second one. Nothing where it is not installed, the server's
    model list leaves it out, or ATTENTION_WARM_WRITER=0 (a server for a reader only, or one of many started in
    turn: each browser test's server)."""
    from attention.load.sources import WRITER_NAME

    if os.environ.get(WARM_WRITER_VAR) == "0":
        log.info("the bundled writer is loaded when a page asks for it (%s=0)", WARM_WRITER_VAR)
        return

    try:
        from ui.compute.models import get_model

        get_model(WRITER_NAME)
    except Exception as err:  # not installed, not in the list: the page says so when it is asked for
        log.info("the bundled writer is not warmed: %s", err)


def one_thread_per_computation() -> None:
    """Each computation runs on one core and a few (ui/compute/stores.py's COMPUTE_SLOTS) run at once: on a small
    machine that also draws pages, two threads per forward pass mostly wait for each other (a 16-token
    submission took 0.2-0.3 s of script time with two, 0.05-0.1 s with one). Set before any model runs,
    so every thread has it: by the warm-up, or by the page (app.py) where there is none. Once per process."""
    global _one_thread
    if _one_thread:
        return
    import torch

    torch.set_num_threads(1)
    _one_thread = True


def log_how_served() -> None:
    """One line in the server's log at start-up: the address it listens on, what its model box loads and which
    of its files the page reads (ui/serve/sources.py's `served`)."""
    from ui.serve.sources import served

    log.warning(served())


def _import(names) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # the view that needs it says so when it is asked for
            log.warning("could not import %s", name)
