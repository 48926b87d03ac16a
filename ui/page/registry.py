"""The page's views, one row each: the one table the dispatch, the view selectors, presentation
mode's "next view", the URL and the report read.

A row names its view's drawing function by dotted path (``ui.views.masks.draw``), imported on first
use, so this module imports nothing of the page and every part of it can import this one.

Adding a view: write ``ui/views/<name>.py`` with a ``draw(ctx: ViewContext)`` function and add its row here. The
dispatch builds the ViewContext (ui/state/view_context.py) once per page: the run and its key (source, text, text_b),
the model's facts, the selected layer and head, presentation mode and the page-level settings. The view reads
those from it, never from session state; its own widgets keep their keys, the Params its row `reads`
(tests/app/test_view_contract.py checks both).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

# what a model is, as the views ask: "encoder" (reads both ways), "causal" (a decoder that writes), "seq2seq" (an
# encoder-decoder: the views read its encoder, Cross-attention its decoder), "deberta" (an encoder with
# DeBERTa's position terms) and "sinks" (each head's learned sink takes a share of every row: gpt-oss)
KINDS = frozenset({"encoder", "causal", "seq2seq", "deberta", "sinks"})


@dataclass(frozen=True)
class View:
    key: str  # in the URL: ?view=<key>
    label: str  # on the view selector, and session_state.view
    draw: str  # "package.module.function": draws the view from the page's ViewContext
    heavy: bool  # may run a computation in the server's heavy slot (waits for it; stopped at its time limit)
    reads: tuple[str, ...] = ()  # the URL names of the Params (ui/state/state.py) that shape this view's page
    aliases: tuple[str, ...] = ()  # older URL keys that still open it
    later: bool = (
        False  # uses pandas (a table) or scipy: waits for them (ui/serve/preload.py's later) before its module
    )
    own_heads: bool = True  # reads the sentence's own attention heads: a first visit opens the strongest one
    picks_head: bool = True  # draws the chosen layer and head: the Layer and Head boxes are shown with it
    kinds: frozenset[str] = KINDS  # the models it is for: offered, and visited by presentation's V, only on those
    needs: str = ""  # what a model must be for it, said when a link or a new model leaves it out

    def applies(self, kinds: Collection[str]) -> bool:
        """Whether this view is for a model of these `kinds` (model_kinds in ui/compute/models.py)."""
        return not self.kinds.isdisjoint(kinds)

    @property
    def module(self) -> str:
        return self.draw.rsplit(".", 1)[0]

    def function(self) -> Callable:
        """The drawing function (its module imported on first use; a `later` row's caller has waited for
        pandas and scipy first: ui/preload.later)."""
        return getattr(importlib.import_module(self.module), self.draw.rsplit(".", 1)[1])


VIEWS = (
    View("head", "Head", "ui.views.head.draw", False, ("draw", "heads", "hide", "renorm", "merge", "mark")),
    View("overview", "Overview", "ui.views.overview.draw", False, ("patterns", "over", "run", "sink")),
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
    View(
        "mixing",
        "Mixing",
        "ui.views.mixing.draw",
        False,
        ("mix", "hide"),
        kinds=frozenset({"encoder", "causal"}),
        needs="an encoder or a decoder (its self-attention and values read in one stack)",
    ),
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
    View(
        "disentangled",
        "DeBERTa terms",
        "ui.views.disentangled.draw",
        False,
        kinds=frozenset({"deberta"}),
        needs="a DeBERTa-v2 or -v3 checkpoint (its scores split into content and position terms)",
    ),
    View(
        "cross",
        "Cross-attention",
        "ui.views.cross.draw",
        False,
        ("target", "part"),
        own_heads=False,
        kinds=frozenset({"seq2seq"}),
        needs="an encoder-decoder (BART, T5, Marian …: its decoder reading the encoder)",
    ),
    View(
        "next",
        "Next token",
        "ui.views.next_token.draw",
        False,
        ("pos", "t"),
        own_heads=False,
        picks_head=False,
        kinds=frozenset({"causal"}),
        needs="a causal decoder (GPT-2, Llama …: a model that writes the next token)",
    ),
    View(
        "lens",
        "Logit lens",
        "ui.views.lens.draw",
        False,
        ("every", "layers"),
        own_heads=False,
        picks_head=False,
        kinds=frozenset({"causal"}),
        needs="a causal decoder (GPT-2, Llama …: a model with an LM head to read each layer through)",
    ),
    View("walk", "Guided walk", "ui.views.walk.draw", False, ("walk", "rank")),
)
# the URL names of the Params every view reads (the rest belong to the rows that read them): a causal model's
# continuation (ui/compute/generation.py) is part of the text every view runs on
SHARED = (
    "view",
    "layer",
    "head",
    "present",
    "strip",
    "model",
    "cont",
    "n",
    "sample",
    "temp",
    "topk",
    "topp",
    "seed",
    "pick",
)
DEFAULT = VIEWS[0]


def labels(kinds: Collection[str] = KINDS) -> list[str]:
    """The views' labels in the table's order; with `kinds`, only those for a model of these kinds."""
    return [v.label for v in VIEWS if v.applies(kinds)]


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


def following(label: str | None, kinds: Collection[str] = KINDS) -> str:
    """The label of the view after this one in the table's order, the last followed by the first; with
    `kinds`, among the views for a model of these kinds only."""
    offered, every = labels(kinds), labels()
    start = every.index(label) + 1 if label in every else 0  # a view not offered: the next offered after its place
    return next(name for name in every[start:] + every[:start] if name in offered)


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
