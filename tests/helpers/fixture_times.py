"""Where the suite's time goes, per fixture: `python -m pytest -p fixture_times` adds a table of the fixtures whose
set-ups took longest (each set-up timed, summed over the run, with how often it ran and its scope), beside pytest's
own `--durations`. Under pytest-xdist each worker sends its sums to the controller (`workeroutput`), which adds them
up: the times are then those of two workers sharing the machine."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

_TOTAL: dict[tuple[str, str], float] = defaultdict(float)
_COUNT: dict[tuple[str, str], int] = defaultdict(int)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    start = time.perf_counter()
    yield
    key = (fixturedef.argname, fixturedef.scope)
    _TOTAL[key] += time.perf_counter() - start
    _COUNT[key] += 1


def pytest_sessionfinish(session):
    """On an xdist worker: its sums, for the controller (`pytest_testnodedown`)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["fixture_times"] = [[name, scope, _TOTAL[name, scope], _COUNT[name, scope]] for name, scope in _TOTAL]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """On the xdist controller: a finished worker's sums added to the run's."""
    for name, scope, seconds, count in getattr(node, "workeroutput", {}).get("fixture_times", []):
        _TOTAL[name, scope] += seconds
        _COUNT[name, scope] += count


def pytest_terminal_summary(terminalreporter):
    rows = sorted(_TOTAL.items(), key=lambda item: -item[1])[:30]
    terminalreporter.section("slowest fixture set-ups (summed over the run)")
    for (name, scope), seconds in rows:
        terminalreporter.write_line(f"{seconds:9.2f} s  {_COUNT[name, scope]:5d} x  {scope:8}  {name}")
