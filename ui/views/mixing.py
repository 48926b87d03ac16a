"""The Mixing view: a head's (or its layer's) raw attention beside what it moves, the value-weighted map
‖a_ij · f_h(x_j)‖ (Kobayashi et al. 2020), or beside the layer's value zeroing (Mohebbi et al. 2023): how much
each token's output changes when token j's values are zeroed. Same tokens, same colour scale, each row divided
by its sum so that shares compare; the special tokens hidden where the Head view hides them."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention.analysis.mixing import VALUE_ZEROING_MAX_TOKENS
from viz.rollout import attention_pair

from ..compute.computations import mixing_of, zeroing_of
from ..page.layout import main_px
from ..page.page import figure_slot, font_size, present_size, show, show_text
from ..state.view_context import ViewContext

CHOICES = ("Value-weighted, this head", "Value-weighted, the layer", "Value zeroing, the layer")


def shares(matrix: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The kept rows and columns, each row divided by its sum (0 where a row has nothing left)."""
    part = matrix[np.ix_(keep, keep)].astype(np.float64)
    total = part.sum(axis=1, keepdims=True)
    return np.divide(part, total, out=np.zeros_like(part), where=total > 0).astype(np.float32)


def draw(ctx: ViewContext) -> None:
    run, layer, head = ctx.run, ctx.layer, ctx.head
    if ctx.text_b:
        st.info("Mixing reads one sentence: clear the second sentence to see it.")
        return
    slot = figure_slot(ctx.present) or st.container()  # the figure first, its controls under it
    special = np.array(run.encoded.special, dtype=bool)
    specials = "/".join(dict.fromkeys(t for t, s in zip(run.tokens, special) if s)) or "special tokens"
    beside, hiding = st.columns([3, 1])
    choice = beside.radio("Beside the raw attention", CHOICES, key="mixing_kind", horizontal=True)
    hide = hiding.checkbox(f"Hide {specials}", key="hide_special", disabled=bool(not special.any() or special.all()))
    keep = ~special if hide and special.any() and not special.all() else np.ones(len(special), dtype=bool)
    if choice == CHOICES[2]:
        if len(run.tokens) > VALUE_ZEROING_MAX_TOKENS:  # bounded before the work
            st.info(
                f"Value zeroing reruns the layer once for every token, so it is offered up to "
                f"{VALUE_ZEROING_MAX_TOKENS} tokens; this text has {len(run.tokens)}. Shorten it, or pick a "
                "value-weighted map."
            )
            return
        with st.spinner(f"Zeroing each token's values in layer {layer}…"):
            moved = zeroing_of(ctx.source, run, ctx.text, ctx.text_b, layer)
        raw, title = run.attentions[layer].mean(axis=0), f"Value zeroing, layer {layer}"
        raw_title = "Attention, mean over heads"
    else:
        with st.spinner("Weighting every map by the size of what it moves…"):
            norms = mixing_of(ctx.source, run, ctx.text, ctx.text_b)
        if choice == CHOICES[0]:
            raw, moved = run.attentions[layer, head], norms.heads[layer][head]
            raw_title, title = f"Attention, L{layer} H{head}", f"‖a·f(x)‖, L{layer} H{head}"
        else:
            raw, moved = run.attentions[layer].mean(axis=0), norms.layers[layer]
            raw_title, title = "Attention, mean over heads", f"‖Σ_h a·f(x)‖, layer {layer}"
    left, right = shares(raw, keep), shares(moved, keep)
    labels = [t for t, k in zip(run.tokens, keep) if k]
    size = present_size(ctx.present) or {"width": main_px(ctx.present)}
    fig = attention_pair(left, right, labels, title, font_size=font_size(ctx.present), raw_title=raw_title, **size)
    with slot:
        show(fig, f"mixing-layer{layer}")
    said = ""
    if special.any() and not hide:  # Kobayashi et al.: the special tokens' columns shrink once the norms count
        to_special = [float(m[:, special[keep]].sum(axis=1).mean()) for m in (left, right)]
        said = f" To {specials}: {to_special[0]:.0%} of each row raw, {to_special[1]:.0%} here."
    show_text(
        "Each row is a token as a query, divided by its sum so that the two maps' shares compare. Raw attention "
        "says where a head looks; the value-weighted map ‖a_ij · f(x_j)‖ (Kobayashi et al. 2020) counts how much "
        "of token j it moves, through the head's value and output projections; value zeroing (Mohebbi et al. "
        "2023) measures how far each token's output of the layer moves when token j's values are zeroed." + said,
        "mixing-caption",
    )
