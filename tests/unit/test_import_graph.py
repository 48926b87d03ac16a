"""The import graph of attention/, viz/ and ui/ (every import statement that runs, at module level or inside a
function; not those for the type checker only):
no module reaches itself again through the modules it imports (a command line's `main` is reached through its
package's __main__, never imported back by the library; an engine imports the scoring it runs from a module that
imports no engine)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("attention", "viz", "ui")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ours that `name` (at `path`) imports: `from . import x` names the submodule x, not the
    package."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    tree = ast.parse(path.read_text())
    typing_only = {  # `if TYPE_CHECKING:` imports are read by the type checker only, never run
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(base[: len(base) - node.level + 1] + ([module] if module else []))
            subs = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in known]
            targets = subs if len(subs) == len(node.names) else [module, *subs]
        else:
            continue
        out |= {t for t in targets if t in known and t != name}
    return out


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(frozenset(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_an_import_for_the_type_checker_only_is_not_an_edge(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\nfrom . import c\n")
    known = {"pkg.a": a, "pkg.b": a, "pkg.c": a}
    assert imported("pkg.a", a, known) == {"pkg.c"}


def test_the_circles_finder_finds_a_planted_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_in_a_circle():
    assert circles(graph()) == []


def test_the_registry_imports_none_of_the_page():
    assert graph()["ui.page.registry"] == set()


def test_no_module_of_attention_imports_viz_or_ui():
    """attention/ is the numbers; viz/ and ui/ draw and serve them and may import it, never the other way."""
    edges = graph()
    wrong = {
        (name, target)
        for name, targets in edges.items()
        if name.split(".")[0] == "attention"
        for target in targets
        if target.split(".")[0] in ("viz", "ui")
    }
    assert wrong == set()
    assert "attention.runs.pooling" in edges["attention.runs.seq2seq_maps"]  # the pooling attention uses is its own


def test_viz_imports_no_torch_and_its_pooling_is_attentions():
    """viz reads attention.runs.pooling on first use only (`import attention` imports torch, seconds on a busy
    machine, and the first page's "Loading" figure is drawn by viz before it); no copy of it stays in viz."""
    script = "import sys, viz, viz.overview; print('torch' in sys.modules); print(hasattr(viz.overview, 'pool_map'))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]
