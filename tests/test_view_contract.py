"""The views' contract (ui/view_context.py): a view draws from the ViewContext the dispatch hands it, and
touches in session state only its own widgets' keys (the Params its registry row reads, and the few keys of
its own named below), never the page's shared values (layer, head, presentation, the text, the model)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from ui import registry
from ui.state import PARAMS

VIEWS_DIR = Path(__file__).resolve().parent.parent / "ui" / "views"
# the page's shared values: the context carries them, no view reads or writes them
SHARED = {
    "layer",
    "head",
    "present",
    "view",
    "source",
    "submitted",
    "continuation",
    "prompt",
    "text",
    "text_b",
    "target",
}
# each module's own keys beyond the Params its rows read: charts' and tables' selections, widgets with no Param,
# what a view keeps between its own runs
OWN = {
    "cross": {"cross_grid"},
    "global_qk": {"gqk_chart", "gqk_asked"},
    "query_key": {"qk_opened"},
    "shapeflow": {"shapeflow_chart", "shapeflow_map", "shapeflow_head"},
    "stats": {"stats_table"},
}
MODULES = sorted(p.stem for p in VIEWS_DIR.glob("*.py") if p.stem != "__init__")
METHODS = {"get", "setdefault", "pop", "update", "keys", "items", "values"}


def session_keys(tree: ast.AST) -> set[str]:
    """Every session-state key a module's source names: st.session_state.x, ["x"], .get("x"), .setdefault("x"),
    .pop("x"), .update(x=...), setattr(st.session_state, "x", ...); a key that is not a constant as "<dynamic>"."""

    def is_state(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "session_state"

    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_state(node.value) and node.attr not in METHODS:
            keys.add(node.attr)
        elif isinstance(node, ast.Subscript) and is_state(node.value):
            keys.add(node.slice.value if isinstance(node.slice, ast.Constant) else "<dynamic>")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_state(node.func.value):
            if node.func.attr in ("get", "setdefault", "pop") and node.args:
                first = node.args[0]
                keys.add(first.value if isinstance(first, ast.Constant) else "<dynamic>")
            if node.func.attr == "update":
                keys.update(k.arg or "<dynamic>" for k in node.keywords)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            if node.args and is_state(node.args[0]):
                name = node.args[1] if len(node.args) > 1 else None
                keys.add(name.value if isinstance(name, ast.Constant) else "<dynamic>")
    return keys


def own_params(module: str) -> set[str]:
    """The session keys of the Params that the registry rows drawn by `module` read."""
    reads = {name for v in registry.VIEWS if v.module == f"ui.views.{module}" for name in v.reads}
    return {p.key for p in PARAMS if p.name in reads}


def test_the_check_finds_every_way_of_naming_a_key():
    source = (
        "import streamlit as st\n"
        "a = st.session_state.layer\n"
        "b = st.session_state['head']\n"
        "c = st.session_state.get('present')\n"
        "st.session_state.setdefault('submitted', 1)\n"
        "st.session_state.update(source=1)\n"
        "setattr(st.session_state, 'view', 2)\n"
        "st.session_state.pop('text', None)\n"
        "d = st.session_state[name]\n"
    )
    assert session_keys(ast.parse(source)) == {"layer", "head", "present", "submitted", "source", "view", "text"} | {
        "<dynamic>"
    }


def test_every_view_module_is_checked():
    assert {v.module.rsplit(".", 1)[1] for v in registry.VIEWS} <= set(MODULES) and set(OWN) <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_a_view_touches_only_its_own_keys(module):
    keys = session_keys(ast.parse((VIEWS_DIR / f"{module}.py").read_text()))
    assert not keys & SHARED, f"ui/views/{module}.py reads shared values from session state: {keys & SHARED}"
    allowed = own_params(module) | OWN.get(module, set())
    assert keys <= allowed, f"ui/views/{module}.py touches keys not its own: {sorted(keys - allowed)}"


def test_every_view_draws_from_a_context():
    from ui.view_context import ViewContext

    assert dataclasses.is_dataclass(ViewContext) and ViewContext.__dataclass_params__.frozen
    for view in registry.VIEWS:
        (parameter,) = inspect.signature(view.function()).parameters.values()
        assert parameter.annotation in ("ViewContext", ViewContext), view.key


def test_the_page_finds_the_context_drawn_only_while_it_draws_and_in_its_own_thread():
    """A presentation title names the sentence drawn (a continuation's text, not the prompt typed): the page's
    helpers find the context within `drawing`, in the page run's thread only."""
    import threading

    from test_written import encoded

    from ui.page import page_sentence
    from ui.view_context import ModelFacts, RunKey, ViewContext, drawing, drawn
    from ui.written import Written

    written = Written.of("The cat sat and purred", encoded([1, 2, 3]))
    ctx = ViewContext(None, RunKey("", written), ModelFacts(frozenset({"causal"}), 2, 4), 1, 3, True)
    seen = []
    assert drawn() is None
    with drawing(ctx):
        assert drawn() is ctx and page_sentence() == "The cat sat and purred"
        other = threading.Thread(target=lambda: seen.append(drawn()))
        other.start()
        other.join()
    assert drawn() is None and seen == [None]
