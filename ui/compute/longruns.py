"""Long texts on the page: a text whose one layer of maps would be more than BIG_RUN_BYTES runs through the long
implementation (attention/runs/longrun.py) in the server's heavy slot, with a progress bar, a Stop button and the
"long" time limit, bounded before any work by the operator's ATTENTION_LONG_MAX_TOKENS and ATTENTION_LONG_MAX_MB
(ui/serve/settings.py). The run is kept in a store of its own, one at a time; get_run (ui/compute/runs.py) finds
it there."""

from __future__ import annotations

import streamlit as st

from attention.runs.bigrun import MB, NeedsSmallerInput
from attention.runs.longrun import LongRun, is_long, kept_bytes, long_run

from ..serve.settings import LONG_MAX_BYTES, LONG_MAX_TOKENS
from ..state.written import Text
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


def refusal(source: str, n_tokens: int) -> str | None:
    """Why a long run of `n_tokens` is not made on this server (its caps), or None."""
    model = get_model(source)[0]
    if n_tokens > LONG_MAX_TOKENS:
        return (
            f"This text has {n_tokens:,} tokens; this server draws long texts of at most {LONG_MAX_TOKENS:,} "
            "tokens (ATTENTION_LONG_MAX_TOKENS). Shorten it to see its maps; your text is kept."
        )
    kept = kept_bytes(model, n_tokens)
    if kept > LONG_MAX_BYTES:
        return (
            f"A run of {n_tokens:,} tokens with this model keeps {kept / MB:,.0f} MB (each layer's queries and "
            f"keys), more than the {LONG_MAX_BYTES / MB:,.0f} MB this server holds for one (ATTENTION_LONG_MAX_MB). "
            "Shorten the text or choose a smaller model; your text is kept."
        )
    return None


def page_long_run(source: str, text: Text, text_b: str) -> LongRun | None:
    """The long run of this input: kept, or made now with progress and a Stop button. None, with a message on the
    page, when the server's caps refuse it, when its visitor stopped it, or when it ran past its time limit."""
    model, enc = encoded_input(source, text, text_b)
    key = (source, text, text_b)
    kept = long_store().get(key)
    if kept is not None:
        return kept
    why = refusal(source, len(enc.tokens))
    if why is not None:
        st.warning(why)
        return None
    if st.session_state.get(STOPPED) == key:
        st.info("You stopped this text's run; nothing of it was kept.")
        st.button("Run it again", key="long_again", on_click=lambda: st.session_state.pop(STOPPED, None))
        return None
    bar, button = st.empty(), st.empty()
    button.button("Stop", key="long_stop", on_click=lambda: st.session_state.update({STOPPED: key}))
    bar.progress(0.0, text=f"Running the model over {len(enc.tokens):,} tokens, keeping what its maps need…")

    def progress(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total), text=f"Every head's thumbnail, made exactly: step {done:,} of {total:,}…")

    try:
        with heavy_guard() as outcome:
            run = long_store().get_or_compute_heavy(
                key, "long", lambda deadline: long_run(model, enc, deadline.wrap(progress))
            )
    finally:
        bar.empty()
        button.empty()
    return run if outcome.ok else None


def stored_long_run(source: str, text: Text, text_b: str) -> LongRun:
    """The long run the page made for this input; NeedsSmallerInput where there is none (a computation asked for
    a long input's run outside the page's own making of it)."""
    kept = long_store().get((source, text, text_b))
    if kept is None:
        model, enc = encoded_input(source, text, text_b)
        c = model.config
        raise NeedsSmallerInput(c.num_hidden_layers, c.num_attention_heads, len(enc.tokens))
    return kept
