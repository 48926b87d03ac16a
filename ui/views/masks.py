"""The Masks view: the padding mask of a padded batch and the padded sentence's map, and the causal
mask beside the map it gives (the model's own for a decoder, a what-if for an encoder)."""

from __future__ import annotations

import numpy as np
import streamlit as st

import viz
from viz.heatmap import grid_fits
from viz.masks import PAD, causal_legend_px

from ..compute.runs import get_batch, get_run
from ..page.layout import column_px, main_px, slots
from ..page.page import figure_slot, font_size, present_size, show, too_big_for_batch
from ..state.state import SHORT_SECOND
from ..state.view_context import ViewContext
from ..state.written import text_of


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    text, text_b = ctx.text, ctx.text_b
    layer, head = ctx.layer, ctx.head
    texts = (text, text_b or SHORT_SECOND)
    fs, full = font_size(ctx.present), main_px(ctx.present)
    fit = {k: v for k, v in present_size(ctx.present).items() if k != "width"}  # presentation: each map within a screen
    level = run.encoded.byte_level  # pieces as text, half a character as its bytes
    slot = figure_slot(ctx.present)  # presentation: the mask and the padded map first, on the first screen
    st.subheader("Padding mask of a padded batch")
    if not too_big_for_batch(run):
        batch = get_batch(ctx.source, texts)
        st.caption(
            "Two sentences of different lengths in one batch: the shorter is padded, and the mask keeps "
            "every query from attending to padding."
        )
        each = column_px(ctx.present, 2) if ctx.present else full  # presentation: side by side on the first screen
        mask = viz.padding_mask_figure(
            batch.mask, batch.names, batch.tokens, font_size=fs, title="Padding mask", width=each, byte_level=level
        )
        short = int(np.argmin(batch.mask.sum(1)))
        # padding named as the mask names it: the pad piece is often a real token (SmolLM2's <|im_end|>)
        labels = [token if keep else PAD for token, keep in zip(batch.tokens[short], batch.mask[short])]
        with slot or st.container():
            left, right = slots(ctx.present)
        with left:
            show(mask, "padding-mask")
        with right:
            show(
                viz.head_heatmap(
                    batch.attentions[layer, short, head],
                    labels,
                    title=f"{batch.names[short]}, padded: layer {layer}, head {head}",
                    font_size=fs,
                    width=each,
                    byte_level=level,
                    **fit,
                ),
                "padded-attention",
                sentence=text_of(texts[short]),
            )
    if ctx.model.causal:
        st.subheader("The causal mask")
        st.caption(
            "This model is causal, as it was trained: each token sees only itself and earlier tokens. The "
            "map beside the mask is the model's own."
        )
    else:
        st.subheader("What-if: a causal mask")
        st.caption(
            "This model reads both directions. This runs the same weights with a causal mask, so each token "
            "sees only itself and earlier tokens — a what-if, not how the model was trained."
        )
    causal = get_run(ctx.source, text, text_b, causal=True)
    half = column_px(ctx.present, 2)
    beside = grid_fits(run.tokens, fs, half, right=causal_legend_px(fs))
    width = half if beside else full
    if not beside:
        st.caption(
            f"At {len(run.tokens)} tokens the mask and the map are too dense side by side: one is drawn "
            "under the other, across the page."
        )
    left, right = slots(beside)
    with left:
        named = "Causal mask" if ctx.model.causal else "What-if: causal mask"
        mask = viz.causal_mask_figure(
            len(run.tokens), run.tokens, font_size=fs, title=named, width=width, byte_level=level, **fit
        )
        show(mask, "causal-mask")
    with right:
        show(
            viz.head_heatmap(
                causal.attentions[layer, head],
                causal.tokens,
                title=f"{'Causal' if ctx.model.causal else 'What-if: causal'}, layer {layer}, head {head}",
                font_size=fs,
                width=width,
                byte_level=level,
                **fit,
            ),
            "causal-attention",
        )
