"""Issue 16's caps: one heavy computation at a time per server, released however it ends; a time
limit per kind, checked at progress updates, with nothing partial kept; a waiting session told so;
and every size cap's message naming its limit."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from test_app import no_errors, start, submit

from ui.compute import slots, stores
from ui.compute.slots import Heavy, ServerBusy, TooLong
from ui.compute.stores import BoundedStore


class Stopped(BaseException):
    """Stands for Streamlit's stop/rerun exceptions, which are not Exceptions either."""


@pytest.fixture
def quick_wait(monkeypatch):
    monkeypatch.setattr(slots, "HEAVY_WAIT_S", 0.6)
    monkeypatch.setattr(slots, "WAIT_POLL_S", 0.1)


def free(heavy: Heavy) -> bool:
    if heavy.slots.acquire(blocking=False):
        heavy.slots.release()
        return True
    return False


def test_the_server_slot_is_exclusive_and_a_waiter_gives_up(quick_wait):
    heavy = Heavy(1)
    holding, done = threading.Event(), threading.Event()

    def hold():
        with heavy.job("flow"):
            holding.set()
            done.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait(5)
    waits = []
    with heavy.waiting(lambda waited, most: waits.append((waited, most))):
        with pytest.raises(ServerBusy):
            with heavy.job("flow"):
                pytest.fail("ran while another job held the slot")
    assert waits and all(most == 0.6 for _, most in waits)
    done.set()
    thread.join()
    assert free(heavy)


def test_the_slot_is_reentrant_and_released_on_error_and_on_stop():
    heavy = Heavy(1)
    with heavy.job("comparison"):
        with heavy.job("flow"):  # a heavy computation inside another: the same slot
            assert not free(heavy)
    assert free(heavy)
    with pytest.raises(RuntimeError):
        with heavy.job("flow"):
            raise RuntimeError("boom")
    assert free(heavy)
    with pytest.raises(Stopped):
        with heavy.job("suite"):
            raise Stopped()
    assert free(heavy)


def test_past_its_deadline_a_computation_raises_and_nothing_is_kept(monkeypatch):
    monkeypatch.setitem(slots.TIME_LIMITS, "flow", 0.05)
    heavy, store = Heavy(1), BoundedStore(4, 10**9)
    seen = []

    def compute(deadline):
        for k in range(100):
            time.sleep(0.01)
            deadline.wrap(seen.append)(k)
        return np.zeros(3)

    with pytest.raises(TooLong) as err:
        store.get_or_compute_heavy("key", "flow", compute, heavy=heavy)
    assert err.value.limit == 0.05 and 0 < len(seen) < 100
    assert store.get("key") is None and free(heavy)
    monkeypatch.setitem(slots.TIME_LIMITS, "flow", 60)
    assert store.get_or_compute_heavy("key", "flow", compute, heavy=heavy) is not None


def test_a_flow_past_its_time_limit_is_a_message_and_the_view_stays_usable(monkeypatch):
    at = start(view="rollout", layer="1")
    at.radio(key="rollout_kind").set_value("Flow").run()
    monkeypatch.setitem(slots.TIME_LIMITS, "flow", 0)
    submit(at, "A short sentence the flow test alone uses.")
    no_errors(at)
    assert any("took longer than 0 s and was stopped" in w.value for w in at.warning)
    assert free(slots.HEAVY)
    monkeypatch.setitem(slots.TIME_LIMITS, "flow", 60)
    at.run()
    no_errors(at)
    assert not at.warning
    assert any((f := e.proto.spec) and '"derived"' in f for e in at.get("plotly_chart"))


def test_a_waiting_session_is_told_and_then_told_the_server_stayed_busy(monkeypatch, quick_wait):
    import ui.compute.limits as limits

    shown = []
    real = limits.waiting_message
    monkeypatch.setattr(limits, "waiting_message", lambda *a: shown.append(real(*a)) or shown[-1])
    at = start(view="rollout", layer="2")
    at.radio(key="rollout_kind").set_value("Flow").run()
    assert slots.HEAVY.slots.acquire(timeout=5)  # another visitor's job
    try:
        submit(at, "Another short sentence only the waiting test uses.")
    finally:
        slots.HEAVY.slots.release()
    no_errors(at)
    assert shown and shown[0].startswith("Another visitor's computation is running; yours starts when it ends")
    assert any("stayed busy" in w.value and "Try again" in w.value for w in at.warning)
    at.run()  # the slot is free again: the flow is drawn
    no_errors(at)
    assert not at.warning


def test_a_suite_past_its_time_limit_is_a_message(monkeypatch, tiny_dir):
    from test_app_coref import span_lines, upload

    monkeypatch.setitem(slots.TIME_LIMITS, "suite", 0)
    at = start(view="coref", coref="suite", model=str(tiny_dir))
    at, _ = upload(at, span_lines()[:5], name="timed.jsonl")
    no_errors(at)
    assert any("took longer than 0 s" in w.value and "smaller suite" in w.value for w in at.warning)
    assert free(slots.HEAVY)


def test_size_caps_name_their_limits(monkeypatch, minilm):
    import json

    from test_app_coref import span_lines

    import ui.coref.coref_data as coref_data
    from attention.runs.inputs import encode

    class Upload:
        name, size = "big.jsonl", 3 * 1024 * 1024

        def getvalue(self):
            return "\n".join(json.dumps(r) for r in span_lines()).encode()

    state = _Attrs(coref_upload=Upload())
    monkeypatch.setattr(coref_data.st, "session_state", state)
    coref_data.take_upload()
    assert "files up to 2 MB" in state["coref_upload_error"]
    Upload.size = 100
    monkeypatch.setattr(coref_data, "MAX_EXAMPLES", 4)
    coref_data.take_upload()
    assert "at most 4" in state["coref_upload_error"] and "has 6 examples" in state["coref_upload_error"]
    _, tokenizer = minilm
    enc = encode(tokenizer, "word " * 600, None, max_length=512)
    assert "512" in enc.notice


class _Attrs(dict):
    def __getattr__(self, name):
        return self.get(name)

    def __setattr__(self, name, value):
        self[name] = value


# ---- ablation and GQA conversion: progress, and so a time limit ------------------------------------


def test_ablation_reports_progress_and_stops_where_its_caller_raises(minilm):
    from attention.analysis.ablation import ablate

    model, tokenizer = minilm
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    mask = np.ones((model.config.num_hidden_layers, model.config.num_attention_heads))
    mask[1, 2] = 0
    seen = []
    ablate(model, ids, head_mask=mask, progress=seen.append)
    assert seen == sorted(seen) and len(seen) == 3 and seen[-1] == 1.0

    def stop_after_the_first_pass(fraction):
        raise Stopped()

    with pytest.raises(Stopped):  # a raise from the callback ends the work; nothing is returned
        ablate(model, ids, head_mask=mask, progress=stop_after_the_first_pass)


def test_gqa_conversion_reports_each_layer_and_stops_where_its_caller_raises(minilm):
    from attention.analysis.gqa import to_grouped

    model, _ = minilm
    n = model.config.num_hidden_layers
    seen = []
    to_grouped(model, 3, progress=seen.append)
    assert seen == [k / n for k in range(n + 1)]
    calls = []

    def stop_at_the_second_layer(fraction):
        calls.append(fraction)
        if len(calls) == 3:
            raise Stopped()

    with pytest.raises(Stopped):
        to_grouped(model, 3, progress=stop_at_the_second_layer)
    assert calls == [0.0, 1 / n, 2 / n]
    assert model.layers[0].attention.num_kv_heads == model.config.num_attention_heads  # the given model unchanged


def test_an_ablation_past_its_time_limit_is_a_message_and_nothing_is_kept(monkeypatch):
    text = "An ablation the time limit test alone runs."
    monkeypatch.setitem(slots.TIME_LIMITS, "ablation", 0)
    at = start(view="ablation", layer="1", head="2")
    at = submit(at, text)
    no_errors(at)
    assert any("took longer than 0 s and was stopped; try a shorter sentence" in w.value for w in at.warning)
    ablations = stores.store("ablations", 16, 200 * stores.MB)
    assert not [k for k in ablations.items if k[1] == text]  # nothing partial cached
    assert free(slots.HEAVY)
    monkeypatch.setitem(slots.TIME_LIMITS, "ablation", 60)
    at.run()
    no_errors(at)
    assert not at.warning
    assert [k for k in ablations.items if k[1] == text]


def test_a_gqa_conversion_past_its_time_limit_is_a_message_and_nothing_is_kept(monkeypatch):
    from ui.compute.computations import get_grouped_model

    text = "A grouped-query run the time limit test alone asks for."
    get_grouped_model.clear()  # a converted model cached by another test would need no conversion
    monkeypatch.setitem(slots.TIME_LIMITS, "gqa", 0)
    at = start(view="efficient")
    at = submit(at, text)
    no_errors(at)
    assert any(
        "took longer than 0 s and was stopped; try a shorter sentence or a smaller model" in w.value for w in at.warning
    )
    runs = stores.store("grouped-runs", 16, 200 * stores.MB)
    assert not [k for k in runs.items if text in k]
    assert free(slots.HEAVY)
    monkeypatch.setitem(slots.TIME_LIMITS, "gqa", 120)
    at.run()
    no_errors(at)
    assert not at.warning
    assert [k for k in runs.items if text in k]
