"""The view registry (ui/page/registry.py) is the one place a view is declared: the page draws each row's
function for its key, the selectors, presentation mode's next view, the URL and the report follow its
rows, and a Param that no row reads (and that is not shared) is refused."""

from __future__ import annotations

import importlib

import pytest
import streamlit as st
from test_app import SENTENCE, no_errors, start

from ui.compute import stores
from ui.page import registry
from ui.page.registry import View
from ui.state.state import PARAMS

EXTRA = View("extra", "Extra", "test_registry.draw_extra", False, ("patterns",))


def draw_extra(ctx) -> None:
    st.caption(f"drawn by the extra row: {len(ctx.run.tokens)} tokens")


def marked(key: str):
    return lambda ctx: st.caption(f"drawn by the {key} row")


@pytest.fixture
def markers(monkeypatch):
    """Every row's function replaced by one that only says which row it is."""
    for view in registry.VIEWS:
        monkeypatch.setattr(importlib.import_module(view.module), view.draw.rsplit(".", 1)[1], marked(view.key))


def drawn(at) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("drawn by")]


ENCODER = frozenset({"encoder"})  # the bundled model


def test_each_key_draws_its_rows_function(markers):
    for view in registry.VIEWS:
        at = start(view=view.key)
        no_errors(at)
        if view.applies(ENCODER):
            assert drawn(at) == [f"drawn by the {view.key} row"]
            assert at.query_params["view"] == view.key
        else:  # not for the bundled encoder: the first view, and why
            assert drawn(at) == [f"drawn by the {registry.DEFAULT.key} row"]
            assert f"{view.label} needs {view.needs}" in " ".join(i.value for i in at.info)
            assert at.query_params["view"] == registry.DEFAULT.key


def test_the_rows_say_which_models_their_views_are_for():
    assert registry.labels(ENCODER) == [
        v.label for v in registry.VIEWS if v.key not in ("disentangled", "cross", "next", "lens")
    ]
    assert "Next token" in registry.labels({"causal"}) and "Cross-attention" not in registry.labels({"causal"})
    assert "Logit lens" in registry.labels({"causal"}) and "Logit lens" not in registry.labels(ENCODER)
    assert "Cross-attention" in registry.labels({"seq2seq"}) and "Next token" not in registry.labels({"seq2seq"})
    assert "DeBERTa terms" in registry.labels({"encoder", "deberta"})
    assert registry.labels() == [v.label for v in registry.VIEWS]  # no kinds given: every view
    assert registry.following("Cross-attention", ENCODER) == "Guided walk"  # the next one offered after its place


def test_an_old_flow_link_opens_the_shape_flow_and_writes_its_new_key(markers):
    at = start(view="flow", padded="1")
    no_errors(at)
    assert drawn(at) == ["drawn by the shapeflow row"]
    assert at.session_state.view == "Shape flow"
    assert at.query_params["view"] == "shapeflow" and at.query_params["padded"] == "1"


def test_next_view_steps_through_the_registrys_order_and_back_past_views_not_for_this_model(markers):
    at = start(present="1", view=registry.VIEWS[0].key, s=SENTENCE)
    offered = registry.labels(ENCODER)
    assert at.selectbox(key="view").options == offered
    seen = []
    for _ in offered:
        next(b for b in at.button if b.key == "present_next_view").click()
        at.run()
        seen.append(at.session_state.view)
        assert drawn(at) == [f"drawn by the {registry.by_label(seen[-1]).key} row"]
        assert not at.info  # never a "not for this model" page
    assert seen == offered[1:] + offered[:1]
    assert not {"DeBERTa terms", "Cross-attention", "Next token"} & set(seen)


def test_a_new_row_is_a_view_everywhere(monkeypatch):
    """One row added: the selectors offer it, ?view= draws it, the URL and the report keep the Params it
    reads; presentation mode's next view comes to it after the last."""
    monkeypatch.setattr(registry, "VIEWS", registry.VIEWS + (EXTRA,))
    at = start(view="extra", patterns="1", merge="1")
    no_errors(at)
    assert "Extra" in at.segmented_control(key="view").options
    assert any(c.value.startswith("drawn by the extra row") for c in at.caption)
    assert at.query_params["view"] == "extra" and at.query_params["patterns"] == "1"
    assert "merge" not in at.query_params  # a Param of the head view, not read by this one
    facts = dict(at.session_state["page_details"])  # the report's header rows
    assert facts["View"] == "Extra" and facts["Pattern labels"] == "yes" and "Merge word pieces" not in facts
    at = start(present="1", view="walk")
    next(b for b in at.button if b.key == "present_next_view").click()
    assert at.run().session_state.view == "Extra"


def test_every_param_is_read_by_a_view_or_shared():
    registry.check_params(p.name for p in PARAMS)
    with pytest.raises(ValueError, match="read by no view: orphan"):
        registry.check_params([*(p.name for p in PARAMS), "orphan"])
    with pytest.raises(ValueError, match="do not exist: padded"):
        registry.check_params(p.name for p in PARAMS if p.name != "padded")


@pytest.fixture
def heavy_jobs(monkeypatch):
    """The kinds of heavy computation the page asks for (computed in the heavy slot, or found cached)."""
    kinds, ask = [], stores.BoundedStore.get_or_compute_heavy

    def recorded(self, key, kind, *args, **kwargs):
        kinds.append(kind)
        return ask(self, key, kind, *args, **kwargs)

    monkeypatch.setattr(stores.BoundedStore, "get_or_compute_heavy", recorded)
    return kinds


@pytest.mark.parametrize("view", [v for v in registry.VIEWS if not v.heavy], ids=lambda v: v.key)
def test_a_view_not_marked_heavy_asks_for_no_heavy_computation(view, heavy_jobs):
    no_errors(start(view=view.key))
    assert heavy_jobs == []


HEAVY_PARAMS = {"rollout": {"derived": "flow"}, "coref": {"coref": "suite"}}
HEAVY_BUTTONS = {"global": "gqk_compute"}  # a view that computes only when asked


@pytest.mark.parametrize("view", [v for v in registry.VIEWS if v.heavy], ids=lambda v: v.key)
def test_a_view_marked_heavy_asks_for_a_heavy_computation(view, heavy_jobs):
    at = start(view=view.key, **HEAVY_PARAMS.get(view.key, {}))
    if view.key in HEAVY_BUTTONS:
        next(b for b in at.button if b.key == HEAVY_BUTTONS[view.key]).click().run()
    no_errors(at)
    assert heavy_jobs
