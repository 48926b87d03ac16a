"""The caps as operator settings (environment variables, a bad value ignored and logged), and a computation in a
slot running its kernels at a lower CPU priority."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import torch

from ui.compute import priority as priorities
from ui.compute.slots import Heavy
from ui.compute.stores import BoundedStore

# ---- the caps as operator settings ------------------------------------------------------------------


def test_the_caps_come_from_the_environment():
    from ui.serve.settings import read

    values, warnings = read(
        {
            "ATTENTION_HEAVY_SLOTS": "2",
            "ATTENTION_HEAVY_WAIT_S": "30",
            "ATTENTION_TIME_LIMIT_FLOW": "15.5",
            "ATTENTION_TIME_LIMIT_GQA": " 300 ",
            "ATTENTION_MAX_UPLOAD_MB": "1",
            "ATTENTION_MAX_EXAMPLES": "100",
        }
    )
    assert not warnings
    assert values["heavy_slots"] == 2 and values["heavy_wait_s"] == 30
    assert values["limit_flow"] == 15.5 and values["limit_gqa"] == 300 and values["limit_suite"] == 120
    assert values["max_upload_mb"] == 1 and values["max_examples"] == 100
    assert read({})[0]["heavy_slots"] == 1 and read({})[0]["limit_ablation"] == 60
    long = read({"ATTENTION_LONG_MAX_TOKENS": "4096", "ATTENTION_LONG_MAX_MB": "64", "ATTENTION_TIME_LIMIT_LONG": "30"})
    assert long == ({**read({})[0], "long_max_tokens": 4096, "long_max_mb": 64, "limit_long": 30}, [])
    assert read({})[0]["long_max_tokens"] == 8192 and read({})[0]["long_max_mb"] == 512


@pytest.mark.parametrize(
    "var, bad",
    [
        ("ATTENTION_HEAVY_SLOTS", "0"),
        ("ATTENTION_HEAVY_SLOTS", "1.5"),
        ("ATTENTION_HEAVY_SLOTS", "two"),
        ("ATTENTION_TIME_LIMIT_FLOW", "-1"),
        ("ATTENTION_TIME_LIMIT_SUITE", "nan"),
        ("ATTENTION_TIME_LIMIT_SUITE", "inf"),
        ("ATTENTION_HEAVY_WAIT_S", "1e9"),
        ("ATTENTION_MAX_UPLOAD_MB", "0.5"),
        ("ATTENTION_MAX_EXAMPLES", "5k"),
        ("ATTENTION_LONG_MAX_TOKENS", "0"),
        ("ATTENTION_LONG_MAX_MB", "8"),
    ],
)
def test_a_bad_value_is_ignored_and_said_in_the_log(var, bad):
    from ui.serve.settings import SETTINGS, read

    name = next(k for k, s in SETTINGS.items() if s.var == var)
    values, warnings = read({var: bad})
    assert values[name] == SETTINGS[name].default
    assert len(warnings) == 1 and warnings[0].startswith(f"{var}={bad!r} ignored:")
    assert warnings[0].endswith(f"using the default {SETTINGS[name].default:g}")


@pytest.mark.slow  # 15 s on a busy 2-core machine
def test_the_server_uses_the_settings_and_logs_a_bad_one():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    show = (
        "import ui.compute.slots as c, ui.coref.coref_data as d; print(c.HEAVY.slots.capacity, c.HEAVY_WAIT_S, "
        "c.TIME_LIMITS['ablation'], d.MAX_UPLOAD_BYTES, d.MAX_EXAMPLES)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_")}
    set_ = {
        "ATTENTION_HEAVY_SLOTS": "3",
        "ATTENTION_HEAVY_WAIT_S": "45",
        "ATTENTION_TIME_LIMIT_ABLATION": "20",
        "ATTENTION_MAX_UPLOAD_MB": "1",
        "ATTENTION_MAX_EXAMPLES": "50",
    }
    done = subprocess.run([sys.executable, "-c", show], cwd=root, env={**env, **set_}, capture_output=True, text=True)
    assert done.stdout.split() == ["3", "45.0", "20.0", str(1024 * 1024), "50"], done.stderr
    done = subprocess.run(
        [sys.executable, "-c", show],
        cwd=root,
        env={**env, "ATTENTION_HEAVY_SLOTS": "lots"},
        capture_output=True,
        text=True,
    )
    assert done.stdout.split() == ["1", "120.0", "60.0", str(2 * 1024 * 1024), "5000"], done.stderr
    assert "ATTENTION_HEAVY_SLOTS='lots' ignored: the number of heavy slots must be a whole number" in done.stderr
    check = [sys.executable, "-m", "ui.serve.settings"]
    good = subprocess.run(check, cwd=root, env={**env, **set_}, capture_output=True, text=True)
    assert good.returncode == 0 and "ATTENTION_HEAVY_SLOTS=3\n" in good.stdout
    bad = subprocess.run(check, cwd=root, env={**env, "ATTENTION_TIME_LIMIT_GQA": "0"}, capture_output=True, text=True)
    assert bad.returncode == 1 and "ATTENTION_TIME_LIMIT_GQA='0' ignored" in bad.stderr


def priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def in_a_kernel(elements: int) -> int:
    """The thread's priority while a torch kernel runs on a tensor of `elements` (apply_ calls back into
    Python from inside the kernel, once per element)."""
    seen = []
    torch.zeros(elements).apply_(lambda x: seen.append(priority()) or x)
    return seen[0]


@pytest.mark.skipif(not priorities.may_raise_priority(0), reason="this process may not set a thread's priority back")
@pytest.mark.parametrize("steps", [priorities.BIG_NICE, 7])  # 7: below the cap of 19, so lowering twice would show
def test_a_computation_that_takes_a_slot_runs_its_kernels_at_a_lower_priority_and_its_python_does_not(
    monkeypatch, steps
):
    """A long input's run (or any computation that takes a slot, heavy jobs included) runs its torch
    kernels on big tensors BIG_NICE steps below the page, so a room's short sentences get the cores
    first; its Python, and kernels on small tensors, stay at the page's priority, as does all of a short
    sentence's run. Afterwards the thread is as it was, after an error too."""
    monkeypatch.setattr(priorities, "BIG_NICE", steps)
    monkeypatch.setattr(priorities, "LOW_ELEMENTS", 8)
    store, heavy, seen = BoundedStore(8, 10**9), Heavy(1), {}
    before = priority()

    def compute(name):
        def inner():
            seen[name] = (priority(), in_a_kernel(8), in_a_kernel(4))
            other = threading.Thread(target=lambda: seen.setdefault(f"{name}, another session", in_a_kernel(8)))
            other.start()
            other.join()
            return np.zeros(3)

        return inner

    store.get_or_compute("long", compute("long"))
    store.get_or_compute("short", compute("short"), small=True)
    store.get_or_compute_heavy("flow", "flow", lambda deadline: compute("flow")(), heavy=heavy)
    store.get_or_compute("outer", lambda: (store.get_or_compute("inner", compute("inner")), compute("outer")())[1])
    low = (before, before + priorities.BIG_NICE, before)
    assert {k: v for k, v in seen.items() if "another" not in k} == {
        "long": low,
        "short": (before, before, before),
        "flow": low,
        "inner": low,
        "outer": low,
    }  # nested: once
    assert {v for k, v in seen.items() if "another" in k} == {before}  # other threads' kernels: not lowered
    assert priority() == before and in_a_kernel(8) == before

    def fails():
        torch.zeros(8).apply_(lambda x: 1 / 0)

    with pytest.raises(ZeroDivisionError):
        store.get_or_compute("fails", fails)
    assert priority() == before and in_a_kernel(8) == before


def test_where_the_priority_cannot_be_set_back_it_is_left_alone_and_the_log_says_so(monkeypatch, caplog):
    monkeypatch.setattr(priorities, "may_raise_priority", lambda nice: False)
    monkeypatch.setattr(priorities, "NOTED", [])
    before, seen = priority(), []
    store = BoundedStore(4, 10**9)
    monkeypatch.setattr(priorities, "LOW_ELEMENTS", 1)
    store.get_or_compute("a", lambda: seen.append(in_a_kernel(4)) or np.zeros(1))
    store.get_or_compute("b", lambda: seen.append(in_a_kernel(4)) or np.zeros(1))
    assert seen == [before, before] and priority() == before
    said = [r.getMessage() for r in caplog.records if "priority" in r.getMessage()]
    assert len(said) == 1 and "ulimit -e 20" in said[0]
