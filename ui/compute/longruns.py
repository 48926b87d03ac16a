"""Long texts on the page: a text whose one layer of maps would be more than BIG_RUN_BYTES runs through the long
implementation (attention/runs/longrun.py) in the server's heavy slot, with a progress bar, a Stop button and the
"long" time limit, bounded before any work by the operator's ATTENTION_LONG_MAX_TOKENS and ATTENTION_LONG_MAX_MB
(ui/serve/settings.py). The run is kept in a store of its own, one at a time; get_run (ui/compute/runs.py) finds
it there."""

from __future__ import annotations

import time

import streamlit as st

from attention.runs.bigrun import MB, NeedsSmallerInput
from attention.runs.longrun import LongRun, is_long, long_run, longest

from ..serve.settings import LONG_MAX_BYTES, LONG_MAX_TOKENS
from ..state.actions import notice
from ..state.written import Text, Written
from .inputs import encoded_input, token_bound
from .limits import heavy_guard
from .models import get_model
from .stores import store

STOPPED = "long_stopped"  # session state: the key of the long run its visitor stopped (not started again)


def long_store():
    return store("long-runs", 1, LONG_MAX_BYTES)


def needs_long(source: str, text: Text, text_b: str) -> bool:
    """Whether this input's run is a long one: one layer's maps at its tokens more than BIG_RUN_BYTES. The
    tokens are counted (the tokenizer's reading, within the model's positions) only where the text's bound says
    it might be."""
    heads = get_model(source)[0].config.num_attention_heads
    if not is_long(heads, token_bound(text, text_b)):
        return False
    return is_long(heads, len(encoded_input(source, text, text_b)[1].tokens))


def fitting(source: str) -> int:
    """The most tokens this server draws a long text of with this model: ATTENTION_LONG_MAX_TOKENS, and what its
    run keeps within ATTENTION_LONG_MAX_MB (attention.runs.longrun.longest: a few layer inputs where every layer's
    queries and keys would be too much)."""
    return min(LONG_MAX_TOKENS, longest(get_model(source)[0], LONG_MAX_BYTES))


def refusal(source: str, n_tokens: int) -> str | None:
    """Why a long run of `n_tokens` is not made on this server (its caps), or None."""
    fit = fitting(source)
    if n_tokens <= fit:
        return None
    cap = (
        "ATTENTION_LONG_MAX_TOKENS"
        if fit == LONG_MAX_TOKENS
        else f"ATTENTION_LONG_MAX_MB, {LONG_MAX_BYTES / MB:,.0f} MB"
    )
    return (
        f"This text has {n_tokens:,} tokens; with this model this server draws long texts of at most {fit:,} "
        f"tokens ({cap}). Run its first {fit:,} tokens, or shorten it; your text is kept."
    )


def run_prefix(source: str, text: str, n_tokens: int) -> None:
    """The button under a refusal: run the first `n_tokens` tokens of `text` (the boxes keep the whole text)."""
    enc = encoded_input(source, text, "")[1]
    prefix = text[: enc.offsets[n_tokens - 1][1]] if n_tokens else ""
    st.session_state.submitted = (prefix, "")
    notice(f"Running the first {n_tokens:,} tokens of your text ({len(prefix):,} of its {len(text):,} characters); "
           "the box keeps it whole.")  # fmt: skip


def page_long_run(source: str, text: Text, text_b: str) -> LongRun | None:
    """The long run of this input: kept, or made now with progress, the time left and a Stop button. None, with a
    message on the page, when the server's caps refuse it (a button then runs the first tokens that fit), when
    its visitor stopped it, or when it ran past its time limit."""
    model, enc = encoded_input(source, text, text_b)
    key = (source, text, text_b)
    kept = long_store().get(key)
    if kept is not None:
        return kept
    why = refusal(source, len(enc.tokens))
    if why is not None:
        st.warning(why)
        if not text_b and not isinstance(text, Written):
            fit = fitting(source)
            st.button(f"Run the first {fit:,} tokens", key="long_prefix", on_click=run_prefix, args=(source, text, fit))
        return None
    if st.session_state.get(STOPPED) == key:
        st.info("You stopped this text's run; nothing of it was kept.")
        st.button("Run it again", key="long_again", on_click=lambda: st.session_state.pop(STOPPED, None))
        return None
    bar, button = st.empty(), st.empty()
    button.button("Stop", key="long_stop", on_click=lambda: st.session_state.update({STOPPED: key}))
    bar.progress(0.0, text=f"Running the model over {len(enc.tokens):,} tokens, keeping what its maps need…")
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total), text=progress_text(done, total, time.monotonic() - started))

    try:
        with heavy_guard() as outcome:
            run = long_store().get_or_compute_heavy(
                key, "long", lambda deadline: long_run(model, enc, deadline.wrap(progress), bound=LONG_MAX_BYTES)
            )
    finally:
        bar.empty()
        button.empty()
    return run if outcome.ok else None


def progress_text(done: int, total: int, elapsed: float) -> str:
    """The progress line: the step, and the time left at the pace so far (once a step is done)."""
    left = elapsed / done * (total - done) if done else None
    when = "" if left is None else f", about {left:,.0f} s left" if left >= 1 else ", under a second left"
    return f"Every head's thumbnail, made exactly: step {done:,} of {total:,}{when}…"


def stored_long_run(source: str, text: Text, text_b: str) -> LongRun:
    """The long run the page made for this input; NeedsSmallerInput where there is none (a computation asked for
    a long input's run outside the page's own making of it)."""
    kept = long_store().get((source, text, text_b))
    if kept is None:
        model, enc = encoded_input(source, text, text_b)
        c = model.config
        raise NeedsSmallerInput(c.num_hidden_layers, c.num_attention_heads, len(enc.tokens))
    return kept
