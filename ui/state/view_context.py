"""What every view draws from, built once per page (app.py's view_context) and handed by the dispatch to the
view's ``draw(ctx)``: the run and the key it was computed for, what the model is, the selected layer and
head, presentation mode, the view drawn and the page-level settings views share. A view reads these from the
context, not from session state; its own widgets keep their keys (ui/state/state.py's Params) as Streamlit widgets do.

While the page draws (``drawing``), the page's own helpers that every figure passes through (a presentation
title names the sentence drawn) find the context with ``drawn``: one page run's, in that run's thread."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .written import Text, Written, text_of

if TYPE_CHECKING:
    from ..compute.generation import Continuation


@dataclass(frozen=True)
class RunKey:
    """The input a run was computed for: the model's source ("" for the bundled model), the text (as typed, or
    a continuation as the model wrote it: ui/state/written.py) and the second sentence of a pair ("" for none)."""

    source: str
    text: Text
    text_b: str = ""

    @property
    def sentence(self) -> str:
        """The first text as characters (a continuation's prompt and what the model wrote)."""
        return text_of(self.text)

    @property
    def written(self) -> Written | None:
        """The continuation the text is, or None for a typed text."""
        return self.text if isinstance(self.text, Written) else None


@dataclass(frozen=True)
class ModelFacts:
    """What the model of the run is, as the views ask: its kinds (ui/page/registry.py's KINDS) and its layers and
    heads (an encoder-decoder's encoder's)."""

    kinds: frozenset[str]
    n_layers: int
    n_heads: int

    @property
    def causal(self) -> bool:
        """A decoder: every token sees only itself and earlier tokens."""
        return "causal" in self.kinds

    @property
    def seq2seq(self) -> bool:
        return "seq2seq" in self.kinds


@dataclass(frozen=True)
class ViewContext:
    run: Any  # attention.runs.run.SentenceRun, or attention.runs.bigrun.PooledRun past its bound
    key: RunKey  # what `run` was computed for
    model: ModelFacts
    layer: int  # the selected layer and head (within the model: clamped before the context is built)
    head: int
    present: bool  # presentation mode: figures sized to the first screen, larger type
    target: str = ""  # an encoder-decoder's Target box: its decoder's input, else "" (written greedily)
    continuation: Continuation | None = None  # the continuation the text is (ui/compute/generation.py), or None
    view: str = ""  # the key of the view drawn (ui/page/registry.py's View.key); "" for the registry's default

    @property
    def source(self) -> str:
        return self.key.source

    @property
    def text(self) -> Text:
        """The first text as the runs read it (get_run, get_trace ...: a continuation's ids as written)."""
        return self.key.text

    @property
    def text_b(self) -> str:
        return self.key.text_b

    @property
    def sentence(self) -> str:
        """The first text as characters, for what is shown and matched (words, examples)."""
        return self.key.sentence


_DRAWN: ContextVar[ViewContext | None] = ContextVar("drawn", default=None)


@contextlib.contextmanager
def drawing(ctx: ViewContext) -> Iterator[ViewContext]:
    """Within the block, `drawn()` is `ctx` (in this thread: a page run's own)."""
    token = _DRAWN.set(ctx)
    try:
        yield ctx
    finally:
        _DRAWN.reset(token)


def drawn() -> ViewContext | None:
    """The context the page is drawing (within `drawing`), else None."""
    return _DRAWN.get()
