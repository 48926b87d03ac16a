"""Shared fixtures: the bundled MiniLM and a tiny random BERT checkpoint written to a temp folder."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The app tests compare the page with float32 runs on the CPU; on a machine with a GPU, ATTENTION_DEVICE's
# default (auto) would put the app's model there in bfloat16. Set it to run them on the GPU
# (tests/families/test_cuda.py puts its models there itself).
os.environ.setdefault("ATTENTION_DEVICE", "cpu")
# pytest-xdist's workers share the cores: one torch thread each unless the caller says otherwise, so that two workers
# do not each spread over every core (the servers and command lines they start inherit it)
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# ...and that count fixed: MKL may otherwise choose how many threads a product takes, call by call, so that two runs
# of one pass (the long path's bit-equal tiles, the bundled writer's 0.0) could add in different orders; torch's
# set_num_threads turns that choice off
import torch  # noqa: E402

torch.set_num_threads(torch.get_num_threads())
# Each browser module starts a server of its own, and each server would load the bundled writer once its first page
# is shown (ui/serve/preload.py: 5-6 CPU-seconds and 1 GB, while the test's pages run): the tests' servers load it
# when a page asks for it. tests/browser/test_browser_state.py's fresh server and the warm-up tests (test_hardening,
# test_speed_paths) warm it as a server does by default.
os.environ.setdefault("ATTENTION_WARM_WRITER", "0")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tiny import TINY, TINY_VOCAB, make_tiny, reference_model, write_tiny_tokenizer  # noqa: E402  (re-exported)

__all__ = ["ROOT", "TINY", "TINY_VOCAB", "make_tiny", "reference_model", "write_tiny_tokenizer"]


@pytest.fixture(scope="session", autouse=True)
def readable_temp(tmp_path_factory):
    """The page reads the server's files only under ATTENTION_FILE_DIRS (ui/serve/sources.py): the tests' checkpoints,
    corpora and points are written under pytest's temp folder, and the repository's data/ is the default, so
    both are listed (for the servers the browser tests start too). tests/app/test_serving.py sets its own."""
    os.environ.setdefault("ATTENTION_FILE_DIRS", f"{tmp_path_factory.getbasetemp()};{ROOT / 'data'}")


@pytest.fixture(scope="session", autouse=True)
def components_scanned_once():
    """Each new AppTest scans every installed package's metadata for Streamlit components (about 0.35 s of a
    first run's 0.38 s on the default page); the packages do not change during a run, so the scan is made once
    per process and each AppTest registers its result as before."""
    from streamlit.components.v2 import manifest_scanner

    scan = manifest_scanner.scan_component_manifests
    found = scan()
    manifest_scanner.scan_component_manifests = lambda max_workers=None: list(found)
    yield
    manifest_scanner.scan_component_manifests = scan


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Every test in tests/browser/ drives Chromium: marked `browser` here, so that the everyday selection
    (`-m "not slow and not browser"`, pytest.ini) leaves them out without a mark on each. Each browser module is
    one group for pytest-xdist (`--dist loadgroup`, pytest.ini), so that its server and Chromium start on one
    worker, not on each; the other tests go to whichever worker is free (grouped by module they took 5% longer),
    but for the modules that name a group themselves (`xdist_group`: the Ray tests share one Ray, the SmolLM2
    tests one load)."""
    for item in items:
        if item.path.name.startswith("test_browser"):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


def pytest_collection_finish(session):
    """The modules imported by collection (torch, transformers, streamlit, every test module) stay for the run:
    frozen out of the collector's full passes, which otherwise walk them again each time."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def minilm():
    from attention import load_bert

    return load_bert()
