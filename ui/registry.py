"""The page's views, one row each: the one table the dispatch, the view selectors, presentation
mode's "next view", the URL and the report read.

A row names its view's drawing function by dotted path (``ui.views.masks.draw``), imported on first
use, so this module imports nothing of the page and every part of it can import this one.

Adding a view: write ``ui/views/<name>.py`` with a ``draw(run)`` function, and add its row here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    key: str  # in the URL: ?view=<key>
    label: str  # on the view selector, and session_state.view
    draw: str  # "package.module.function": draws the view from the submitted sentence's run
    heavy: bool  # may run a computation in the server's heavy slot (waits for it; stopped at its time limit)
    reads: tuple[str, ...] = ()  # the URL names of the Params (ui/state.py) that shape this view's page
    aliases: tuple[str, ...] = ()  # older URL keys that still open it
    later: bool = False  # uses pandas (a table) or scipy: waits for them (ui/preload.py's later) before its module
    own_heads: bool = True  # reads the sentence's own attention heads: a first visit opens the strongest one

    @property
    def module(self) -> str:
        return self.draw.rsplit(".", 1)[0]

    def function(self) -> Callable:
        if self.later:  # pandas or scipy first, imported once for the process (not beside a figure being built)
            from . import preload

            preload.later()
        return getattr(importlib.import_module(self.module), self.draw.rsplit(".", 1)[1])


VIEWS = (
    View("head", "Head", "ui.views.head.draw", False, ("draw", "heads", "hide", "renorm", "merge")),
    View("overview", "Overview", "ui.views.overview.draw", False, ("patterns",)),
    View("shapeflow", "Shape flow", "ui.views.shapeflow.draw", False, ("padded", "step", "stage"), aliases=("flow",)),
    View("masks", "Masks", "ui.views.masks.draw", False),
    View(
        "coref",
        "Coreference",
        "ui.views.coref.draw",
        True,
        (
            "coref",
            "pronoun",
            "candidates",
            "answer",
            "rank",
            "pair",
            "twins",
            "twin",
            "tanswer",
            "set",
            "by",
            "ga",
            "gb",
            "vs",
        ),
        later=True,
    ),
    View("stats", "Head stats", "ui.views.stats.draw", True, ("over", "run", "measure"), later=True),
    View("rollout", "Rollout & flow", "ui.views.rollout.draw", True, ("derived",)),
    View("qk", "Query·key", "ui.views.query_key.draw", False, ("query",)),
    View("ablation", "Ablation", "ui.views.ablation.draw", True, ("ablate", "ablation"), later=True),
    View("efficient", "GQA & fused", "ui.views.efficient.draw", True, ("kv",)),
    View(
        "global",
        "Global Q·K",
        "ui.views.global_qk.draw",
        True,
        ("corpus", "file", "folder", "scope", "colour", "tokens", "layout"),
        later=True,
    ),
    View("disentangled", "DeBERTa terms", "ui.views.disentangled.draw", False),
    View("cross", "Cross-attention", "ui.views.cross.draw", False, ("target", "part"), own_heads=False),
    View("next", "Next token", "ui.views.next_token.draw", False, ("pos", "t"), own_heads=False),
    View("walk", "Guided walk", "ui.views.walk.draw", False, ("walk", "rank")),
)
# the URL names of the Params every view reads (the rest belong to the rows that read them): a causal model's
# continuation (ui/generation.py) is part of the text every view runs on
SHARED = ("view", "layer", "head", "present", "strip", "model", "cont", "n", "sample", "temp", "topk", "topp", "seed")
DEFAULT = VIEWS[0]


def labels() -> list[str]:
    return [v.label for v in VIEWS]


def by_label(label: str | None) -> View:
    """The view a selector's label names; the default view for any other value."""
    return next((v for v in VIEWS if v.label == label), DEFAULT)


def named(key: str) -> View:
    """The row of this key (KeyError for none): for code that opens one view by name."""
    view = by_key(key)
    if view is None:
        raise KeyError(key)
    return view


def by_key(word: str) -> View | None:
    """The view a URL's ?view= names, by its key or an alias; None for an unknown word."""
    return next((v for v in VIEWS if word == v.key or word in v.aliases), None)


def following(label: str | None) -> str:
    """The label of the view after this one, in the table's order, the last followed by the first."""
    names = labels()
    return names[(names.index(label) + 1) % len(names)] if label in names else names[0]


def url_codec() -> tuple[Callable[[str], str], Callable[[str], str]]:
    """The view's Param codec: a label is written as its view's key; a key or an alias reads as its label."""

    def write(label: str) -> str:
        return by_label(label).key

    def read(word: str) -> str:
        view = by_key(word)
        if view is None:
            raise ValueError("not one of " + ", ".join(v.key for v in VIEWS))
        return view.label

    return write, read


def check_params(names: Iterable[str]) -> None:
    """Every Param is read by some view or by all (SHARED), and every view reads only Params that exist."""
    names = set(names)
    read = {name for v in VIEWS for name in v.reads}
    if unread := names - read - set(SHARED):
        raise ValueError(f"Params read by no view: {', '.join(sorted(unread))}")
    if unknown := read - names:
        raise ValueError(f"views read Params that do not exist: {', '.join(sorted(unknown))}")
