"""The paths the first page takes: `streamlit run app.py` imports app.py to find its st.App, and that
import warms the process up (the page's modules, the model, the default sentence) before the first
browser has loaded the page; sessions arriving meanwhile wait for it instead of importing alongside it,
and what no first page needs (scipy) is imported after a page is shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.web.server.app_discovery import discover_asgi_app

from ui.serve.preload import WARM_UP_NICE

ROOT = Path(__file__).resolve().parents[2]


def run_script(script: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """`script` in a fresh Python process (sys.argv[1] is the repository), offline."""
    return subprocess.run(
        [sys.executable, "-c", script, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "ATTENTION_WARM_WRITER": "1"},  # as a server by default
    )


def printed(script: str) -> dict:
    """The JSON object `script` prints last, run by run_script; it must exit 0."""
    done = run_script(script)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_streamlit_run_finds_the_app_and_its_import_starts_the_warm_up():
    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.import_string == "app:app"
    source = (ROOT / "app.py").read_text()
    assert "\n    app = st.App(__file__)\n    preload.start_warm_up()\n" in source
    page = source.split('if __name__ == "__main__":\n', 1)[1]
    assert page.startswith("    with preload.page_run():") and "\n        try:\n            main()\n" in page


WARM_UP = r"""
import gc, json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import logging; logging.disable(logging.WARNING)
from ui.serve import preload

assert "torch" not in sys.modules and "pandas" not in sys.modules  # the page's modules wait for the warm-up
transformers_after = []  # whether the first part (the model, the default run) was done if transformers came

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "transformers" and not transformers_after:
            transformers_after.append(preload._done)

sys.meta_path.insert(0, Watch())
before = sys.getswitchinterval()
thread = preload.start_warm_up()
switch_during = sys.getswitchinterval()
collecting_during = gc.isenabled()
assert preload.start_warm_up() is None  # once per process
blocked_at_once = not preload.ready() and not preload._lock.acquire(blocking=False)
errors, waited, nice = [], [], []
figure = preload.loading_figure()  # a page draws it at once: plotly must find no pandas, or a whole one
no_pandas_with_figure = "pandas" not in sys.modules

half_seen = []

def half_imported():
    return [m for m in ("pandas", "pyarrow")
            if m in sys.modules and getattr(sys.modules[m].__spec__, "_initializing", False)]

def session():  # a script run arriving while the process warms up
    try:
        with preload.page_run():
            preload.preload()
            waited.append(preload.ready())
            nice.append(os.getpriority(os.PRIO_PROCESS, thread.native_id))  # the warm-up's, still at its second part
            half_seen.extend(half_imported())  # what plotly would peek at while this run builds a figure
            preload.later()  # a view with a table
            half_seen.extend(half_imported())
            import pandas
            pandas.DataFrame({"a": [1]})  # whole, not half-initialised
    except Exception as err:
        errors.append(repr(err))

sessions = [threading.Thread(target=session) for _ in range(8)]
for s in sessions:
    s.start()
for s in sessions:
    s.join(timeout=300)
thread.join(timeout=300)
from ui.compute.models import LOADED, get_model
from ui.compute.stores import MB, store
from ui.state.state import DEFAULT_SENTENCE
watched = {id(o) for o in gc.get_objects()}  # the collector's generations, not what was frozen

def model_freed():  # dropped from every store with the collector off: freed by its reference counts alone
    import weakref
    from ui.compute.stores import forget_everything
    model = weakref.ref(get_model("")[0])
    gc.disable()
    forget_everything()
    freed = model() is None
    gc.enable()
    return freed

print(json.dumps({
    "switch": [before, switch_during, sys.getswitchinterval()],
    "blocked_at_once": blocked_at_once, "errors": errors, "no_pandas_with_figure": no_pandas_with_figure,
    "waited": waited, "nice": [nice, os.getpriority(os.PRIO_PROCESS, 0)],
    "transformers_after": transformers_after,
    "tokenizer": [type(get_model("")[1]).__name__, get_model("")[1]._tokenizer is not None],
    "loaded": sorted(LOADED), "loading_figure": preload.loading_figure() is not None,
    "default_run": ("", DEFAULT_SENTENCE, "", False) in store("runs", 32, 400 * MB).items,
    "modules": [m for m in preload.PAGE_MODULES + preload.LATER_MODULES + preload.LATER_VIEWS
                if m not in sys.modules],
    "half_seen": half_seen,
    "collecting": [collecting_during, gc.isenabled()], "frozen": gc.get_freeze_count(),
    "torch_watched": id(vars(sys.modules["torch"])) in watched,
    "pandas_watched": id(vars(sys.modules["pandas"])) in watched,
    "model_freed": model_freed(),
}))
"""


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_the_warm_up_loads_the_model_and_the_default_run_while_sessions_wait():
    found = printed(WARM_UP)
    assert found["blocked_at_once"], "a session could slip in before the warm-up took the lock"
    assert found["errors"] == [] and found["waited"] == [True] * 8
    assert found["no_pandas_with_figure"], "pandas was imported before the loading figure, on the first page's path"
    # the bundled model and its default run, then (last) the bundled writer
    assert found["loaded"] == ["", "smollm2"] and found["default_run"] and found["loading_figure"]
    # the first part imports no transformers (the bundled model's tokenizer builds its transformers part when
    # asked); the writer's tokenizer, loaded last, may
    assert found["transformers_after"] in ([], [True]) and found["tokenizer"] == ["FirstUseTokenizer", False]
    # a step below the server's threads (Linux), and the process itself left as it was
    nice, own = found["nice"]
    assert nice == [min(own + WARM_UP_NICE, 19)] * 8 if sys.platform.startswith("linux") else [own] * 8
    assert found["modules"] == []
    assert found["half_seen"] == [], "a page run saw pandas half-imported"
    before, during, after = found["switch"]
    assert during < before and after == before  # the server's thread gets the GIL promptly meanwhile
    # no collections while it imports; then what the imports made is frozen out of later full
    # collections, and the model (which the cache may drop) is still the collector's
    assert found["collecting"] == [False, True]
    assert found["frozen"] > 100_000 and not found["torch_watched"] and not found["pandas_watched"]
    assert found["model_freed"]  # frozen with the rest, it holds no cycle that would keep it once dropped


def test_without_a_server_preload_imports_the_lazy_modules_itself():
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from ui.serve import preload; preload.preload(); "
        "print(preload.ready(), preload.loading_figure(), 'pandas' in sys.modules, 'torch' in sys.modules, "
        "'scipy.sparse.csgraph' in sys.modules, end=' '); preload.later(); print('scipy.sparse.csgraph' in sys.modules)"
    )
    done = run_script(script, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "None", "True", "False", "True", "True"]  # scipy too, with pandas


FIRST_PAGE = r"""
import json, sys, threading
sys.path.insert(0, sys.argv[1])
import logging; logging.disable(logging.WARNING)
first = {}

class Watch:  # who first looks for pandas, and how many page runs are under way then
    def find_spec(self, name, path=None, target=None):
        if name in ("pandas", "pyarrow") and name not in first:
            preload = sys.modules.get("ui.serve.preload")
            first[name] = [threading.current_thread().name, preload._runs if preload else None]

sys.meta_path.insert(0, Watch())
# `streamlit run` has imported streamlit (plotly and numpy with it) before it imports app.py, which starts the
# warm-up: in the other order the two threads can each hold a module the other is importing (Python then hands one
# of them numpy half made, seen once at a load average of 3)
import streamlit
from ui.serve import preload
warm = preload.start_warm_up()
from streamlit.testing.v1 import AppTest
page = AppTest.from_file(sys.argv[1] + "/app.py", default_timeout=300).run()  # the default page: the head view
warm.join(timeout=300)
print(json.dumps({"first": first, "charts": len(page.get("plotly_chart")), "exceptions": len(page.exception),
                  "errors": [e.value for e in page.error], "later": [m for m in preload.LATER_MODULES
                                                                   if m not in sys.modules]}))
"""


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_the_first_page_is_drawn_before_pandas_is_imported():
    """pandas (0.2-0.3 s to import) is no part of the first page: the warm-up imports it after the page's run,
    with no page run under way (plotly peeks at pandas while it builds a figure)."""
    found = printed(FIRST_PAGE)
    assert found["charts"] >= 1 and found["exceptions"] == 0 and found["errors"] == []
    assert found["first"] == {"pandas": ["warm-up", 0], "pyarrow": ["warm-up", 0]}
    assert found["later"] == []


THREADS = r"""
import sys
sys.path.insert(0, sys.argv[1])
import logging; logging.disable(logging.WARNING)
import threading
import torch

def threads_of_a_new_thread():  # as a session's script thread sees it (torch's setting is per process)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    return seen[0]

torch.set_num_threads(2)
import ui.compute.computations, ui.compute.runs, ui.compute.stores  # the page's modules set nothing on import
imported = threads_of_a_new_thread()
from ui.serve import preload
preload.page_shown()  # as if a page were drawn: its last imports need not wait
preload.start_warm_up().join(timeout=300)  # the server's warm-up sets one thread per computation
print(imported, threads_of_a_new_thread())
"""


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_importing_the_page_leaves_torchs_threads_and_the_warm_up_sets_one():
    done = run_script(THREADS, timeout=300)
    assert done.stdout.split() == ["2", "1"], done.stderr[-2000:]


IMPORTED_AS_WORKERS_MAIN = """
import importlib.util, json, sys, threading
spec = importlib.util.spec_from_file_location("__mp_main__", "app.py")
module = importlib.util.module_from_spec(spec)
sys.modules["__mp_main__"] = module
spec.loader.exec_module(module)
print(json.dumps({"threads": [t.name for t in threading.enumerate()], "torch": "torch" in sys.modules}))
"""


def test_the_page_imported_as_a_workers_main_module_does_not_warm_up():
    """Under `streamlit run app.py`, multiprocessing has each flow worker (ui/compute/workers.py) import the page,
    app.py,
    as __mp_main__. That must not start the server's warm-up (torch, the model and the default run: a worker went
    from 96 to 439 MB with it), which only the server's own import of app.py starts."""
    found = printed(IMPORTED_AS_WORKERS_MAIN)
    assert "warm-up" not in found["threads"] and not found["torch"]
