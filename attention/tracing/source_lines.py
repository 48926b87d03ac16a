"""The line of code behind each step of a trace (attention/tracing/trace.py): the statement that made a recorded tensor,
found in the source file's syntax tree, with the statement computing it just before when it is recorded after."""

from __future__ import annotations

import ast
import linecache
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout: paths read as attention/core/mha.py


def relative_path(filename: str) -> str:
    try:
        return Path(filename).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return filename


@lru_cache(maxsize=32)
def _tree(filename: str, mtime: float) -> ast.Module | None:
    try:
        return ast.parse("".join(linecache.getlines(filename)))
    except SyntaxError:
        return None


def source_of(filename: str, lineno: int) -> tuple[str, tuple[int, ...]]:
    """The statement that made a recorded tensor, as (code, line numbers).

    Usually the `record(...)` statement itself. When it records a variable computed just before,
    e.g. `scores = record("scores", scores.mul_(scaling))` after `scores = torch.matmul(...)`,
    that earlier statement comes first; a bare `probs = record("probs", probs)` is left out.
    """
    linecache.checkcache(filename)
    try:
        mtime = Path(filename).stat().st_mtime
    except OSError:
        mtime = 0.0
    tree = _tree(filename, mtime)
    line = linecache.getline(filename, lineno).strip()
    found = _statement(tree.body, lineno) if tree is not None else None
    if found is None:
        return line, (lineno,)
    block, index = found
    stmt, shown = block[index], [block[index]]
    name = _continued_name(stmt)
    earlier = [s for s in block[:index] if _assigns(s, name)] if name else []
    if earlier and not _calls_record(earlier[-1]):  # a recorded value is its own step
        shown = [earlier[-1]] if _records_bare_name(stmt) else [earlier[-1], stmt]
    source = _source(filename)
    code = "\n".join(" ".join((ast.get_source_segment(source, s) or "").split()) for s in shown)
    return code, tuple(s.lineno for s in shown)


def _source(filename: str) -> str:
    return "".join(linecache.getlines(filename))


def _statement(block: list[ast.stmt], lineno: int) -> tuple[list[ast.stmt], int] | None:
    """The innermost statement covering `lineno`, with the block it belongs to."""
    for i, stmt in enumerate(block):
        if stmt.lineno <= lineno <= (stmt.end_lineno or stmt.lineno):
            inner = [getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")]
            inner += [h.body for h in getattr(stmt, "handlers", [])]
            for sub in inner:
                if isinstance(sub, list) and sub:
                    found = _statement(sub, lineno)
                    if found is not None:
                        return found
            return block, i
    return None


def _record_call(stmt: ast.stmt) -> ast.Call | None:
    value = getattr(stmt, "value", None)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "record":
        return value
    return None


def _calls_record(stmt: ast.stmt) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "record" for n in ast.walk(stmt)
    )


def _root_name(node: ast.expr) -> str | None:
    """`x` for `x`, `x.mul_(s)` or `x.a(...).b(...)`."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, ast.Attribute):
            node = node.value
        else:
            return None


def _continued_name(stmt: ast.stmt) -> str | None:
    """For `x = record(name, <expr on x>)`: x, the variable whose earlier value is being recorded."""
    call = _record_call(stmt)
    if call is None or len(call.args) < 2 or not isinstance(stmt, ast.Assign):
        return None
    targets = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    root = _root_name(call.args[1])
    return root if root in targets else None


def _records_bare_name(stmt: ast.stmt) -> bool:
    call = _record_call(stmt)
    return call is not None and len(call.args) >= 2 and isinstance(call.args[1], ast.Name)


def _assigns(stmt: ast.stmt, name: str) -> bool:
    return isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
