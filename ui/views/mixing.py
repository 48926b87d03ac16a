"""The Mixing view: a head's (or its layer's) raw attention beside what it moves, the value-weighted map
‖a_ij · f_h(x_j)‖ (Kobayashi et al. 2020), or beside the layer's value zeroing (Mohebbi et al. 2023): how much
each token's output changes when token j's values are zeroed. Same tokens, same colour scale, each row divided
by its sum so that shares compare; the special tokens hidden where the Head view hides them."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention.analysis.mixing import VALUE_ZEROING_MAX_TOKENS
from viz.mixing import mixing_maps, mixing_view, shares

from ..compute.computations import mixing_of, zeroing_of
from ..page.layout import main_px
from ..page.page import figure_slot, font_size, plain, present_size, show, show_text
from ..state.state import MIXING_KINDS
from ..state.view_context import ViewContext

CHOICES = tuple(MIXING_KINDS.values())  # this head's value-weighted map, the layer's, the layer's value zeroing


def draw(ctx: ViewContext) -> None:
    run, layer, head = ctx.run, ctx.layer, ctx.head
    if ctx.text_b:
        st.info("Mixing reads one sentence: clear the second sentence to see it.")
        return
    slot = figure_slot(ctx.present) or st.container()  # the figure first, its controls under it
    special = np.array(run.encoded.special, dtype=bool)
    specials = "/".join(dict.fromkeys(t for t, s in zip(run.tokens, special) if s)) or "special tokens"
    beside, hiding = st.columns([3, 1])
    choice = beside.radio(
        "Beside the raw attention", CHOICES, key="mixing_kind", persist_state="session", horizontal=True
    )
    hide = hiding.checkbox(
        f"Hide {specials}",
        key="hide_special",
        persist_state="session",
        disabled=bool(not special.any() or special.all()),
    )
    keep = ~special if hide and special.any() and not special.all() else np.ones(len(special), dtype=bool)
    weighted, zeroing = None, None
    if choice == CHOICES[2]:
        if len(run.tokens) > VALUE_ZEROING_MAX_TOKENS:  # bounded before the work
            st.info(
                f"Value zeroing reruns the layer once for every token, so it is offered up to "
                f"{VALUE_ZEROING_MAX_TOKENS} tokens; this text has {len(run.tokens)}. Shorten it, or pick a "
                "value-weighted map."
            )
            return
        with st.spinner(f"Zeroing each token's values in layer {layer}…"):
            zeroing = zeroing_of(ctx.source, run, ctx.text, ctx.text_b, layer)
    else:
        with st.spinner("Weighting every map by the size of what it moves…"):
            weighted = mixing_of(ctx.source, run, ctx.text, ctx.text_b)
    by_head = head if choice == CHOICES[0] else None
    size = present_size(ctx.present) or {"width": main_px(ctx.present)}
    fig = mixing_view(
        run.attentions,
        run.tokens,
        layer,
        by_head,
        keep=keep,
        font_size=font_size(ctx.present),
        **size,
        weighted=weighted,
        zeroing=zeroing,
        byte_level=run.encoded.byte_level,
    )
    with slot:
        show(fig, f"mixing-layer{layer}")
    said = "" if special.any() and hide else sink_note(ctx, by_head, specials, weighted=weighted, zeroing=zeroing)
    show_text(
        "Each row is a token as a query, divided by its sum so that the two maps' shares compare. Raw attention "
        "says where a head looks; the value-weighted map ‖a_ij · f(x_j)‖ (Kobayashi et al. 2020) counts how much "
        "of token j it moves, through the head's value and output projections; value zeroing (Mohebbi et al. "
        "2023) measures how far each token's output of the layer moves when token j's values are zeroed." + said,
        "mixing-caption",
    )


def sink_note(ctx: ViewContext, head: int | None, specials: str, *, weighted=None, zeroing=None) -> str:
    """The caption's share of each row on the special tokens (`specials`, e.g. "[CLS]/[SEP]") where the model adds
    them, else on the first token (a decoder's attention sink), in the raw map and in the one beside it: Kobayashi et
    al. 2020 saw the special tokens' columns shrink once the norms count. Every token kept, as the rows' sums."""
    run = ctx.run
    special = np.array(run.encoded.special, dtype=bool)
    to = special if special.any() else np.arange(len(special)) == 0  # (L,) the columns summed
    name = specials if special.any() else f"the first token (“{plain(run.tokens[0])}”)"
    pair = mixing_maps(run.attentions, ctx.layer, head, weighted=weighted, zeroing=zeroing)[:2]
    every = np.ones(len(special), dtype=bool)
    raw, moved = (float(shares(m, every)[:, to].sum(axis=1).mean()) for m in pair)
    return f" To {name}: {raw:.0%} of each row raw, {moved:.0%} here."
