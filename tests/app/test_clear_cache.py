"""A visitor's "Clear caches" (Streamlit honours it from any browser: AppSession's handler clears
st.cache_data and st.cache_resource) leaves the server as it was: the loaded models, the stores and
what they hold, the budget and its slots, the heavy slot held, the kept resources."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
from streamlit.runtime.app_session import AppSession

from ui.compute import models
from ui.compute.slots import HEAVY
from ui.compute.stores import MB, budget, store


def clear_caches_as_a_visitor() -> None:
    """What a browser's clear_cache message runs on the server: AppSession's own handler."""
    AppSession._handle_clear_cache_request(SimpleNamespace(_session_state=SimpleNamespace(clear=lambda: None)))


def test_a_visitors_clear_cache_leaves_the_models_stores_and_slots_alone(monkeypatch):
    from ui.compute.computations import get_mlm_head
    from ui.compute.runs import get_run
    from ui.compute.workers import flow_workers
    from ui.coref.coref_data import set_examples

    loads = []
    real = models.load_model
    monkeypatch.setattr(models, "load_model", lambda *a, **kw: loads.append(a) or real(*a, **kw))
    model = models.get_model("")
    run = get_run("", "A sentence the clear-cache test alone runs.", "")
    runs = store("runs", 32, 400 * MB)
    runs.put("clear-cache test", np.zeros(8))
    shared, kept = budget(), (get_mlm_head(""), set_examples("builtin"), flow_workers())
    caps = (shared.max_bytes, shared.slots._value, HEAVY.slots.capacity)
    loads_before = len(loads)
    holding, release = threading.Event(), threading.Event()

    def heavy_job():
        with HEAVY.job("flow"):
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=heavy_job)
    thread.start()
    assert holding.wait(5)
    try:
        clear_caches_as_a_visitor()
        assert HEAVY.slots.free == 0 and len(HEAVY.sessions) == 1  # the job's slot is still its own
    finally:
        release.set()
        thread.join(5)
    assert HEAVY.slots.free == HEAVY.slots.capacity
    assert models.get_model("") is model and len(loads) == loads_before  # not loaded again
    assert budget() is shared and store("runs", 32, 400 * MB) is runs
    assert runs.get("clear-cache test") is not None
    assert get_run("", "A sentence the clear-cache test alone runs.", "") is run
    assert (shared.max_bytes, shared.slots._value, HEAVY.slots.capacity) == caps
    assert all(a is b for a, b in zip((get_mlm_head(""), set_examples("builtin"), flow_workers()), kept))
