"""The DeBERTa terms view: the chosen head's content-to-content, content-to-position and position-to-content
score maps beside their total, from the recorded forward pass; for any other model, a plain line saying so."""

from __future__ import annotations

import streamlit as st

from attention.analysis.terms import trace_terms
from viz.disentangled import disentangled_figure

from ..compute.runs import get_trace
from ..page.layout import main_px
from ..page.page import font_size, show
from ..state.view_context import ViewContext


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    layer, head = ctx.layer, ctx.head
    # a DeBERTa's only: the registry offers this view for no other model (ui/page/registry.py, kinds)
    trace = get_trace(ctx.source, (ctx.text,), ctx.text_b, layer, head)
    terms = trace_terms(trace)
    st.caption(
        "DeBERTa adds to each score q_i·k_j (content to content) two terms read from relative positions: "
        "content to position, query i's content against the key's distance δ(i, j), and position to content, "
        "key j's content against the query's distance. All are scaled alike and summed before the softmax. "
        f"Layer {layer}, head {head}; one colour scale for the four maps, red above 0 and blue below."
    )
    maps = {name: getattr(terms, name)[0, trace.map_index(head)].numpy() for name in ("c2c", "c2p", "p2c", "total")}
    title = f"Layer {layer}, head {head}: the three terms and their total"
    show(
        disentangled_figure(
            maps, run.tokens, font_size=font_size(ctx.present), title=title, width=main_px(ctx.present)
        ),
        "disentangled",
    )
