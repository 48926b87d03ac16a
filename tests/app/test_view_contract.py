"""The views' contract (ui/state/view_context.py): a view draws from the ViewContext the dispatch hands it, and
touches in session state only its own widgets' keys (the Params its registry row reads, and the few keys of
its own named below), never the page's shared values (layer, head, presentation, the text, the model)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from ui.page import registry
from ui.state.state import PARAMS

VIEWS_DIR = Path(__file__).resolve().parents[2] / "ui" / "views"
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
    "head_long": {"long_blocks", "long_row0", "long_col0", "long_find", "long_query"},  # its widgets, moved by a find
    "next_token": {"next_follow", "next_bars_default", "next_bars", "next_pick"},
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
    from ui.state.view_context import ViewContext

    assert dataclasses.is_dataclass(ViewContext) and ViewContext.__dataclass_params__.frozen
    for view in registry.VIEWS:
        (parameter,) = inspect.signature(view.function()).parameters.values()
        assert parameter.annotation in ("ViewContext", ViewContext), view.key


def test_the_page_finds_the_context_drawn_only_while_it_draws_and_in_its_own_thread():
    """A figure's presentation title (ui.page.page.show) names what the page draws: the page's helpers find the
    context within `drawing`, in the page run's thread only."""
    import threading

    from test_written import encoded

    from ui.state.view_context import ModelFacts, RunKey, ViewContext, drawing, drawn
    from ui.state.written import Written

    written = Written.of("The cat sat and purred", encoded([1, 2, 3]))
    ctx = ViewContext(None, RunKey("", written), ModelFacts(frozenset({"causal"}), 2, 4), 1, 3, True)
    seen = []
    assert drawn() is None
    with drawing(ctx):
        assert drawn() is ctx and drawn().sentence == "The cat sat and purred"
        other = threading.Thread(target=lambda: seen.append(drawn()))
        other.start()
        other.join()
    assert drawn() is None and seen == [None]


def test_a_presentation_title_says_the_contexts_head_and_sentence():
    """present_caption and present_title title a figure from the context they are given: its layer, head, view,
    sentence (a continuation's text) and presentation mode."""
    import plotly.graph_objects as go
    from test_written import encoded

    from ui.page.page import present_caption, present_title
    from ui.state.view_context import ModelFacts, RunKey, ViewContext
    from ui.state.written import Written

    written = Written.of("The cat sat and purred", encoded([1, 2, 3]))
    facts = ModelFacts(frozenset({"causal"}), 2, 4)
    ctx = ViewContext(None, RunKey("", written), facts, 1, 3, True, view="qk")
    fig = go.Figure(layout={"title": {"text": "Query · key scores"}})
    present_caption(fig, ctx)
    assert fig.layout.title.text.startswith("L1 H3 · Query") and "The cat sat and purred" in fig.layout.title.text
    other = go.Figure(layout={"title": {"text": "Query · key scores"}})
    present_caption(other, dataclasses.replace(ctx, view="overview"))  # a view of every head: none named
    assert "L1 H3" not in other.layout.title.text and "The cat sat" in other.layout.title.text
    plain = go.Figure(layout={"title": {"text": "Query · key scores"}})
    present_caption(plain, dataclasses.replace(ctx, present=False))
    present_title(plain, dataclasses.replace(ctx, present=False))
    assert plain.layout.title.text == "Query · key scores"
    present_title(plain, dataclasses.replace(ctx, layer=0, head=2))
    assert plain.layout.title.text.startswith("L0 H2 · The cat sat")


# ---- the page's helpers that views call: what they size for is handed to them, never read from session state --

PAGE_DIR = VIEWS_DIR.parent / "page"
HELPER_MODULES = ("page", "layout")  # ui/page/page.py, ui/page/layout.py


def helper_functions(sources: dict[str, str]) -> dict[str, ast.FunctionDef]:
    """The module-level functions of ui/page/page.py and ui/page/layout.py (`sources`: module name → source), by
    name."""
    functions: dict[str, ast.FunctionDef] = {}
    for source in sources.values():
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef):
                assert node.name not in functions, f"{node.name} is defined in two helper modules"
                functions[node.name] = node
    return functions


def called_by_views() -> set[str]:
    """The names the views import from ui/page/page.py and ui/page/layout.py."""
    names = set()
    for module in MODULES:
        for node in ast.walk(ast.parse((VIEWS_DIR / f"{module}.py").read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 2
                and node.module in {f"page.{m}" for m in HELPER_MODULES}
            ):
                names.update(alias.name for alias in node.names)
    return names


def helpers_reading_shared(sources: dict[str, str]) -> dict[str, set[str]]:
    """The helpers views call, and every helper of the two modules those call in turn (by name: a call, or a
    function handed on), that read a shared value from session state: name → the shared keys it reads."""
    functions = helper_functions(sources)
    reached, todo = set(), [name for name in called_by_views() if name in functions]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions]
    read = {name: session_keys(functions[name]) & SHARED for name in reached}
    return {name: keys for name, keys in read.items() if keys}


def helper_sources() -> dict[str, str]:
    return {module: (PAGE_DIR / f"{module}.py").read_text() for module in HELPER_MODULES}


def test_the_page_helpers_views_call_read_no_shared_value_from_session_state():
    sources = helper_sources()
    reached = {"show", "present_caption", "font_size", "main_px", "column_px", "rem_px", "present_size"}
    assert reached <= set(helper_functions(sources)) and {"show", "font_size", "main_px"} <= called_by_views()
    found = helpers_reading_shared(sources)
    assert not found, f"page helpers that views call read shared values from session state: {found}"


@pytest.mark.parametrize(
    "module, function, line",
    [
        ("page", "figure_slot", 'st.session_state.get("present")'),  # called by views
        ("page", "present_caption", "st.session_state.layer"),  # reached through show
        ("layout", "rem_px", 'st.session_state["present"]'),  # reached through main_px
        ("page", "_one_line", 'st.session_state.get("view")'),  # reached through present_caption
    ],
)
def test_the_helpers_check_finds_a_read_planted_in_a_helper(module, function, line):
    sources = helper_sources()
    head = f"def {function}("
    start = sources[module].index(head)
    body = sources[module].index(":\n", start) + 2  # after the signature's line
    sources[module] = sources[module][:body] + f"    _planted = {line}\n" + sources[module][body:]
    assert function in helpers_reading_shared(sources)
