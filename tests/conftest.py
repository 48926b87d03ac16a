"""Shared fixtures: the bundled MiniLM and a tiny random BERT checkpoint written to a temp folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The app tests compare the page with float32 runs on the CPU; on a machine with a GPU, ATTENTION_DEVICE's
# default (auto) would put the app's model there in bfloat16. Set it to run them on the GPU
# (tests/families/test_cuda.py puts its models there itself).
os.environ.setdefault("ATTENTION_DEVICE", "cpu")
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


def pytest_collection_modifyitems(items):
    """Every test in tests/browser/ drives Chromium: marked `browser` here, so that the everyday selection
    (`-m "not slow and not browser"`, pytest.ini) leaves them out without a mark on each."""
    for item in items:
        if item.path.name.startswith("test_browser"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def minilm():
    from attention import load_bert

    return load_bert()
