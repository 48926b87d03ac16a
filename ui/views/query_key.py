"""The Query·key view: for one query token of the chosen head, its query vector, every key vector, their
product, the scaled score and the softmax probability, from the recorded forward pass."""

from __future__ import annotations

import streamlit as st

from attention.analysis.query_key import query_key
from viz._text import numbered
from viz.query_key import query_key_figure

from ..compute.runs import get_trace
from ..page.page import figure_slot, font_size, present_size, show
from ..state.state import PRESET_COREF
from ..state.view_context import ViewContext


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    layer, head = ctx.layer, ctx.head
    options = list(range(len(run.tokens)))
    st.session_state.setdefault("qk_query", 0)
    if st.session_state.qk_query not in options:
        st.session_state.qk_query = 0
    open_on_pronoun(run, ctx.sentence)
    slot = figure_slot(ctx.present)
    level = run.encoded.byte_level  # pieces as text, half a character as its bytes
    query = st.selectbox(
        "Query token",
        options,
        key="qk_query",
        persist_state="session",
        format_func=lambda i: numbered(i, run.tokens[i], level),
    )
    trace = get_trace(ctx.source, (ctx.text,), ctx.text_b, layer, head)
    qk = query_key(trace, head, query)
    st.caption(
        f"Layer {layer}, head {head}, from the recorded forward pass: the query vector of the chosen token, "
        f"every key vector, their elementwise product, the scaled score (sum of the product × "
        f"{qk.scaling:.4f}) and the softmax probability per key."
    )
    with slot or st.container():
        show(
            query_key_figure(
                qk, run.tokens, font_size=font_size(ctx.present), byte_level=level, **present_size(ctx.present)
            ),
            f"query-key-l{layer}-h{head}",
        )


def open_on_pronoun(run, text: str) -> None:
    """Once per sentence, a query left on the first token ([CLS], which asks nothing of interest) moves to
    the sentence's pronoun where the example names one (the coreference examples)."""
    if st.session_state.get("qk_opened") == text or "query" in st.query_params:
        return
    st.session_state.qk_opened = text
    pronoun = PRESET_COREF.get(text, (None,))[0]
    words = [t.lower() for t in run.tokens]
    if st.session_state.qk_query == 0 and pronoun in words:
        st.session_state.qk_query = words.index(pronoun)
