"""What the first page waits for, done once per process, under one lock, before any view is drawn:
the page's modules, the modules the views import only when first needed, and (when the server
starts) the bundled model and the default sentence's run.

Two sessions opening their first views at once would otherwise import pandas (a table, the head
comparison) or scipy (attention flow) from two script threads together, and one of them can be
handed a half-initialised module (plotly itself peeks at a half-imported pandas while it builds a
figure). Here one thread imports them while the others wait; every later run finds them done and
goes straight on.

`streamlit run app.py` imports app.py as a module to find its `st.App`, and that import calls
`start_warm_up`: a thread then does all of the above (torch, the model, the first run: seconds) while
the server starts and the first browser loads the page, and the first script run waits for it in
`preload`. What no first page needs (LATER_MODULES: scipy, for attention flow where no worker process
starts) comes after: the thread imports it once the first page is shown (`page_shown`), and whatever
needs it first calls `later`, which waits for that or imports it.
The garbage collector is off while the thread imports (its passes would find nothing to free), and
what the imports made is then frozen out of its sight.
Without a server (AppTest, a notebook) nothing is warmed and `preload` imports LAZY_MODULES itself
(the page then sets torch's threads: `one_thread_per_computation`).
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
import threading

from . import registry

LAZY_MODULES = ("pandas", "pyarrow")
# attention flow's, in this process only where no worker process starts (ui/workers.py): after the first page
LATER_MODULES = ("scipy.sparse", "scipy.sparse.csgraph")
LATER_AFTER_S = 10  # the warm-up imports LATER_MODULES once a page is shown, or after this long without one
# the page's own modules (app.py imports them inside main, the views' on first use): torch and the figures
PAGE_MODULES = (
    "ui.models",
    "ui.runs",
    "ui.state",
    "ui.page",
    "ui.controls",
    "ui.computations",
    *dict.fromkeys(v.module for v in registry.VIEWS),
    "ui.present",
    "viz",
)
# While the warm-up imports (holding the GIL for seconds), the server's thread must still answer the
# browser loading the page promptly: it gets the GIL within this long of asking, not Python's 5 ms.
SWITCH_S = 0.0005
_SWITCH_BEFORE = sys.getswitchinterval()
_lock = threading.Lock()
_done = False
_later_lock = threading.Lock()
_later_done = False
_page_shown = threading.Event()
_started = False
_one_thread = False  # torch set to one thread per computation
_loading_figure = None  # built first, so the page can show it while the rest is warmed
_loading_ready = threading.Event()
log = logging.getLogger("attention-app")


def preload() -> None:
    """Import LAZY_MODULES once (or wait for the warm-up to finish); callers arriving meanwhile wait."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        _import(LAZY_MODULES)
        _done = True


def later() -> None:
    """Import LATER_MODULES once (or wait for the warm-up to import them); callers arriving meanwhile wait."""
    global _later_done
    if _later_done:
        return
    with _later_lock:
        if not _later_done:
            _import(LATER_MODULES)
            _later_done = True


def page_shown() -> None:
    """A page has been drawn: the warm-up may go on to LATER_MODULES without holding it up."""
    _page_shown.set()


def ready() -> bool:
    """Whether `preload` returns at once."""
    return _done


def loading_figure():
    """The "Loading the model…" figure, built by the warm-up thread once LAZY_MODULES are imported
    (None without a warm-up): a page may draw it while the warm-up goes on."""
    if _started:
        _loading_ready.wait(timeout=30)
    return _loading_figure


def start_warm_up() -> threading.Thread | None:
    """Start the warm-up thread, once per process; it holds the lock until it is done."""
    global _started
    if not _lock.acquire(blocking=False):  # a script run is importing: nothing left to warm ahead of it
        return None
    if _started or _done:
        _lock.release()
        return None
    _started = True  # the lock stays taken, so no session slips in before the thread: it releases it
    later_too = _later_lock.acquire(blocking=False)  # False: a script run is importing them already
    sys.setswitchinterval(SWITCH_S)
    thread = threading.Thread(target=_warm_up, args=(later_too,), name="warm-up", daemon=True)
    thread.start()
    return thread


def _warm_up(later_too: bool) -> None:
    global _done, _later_done, _loading_figure
    # The collector is off for the imports below and what they made is frozen after (gc.freeze): it all
    # lives as long as the process. `python bench/warmup.py`, 10 fresh processes each on 2 cores: the
    # warm-up took a median 2.12 CPU-s against 2.49 with the collector left alone (its 5 full collections
    # freed next to nothing), and a full collection after it, which stops every session, 0.000 s against
    # 0.12-0.40 s (318,636 objects walked).
    gc.disable()
    try:
        try:
            # first what plotly peeks at while it builds a figure (a half-imported pandas breaks it), so
            # that the page can draw the loading figure while the rest is imported
            _import(LAZY_MODULES)
            from viz._style import message_figure

            _loading_figure = message_figure("Loading the model…")
        finally:
            _loading_ready.set()
        _import(PAGE_MODULES)
        one_thread_per_computation()
        from transformers import AutoTokenizer  # noqa: F401  (what loading the model imports first)

        from ui.models import get_model
        from ui.runs import get_run
        from ui.state import DEFAULT_SENTENCE

        warn_if_open()

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
    if later_too:
        try:
            _page_shown.wait(LATER_AFTER_S)  # the first page goes first: these would only share its core
            _import(LATER_MODULES)
        finally:
            _later_done = True
            _later_lock.release()


def one_thread_per_computation() -> None:
    """Each computation runs on one core and a few (ui/stores.py's COMPUTE_SLOTS) run at once: on a small
    machine that also draws pages, two threads per forward pass mostly wait for each other (a 16-token
    submission took 0.2-0.3 s of script time with two, 0.05-0.1 s with one). Set before any model runs,
    so every thread has it: by the warm-up, or by the page (app.py) where there is none. Once per process."""
    global _one_thread
    if _one_thread:
        return
    import torch

    torch.set_num_threads(1)
    _one_thread = True


def warn_if_open() -> None:
    """One line in the server's log at start-up when the model box is unlocked: Streamlit listens on every
    network interface by default, and then any visitor may load any folder or hub id on this machine."""
    from ui.sources import SOURCES_VAR, policy

    if not policy().locked:
        log.warning(
            "%s is not set: this server listens on every network interface and loads any folder or hub id "
            'a visitor names. On a shared network, set %s (e.g. %s="" for the bundled model only) or '
            "--server.address 127.0.0.1.",
            SOURCES_VAR,
            SOURCES_VAR,
            SOURCES_VAR,
        )


def _import(names) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # the view that needs it says so when it is asked for
            log.warning("could not import %s", name)
