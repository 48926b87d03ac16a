"""The Rollout & flow view: a layer's head-averaged attention beside rollout or attention flow through
the layers up to it."""

from __future__ import annotations

import streamlit as st

from attention.analysis.rollout import FLOW_MAX_TOKENS
from viz.rollout import attention_pair, pair_stacked

from ..compute.computations import flow_into, rollout_at
from ..compute.limits import heavy_guard
from ..page.layout import main_px
from ..page.page import figure_slot, font_size, present_size, progress_bar, show
from ..state.view_context import ViewContext


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    layer, T = ctx.layer, len(run.tokens)
    source, text, text_b = ctx.source, ctx.text, ctx.text_b
    slot = figure_slot(ctx.present)
    choice = st.radio(
        "Beside the layer's raw attention",
        ["Rollout", "Flow"],
        key="rollout_kind",
        persist_state="session",
        horizontal=True,
    )
    raw = run.attentions[layer].mean(axis=0)  # (T, T) head-averaged
    labels = run.tokens
    if choice == "Rollout":
        derived = rollout_at(source, run, text, text_b, layer)
        title = f"Rollout through layer {layer}"
        st.caption(
            "Rollout (Abnar & Zuidema 2020): each layer's head-averaged attention, with half the weight on "
            "the residual path (0.5·A + 0.5·I, rows renormalised), multiplied through the layers: how much "
            "each input token (column) reaches each position (row) after this layer. Rows sum to 1."
        )
    else:
        if T > FLOW_MAX_TOKENS:
            st.info(
                f"Attention flow is offered up to {FLOW_MAX_TOKENS} tokens; this input has {T}. It solves one "
                f"max-flow problem for every pair of tokens ({T * T:,} of them) on a graph of all layers' "
                f"positions: about 7 s at {FLOW_MAX_TOKENS} tokens here, and the time grows faster than T², "
                f"to minutes at this length. Rollout is shown instead."
            )
            derived = rollout_at(source, run, text, text_b, layer)
            title = f"Rollout through layer {layer}"
        else:
            bar, update = progress_bar(f"Solving {T * T} max-flow problems…")
            with heavy_guard() as outcome:
                derived = flow_into(source, run, text, text_b, layer, update)
            bar.empty()
            if not outcome.ok:
                return
            title = f"Flow into layer {layer}"
            st.caption(
                "Flow (Abnar & Zuidema 2020): the maximum flow from each input token (column) to each "
                "position after this layer (row) through the layers' attention graph, capacities the same "
                "residual-added attention as rollout. Values in [0, 1]; rows are not normalised."
            )
    level = run.encoded.byte_level  # pieces as text, half a character as its bytes
    if slot is None and pair_stacked(labels, font_size(ctx.present), main_px(ctx.present), level):
        st.caption(f"At {T} tokens the two maps are too dense side by side: the second is drawn under the first.")
    with slot or st.container():
        show(
            attention_pair(
                raw,
                derived,
                labels,
                title,
                font_size=font_size(ctx.present),
                byte_level=level,
                **(present_size(ctx.present) or {"width": main_px(ctx.present)}),
            ),
            f"rollout-layer{layer}",
        )
