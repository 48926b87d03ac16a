"""Cross-attention: what an encoder-decoder (BART, mBART, Marian, T5) writes for the sentence (a
translation or a summary, written greedily, or the target typed in the Target box), and how its decoder
reads the encoder: one head's map (decoder tokens as rows, encoder tokens as columns), every head of the
chosen part, lines between the two rows, and the cross-attention's shape flow."""

from __future__ import annotations

import streamlit as st
import torch

import viz
from attention import ModelLoadError
from attention.runs.bigrun import BIG_RUN_BYTES, MB
from attention.runs.inputs import byte_level, on_model_device
from viz.cross import part_grid
from viz.lines import TooManyLines
from viz.shapeflow import cross_attention_flow

from ..compute.models import get_seq2seq
from ..compute.runs import MAX_NEW_TOKENS, Writing, get_writing
from ..compute.stores import budget
from ..page.layout import expander_px, main_px
from ..page.page import figure_slot, font_size, plain, present_size, show, show_text, shown_as
from ..state.actions import select
from ..state.state import CROSS_PARTS
from ..state.view_context import ViewContext

PART_KEYS = {label: key for key, label in CROSS_PARTS.items()}
# the lines view's two columns: who reads (left) and who is read (right)
HEADINGS = {
    "cross": ("decoder (target)", "encoder (source)"),
    "decoder": ("decoder (target)", "decoder (target)"),
    "encoder": ("encoder (source)", "encoder (source)"),
}


def draw(ctx: ViewContext) -> None:
    loaded = get_seq2seq(ctx.source)
    assert loaded is not None, "the registry offers this view for encoder-decoders only (kinds)"
    model, tokenizer = loaded
    slot = figure_slot(ctx.present)
    try:
        with st.spinner("Writing…"):
            writing = get_writing(ctx.source, ctx.sentence, ctx.target)
    except ModelLoadError as err:  # a checkpoint without its LM head cannot write, but reads a given target
        st.info(f"This checkpoint cannot write: {plain(str(err))}. Type a target to give its decoder.")
        return
    if writing.notice:
        st.info(writing.notice)
    part = st.segmented_control(
        "Part", list(CROSS_PARTS.values()), key="cross_part", persist_state="session", required=True
    )
    kind = PART_KEYS.get(part or "", "cross")
    rows, cols = _tokens(writing, kind)
    maps = writing.maps[kind]
    level = byte_level(tokenizer)  # pieces as text, half a character as its bytes
    layer, head = _within(ctx, maps.shape[0], maps.shape[1])
    written = tokenizer.decode(writing.decoder_ids[0].tolist(), skip_special_tokens=True)
    how = "given as the target" if writing.forced else f"written greedily (at most {MAX_NEW_TOKENS} new tokens)"
    show_text(f"Decoder, {how}: {plain(written)}", "written")
    if writing.checkpoint_beams > 1 and not writing.forced:
        show_text(
            f"This checkpoint's generation config asks for beam search with {writing.checkpoint_beams} beams; "
            "one beam (greedy) runs here.",
            "beams",
        )
    fig = viz.head_heatmap(
        maps[layer, head],
        rows,
        cols,
        title=f"{CROSS_PARTS[kind]}, layer {layer}, head {head}",
        font_size=font_size(ctx.present),
        square=False,  # presentation: the source's columns take the screen's width where the rows are height-bound
        byte_level=level,
        **(present_size(ctx.present) or {"width": main_px(ctx.present)}),
    )
    with slot or st.container():
        show(fig, f"{kind}-layer{layer}-head{head}", key="cross_map")
    st.caption(_about(kind))
    tiles = writing.pooled[kind] if writing.pooled is not None else maps  # past the bound: pooled in the pass
    grid = part_grid(
        tiles,
        (layer, head),
        f"{CROSS_PARTS[kind]}: every layer and head",
        font_size=font_size(ctx.present),
        width=main_px(ctx.present),
    )
    show(grid, f"{kind}-grid", key="cross_grid", on_select=_open_clicked, selection_mode="points")
    with st.expander("Lines between the two rows of tokens"):
        try:  # the strongest lines, within the page's message limit (viz/lines.py)
            lines = viz.lines_view(
                maps[layer, head],
                rows,
                heads=[f"L{layer} H{head}"],
                key_tokens=cols,
                headings=HEADINGS[kind],
                byte_level=level,
                font_size=font_size(ctx.present),  # a room reads the presentation's larger text here too
            )
        except TooManyLines as err:
            st.info(str(err))
        else:
            show(lines, f"{kind}-lines", key="cross_lines")
    cross = writing.maps["cross"]
    flow_layer, flow_head = min(layer, cross.shape[0] - 1), min(head, cross.shape[1] - 1)
    with st.expander(f"Shape flow of layer {flow_layer}'s cross-attention"):
        if writing.is_big:  # the flow's pass keeps every map (attention.tracing.trace.trace_cross_attention)
            st.info(
                f"The shape flow makes every map of one pass, more than the {BIG_RUN_BYTES // MB} MB this server "
                "holds for one run at this sentence and target: try a shorter one to see it."
            )
        else:
            _flow(model, writing, flow_layer, flow_head, ctx.present)


def _tokens(writing: Writing, kind: str) -> tuple[list[str], list[str]]:
    """The map's rows and columns: the decoder's tokens over the encoder's for the cross-attention."""
    if kind == "encoder":
        return writing.encoder_tokens, writing.encoder_tokens
    return writing.decoder_tokens, writing.decoder_tokens if kind == "decoder" else writing.encoder_tokens


def _within(ctx: ViewContext, n_layers: int, n_heads: int) -> tuple[int, int]:
    """The selected layer and head, within this part's (a decoder may have fewer layers than the encoder)."""
    layer, head = ctx.layer, ctx.head
    shown = min(layer, n_layers - 1), min(head, n_heads - 1)
    if shown != (layer, head):
        st.caption(f"This part has {n_layers} layers × {n_heads} heads: showing layer {shown[0]}, head {shown[1]}.")
    shown_as("layer", str(shown[0]))
    shown_as("head", str(shown[1]))
    return shown


def _about(kind: str) -> str:
    if kind == "cross":
        return (
            "Each row is a decoder token (the start token first) reading the encoder's tokens: in a "
            "translation, where each written word looks in the source. Each row sums to 1."
        )
    if kind == "decoder":
        return "The decoder's self-attention: each written token reads itself and those before it (causal)."
    return "The encoder's self-attention over the sentence, as every other view shows it."


def _flow(model, writing: Writing, layer: int, head: int, present: bool) -> None:
    enc, dec = on_model_device(
        model, torch.tensor(writing.encoder_ids.tolist()), torch.tensor(writing.decoder_ids.tolist())
    )
    st.caption("Q from the decoder's states, K and V from the encoder's output.")
    with budget().slot():  # a forward pass over the writing (within the bound get_writing checked): one at a time
        fig = cross_attention_flow(
            model, enc, dec, layer, font_size=font_size(present), width=expander_px(present), head=head
        )
    show(fig, f"cross-flow-layer{layer}", key="cross_flow")


def _open_clicked() -> None:
    for point in st.session_state["cross_grid"].selection.get("points", []):
        data = point.get("customdata")
        if data is not None and len(data) >= 2:
            select(data[0], data[1])
            return
