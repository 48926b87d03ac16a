"""The Logit lens view: what each layer would write next at each position, were it the last (the final norm and
the LM head applied to its output: attention/analysis/lens.py), and where the model commits to what it writes."""

from __future__ import annotations

from typing import cast

import streamlit as st

from viz._text import readable
from viz.lens import HEIGHT_PX, MOST_SKIPPED, commit_layers, drawn_layers, lens_view, readable_every

from ..compute.generation import LENS_MAX_TOKENS, lens_of, lm_head
from ..compute.models import get_model
from ..page.layout import main_px
from ..page.page import figure_slot, font_size, plain, present_size, show, show_text
from ..state.view_context import ViewContext


def draw(ctx: ViewContext) -> None:
    run, source = ctx.run, ctx.source
    head, why = lm_head(source)
    if head is None:  # a causal decoder's only (the registry's kinds): here its LM head could not be read
        st.info(f"This model has no next-token head to read through: {plain(why or 'unknown')}.")
        return
    ids = tuple(int(i) for i in run.encoded.input_ids[0].tolist())  # a continuation's as the model wrote them
    if len(ids) > LENS_MAX_TOKENS:  # bounded before any work
        st.info(
            f"The logit lens reads the LM head at every layer and position, so it is offered up to "
            f"{LENS_MAX_TOKENS} tokens; this text has {len(ids)}. Shorten it to see it."
        )
        return
    with st.spinner("Reading every layer through the final norm and the LM head…"):
        lens = lens_of(source, ids)
    tokenizer = get_model(source)[1]
    n_layers, L, top = lens.ids.shape
    pieces = tokenizer.convert_ids_to_tokens(lens.ids.reshape(-1).tolist())
    top_tokens = [[pieces[(i * L + j) * top : (i * L + j + 1) * top] for j in range(L)] for i in range(n_layers)]
    tokens = tokenizer.convert_ids_to_tokens(list(ids))
    size = present_size(ctx.present) or {"width": main_px(ctx.present)}
    level = run.encoded.byte_level  # pieces as text, half a character as its bytes
    slot = figure_slot(ctx.present) or st.container()  # the figure above the choice of its layers
    fits = readable_every(n_layers, size.get("height", HEIGHT_PX), font_size(ctx.present))
    layers = drawn_layers(n_layers, *_layer_choice(n_layers, fits))
    fig = lens_view(
        top_tokens,
        lens.ids,
        lens.probs,
        tokens,
        font_size=font_size(ctx.present),
        byte_level=level,
        layers=layers,
        **size,
    )
    with slot:
        show(fig, "logit-lens")
    commit = int(commit_layers(lens.ids[:, :, 0])[-1])
    last = plain(readable(top_tokens[-1][-1][0], level))
    show_text(
        f"Each row is a layer's output read as if it were the last: the model's final norm and LM head applied "
        f"to it, a softmax over the vocabulary. A cell shows the most probable next token there, its colour that "
        f"token's probability; the hover lists the top {top}. The open square marks where the model commits: the "
        f"first layer from which the top token stays the last layer's. After the last token the model writes "
        f"{last} (p = {lens.probs[-1, -1, 0]:.2f}), on top from layer {commit} of {n_layers}.",
        "lens-caption",
    )


def _layer_choice(n_layers: int, fits: int) -> tuple[int, int, int]:
    """(every, first, last): the layers the lens draws, as chosen under it. By default every `fits`-th (as many
    as the figure shows readably: readable_every), the last layer always among them; a choice kept from another
    model that does not fit this one is let go."""
    options = list(range(min(MOST_SKIPPED, max(n_layers - 1, 1)) + 1))  # 0: as many as the figure holds
    if st.session_state.get("lens_every") not in options:
        st.session_state.lens_every = 0
    span = st.session_state.get("lens_span")
    if not (isinstance(span, tuple) and len(span) == 2 and 0 <= span[0] <= span[1] < n_layers):
        st.session_state.lens_span = (0, n_layers - 1)
    left, right = st.columns(2)
    every = left.select_slider(
        "Layers drawn",
        options,
        key="lens_every",
        persist_state="session",
        format_func=lambda k: _every(k or fits) + (" (as the figure holds)" if k == 0 else ""),
    )
    span = right.select_slider("From layer … to layer", list(range(n_layers)), key="lens_span", persist_state="session")
    first, last = cast(tuple[int, int], span)  # a range: its value is a pair
    return every or fits, first, last


def _every(k: int) -> str:
    return "every layer" if k == 1 else f"every {k}{'nd' if k == 2 else 'rd' if k == 3 else 'th'} layer"
