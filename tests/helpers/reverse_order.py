"""The suite in reverse: `python -m pytest -p reverse_order` runs the collected tests last to first, so that a test
which passes only after another has run (a fixture's state, a module imported, a cache filled) shows. With pytest-xdist
each worker is sent its tests in that order too."""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.reverse()
