"""The guided walk: one step of multi-head attention per screen, on the live tensors of the typed
sentence, for the chosen layer and head — tokens, the layer's input, Q/K/V, heads, scores, mask,
softmax, weighted sum, concatenation, output projection, and what one head learned. An encoder-decoder's
walk has one more step before the last: its decoder's cross-attention over the encoder's output.

The steps come from the recorded forward pass (attention/tracing/trace.py), so a model shows the steps it
really takes: a fused QKV projection, K/V shared by groups of heads, a causal mask. Each step has
its own link (?view=walk&walk=N); the arrow keys and the two buttons move between steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from attention import ModelLoadError
from attention.runs.bigrun import KeepsTooMuch
from attention.tracing.trace import head_matrix
from viz.heatmap import head_heatmap
from viz.shapeflow import tensor_heatmap

from ..compute.computations import strongest_head
from ..compute.runs import Writing, get_trace, get_writing
from ..page.layout import main_px
from ..page.page import axis_labels, font_size, plain, show, show_text, shown_as, strip_figure
from ..page.present import MIN_PRESENT_LABEL_PX, figure_height
from ..state.view_context import ViewContext
from ..state.written import Text

HEADING_PX = 56  # presentation: the step's one-line heading above the figure
CROSS = "Cross-attention"  # the encoder-decoder's extra step
LEARNED = "What one head learned"  # the last step: the head strongest_head finds, not always the chosen one


@dataclass(frozen=True)
class Step:
    title: str
    names: tuple[str, ...]  # trace steps drawn (for the chosen head); () for the tokens and the last step
    says: str  # one sentence, with {placeholders} filled from the trace's sizes


def steps_of(trace, causal: bool, cross: bool = False) -> list[Step]:
    """The walk for this trace: the steps it recorded, in the order of the story; with `cross` (an
    encoder-decoder), its decoder's cross-attention before the last step."""
    has = trace.names
    steps = [
        Step(
            "Tokens",
            (),
            "The tokenizer cuts the sentence into L = {L} pieces; each is a row of every tensor that follows.",
        )
    ]
    steps.append(
        Step(
            "The layer's input",
            ("input",),
            "Each token is a vector of D = {D} numbers: the embeddings for layer 0, the previous "
            "layer's output after that. This is layer {layer}'s input, L × D = {L} × {D}.",
        )
    )
    if "qkv_proj" in has:
        steps.append(
            Step(
                "One projection for Q, K and V",
                ("qkv_proj",),
                "This model makes Q, K and V with one matrix (a fused projection) and cuts the "
                "result in three; shown: this head's columns of each.",
            )
        )
    steps.append(
        Step(
            "Q, K and V",
            ("q_proj", "k_proj", "v_proj"),
            "Three learned projections of the input: queries ask, keys answer, values carry what is "
            "passed on. Each is L × {Hd}; shown: this head's d = {d} columns of each.",
        )
    )
    steps.append(
        Step(
            "Split into heads",
            ("q_heads", "k_heads"),
            "The {Hd} columns are viewed as H = {H} heads of d = {d} and moved in front of the "
            "positions: (B, L, H·d) → (B, H, L, d), no copy. Every head attends on its own.",
        )
    )
    if "k_shared" in has:
        steps.append(
            Step(
                "K and V shared by groups",
                ("k_shared",),
                "This model has G = {G} key/value heads for H = {H} query heads: each K and V head "
                "is repeated for its group of H/G = {group} query heads.",
            )
        )
    steps.append(
        Step(
            "Scores and scaling",
            ("scores",),
            f"Every query · every key: {_words(trace, 'scores')}; an L × S = {{L}} × {{S}} table. "
            "High means this query finds this key relevant.",
        )
    )
    steps.append(
        Step(
            "Mask",
            ("mask",),
            (
                "A causal model lets each token see only itself and earlier tokens: the rest is set to −∞."
                if causal
                else "Which keys each query may see (1) or not (0): a padded batch or a causal model drops keys."
            )
            + f" Here: {_words(trace, 'mask')}.",
        )
    )
    steps.append(
        Step(
            "Softmax",
            ("probs",),
            "Each row becomes probabilities that sum to 1: how much this query takes from each key. "
            "This is the attention map the other views draw.",
        )
    )
    steps.append(
        Step(
            "Weighted sum",
            ("heads",),
            "Each query's output is its row of probabilities times V: a mix of the value vectors, "
            "L × d = {L} × {d} per head.",
        )
    )
    steps.append(
        Step(
            "Concatenate the heads",
            ("merged",),
            "The H = {H} heads' outputs are set side by side again: L × H·d = {L} × {Hd}.",
        )
    )
    steps.append(
        Step(
            "Output projection",
            ("output",),
            "One more learned matrix mixes the heads into the model's width: L × D = {L} × {D}. "
            "The residual and the feed-forward block follow.",
        )
    )
    if cross:
        steps.append(
            Step(
                CROSS,
                (),
                "In an encoder-decoder the decoder attends to the encoder too: Q from the decoder's states "
                "(L_Q = {T} decoder tokens, the start token first), K and V from the encoder's output (L_K = "
                "{S} encoder tokens). The scores are L_Q × L_K = {T} × {S} per head; after the softmax each "
                "decoder row says where in the source it reads. Shown: decoder layer {cross_layer}, head "
                "{cross_head}.",
            )
        )
    steps.append(Step(LEARNED, (), ""))
    return steps


def _words(trace, name: str) -> str:
    """The step's operation as the shape flow words it (attention/tracing/steps.py), kept literal in a format string."""
    return " ".join(trace.step(name).op.split()).replace("{", "{{").replace("}", "}}")


def step_to(delta: int, count: int) -> None:
    st.session_state.walk_step = min(max(int(st.session_state.get("walk_step", 0)) + delta, 0), count - 1)


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    layer, head = ctx.layer, ctx.head
    trace = get_trace(ctx.source, (ctx.text,), ctx.text_b, layer, head)
    steps = steps_of(trace, ctx.model.causal, cross=ctx.model.seq2seq)
    index = min(max(int(st.session_state.get("walk_step", 0)), 0), len(steps) - 1)
    st.session_state.walk_step = index
    step = steps[index]
    learned = learned_head(run, ctx.text, layer, head) if step.title == LEARNED else None
    heading = f"**Step {index + 1} of {len(steps)}: {step.title}** — layer {layer}, head {head}"
    if learned is not None and learned[:2] != (layer, head):  # the head drawn, and that it is not the chosen one
        heading = f"**Step {index + 1} of {len(steps)}: {step.title}** — layer {learned[0]}, head {learned[1]}"
        heading += f" ({learned[3]}; you chose layer {layer}, head {head})"
    present = ctx.present
    if present:  # one line above the figure; the buttons and the sentence that says what it is under it
        st.markdown(heading)
        slot, budget = st.container(), figure_height(HEADING_PX)
    else:
        slot, budget = None, None
    shown_as("walk_step", f"{index + 1} of {len(steps)}: {step.title}")  # the report says it as the page
    back, where, forward = st.columns([1, 4, 1])
    back.button(
        "Back",
        key="walk_prev",
        on_click=step_to,
        args=(-1, len(steps)),
        disabled=index == 0,
        width="stretch",
        shortcut="Left",
    )
    forward.button(
        "Next",
        key="walk_next",
        on_click=step_to,
        args=(1, len(steps)),
        disabled=index == len(steps) - 1,
        width="stretch",
        shortcut="Right",
    )
    where.markdown(("" if present else heading + "  \n") + "← → or the buttons move between steps")
    sizes = trace.sizes()
    facts = dict(
        sizes, layer=layer, Hd=sizes["H"] * sizes["d"], scaling=f"{trace.scaling:.4g}", group=sizes["H"] // sizes["G"]
    )
    writing = None
    if step.title == CROSS:
        writing = _writing(ctx)
        if writing is None:
            return
        facts.update(_cross_facts(writing, layer, head))
    if step.says:
        show_text(step.says.format(**facts), "walk-says")
    with slot or st.container():
        if writing is not None:
            draw_cross(writing, facts["cross_layer"], facts["cross_head"], present, budget)
        elif step.title == "Tokens":
            show(strip_figure(run.encoded, main_px(present), present), "walk-tokens")
        elif step.names:
            draw_tensors(trace, step.names, head, run.encoded, present, budget)
        elif learned is not None:
            what_one_head_learned(run, learned, present, budget)


def draw_tensors(trace, names: tuple[str, ...], head: int, encoded, present: bool, height: int | None = None) -> None:
    """The step's tensors side by side, for ``head``; their token axes labelled with ``encoded``'s pieces."""
    tokens = encoded.tokens
    width = main_px(present) // len(names) - 16
    for column, name in zip(st.columns(len(names)), names):
        matrix, rows, cols = head_matrix(trace, name, head)
        kind = "probs" if name in ("probs", "mask") else "values"
        shape = " × ".join(map(str, trace.step(name).shape or ()))
        with column:
            show(
                tensor_heatmap(
                    matrix,
                    axis_labels(rows, tokens, matrix.shape[0]),
                    axis_labels(cols, tokens, matrix.shape[1]),
                    title=f"{trace.step(name).title} [{shape}], head {head}",
                    font_size=font_size(present),
                    kind=kind,
                    width=width,
                    height=height,
                    min_label=MIN_PRESENT_LABEL_PX if height else None,
                    byte_level=encoded.byte_level,
                ),
                f"walk-{name}",
            )


def learned_head(run, text: Text, layer: int, head: int) -> tuple[int, int, str, str]:
    """The last step's head: (layer, head, why, what it is in a few words). On an example with a pronoun, the
    head strongest_head finds; else the chosen one."""
    found = strongest_head(run, text, st.session_state.get("coref_rank"))
    if found is None:
        why = (
            f"Layer {layer}, head {head}'s map for this sentence. On an example with a pronoun (pick one "
            "under Examples), this step finds the head that links the pronoun to what it refers to."
        )
        return layer, head, why, "the chosen head"
    opened = "found for this sentence" if found[2].startswith("Opened") else "no head separates the candidates"
    return found[0], found[1], found[2] + " Its map:", opened


def what_one_head_learned(run, learned: tuple[int, int, str, str], present: bool, height: int | None = None) -> None:
    layer, head, why, _ = learned
    place = st.container()
    if height is None:
        place.caption(why)
    fig = head_heatmap(
        run.attentions[layer, head],
        run.tokens,
        title=f"Layer {layer}, head {head}",
        font_size=font_size(present),
        width=main_px(present),
        height=height,
        min_label=MIN_PRESENT_LABEL_PX if height else None,
        byte_level=run.encoded.byte_level,
    )
    with place:
        show(fig, "walk-head")
    if height is not None:  # presentation: what it found, under the map
        st.caption(why)


def _writing(ctx: ViewContext) -> Writing | None:
    """The encoder-decoder's decoder pass over the text (the typed target forced, else written), as the
    Cross-attention view reads it; None, with a notice, for a checkpoint that cannot write or a pass of which
    even one layer's maps would pass the big-run bound (past it otherwise, its maps are read a layer at a time)."""
    try:
        with st.spinner("Writing…"):
            writing = get_writing(ctx.source, ctx.sentence, ctx.target)
    except ModelLoadError as err:
        st.info(f"This checkpoint cannot write: {plain(str(err))}. Type a target to give its decoder.")
        return None
    except KeepsTooMuch as err:  # one layer's maps past the big-run bound: refused before the work
        st.info(str(err))
        return None
    if writing.notice:
        st.info(writing.notice)
    return writing


def _cross_facts(writing: Writing, layer: int, head: int) -> dict:
    """The sizes the cross step names, and the decoder's layer and head nearest the chosen ones (a decoder
    may have fewer layers or heads than the encoder)."""
    n_layers, n_heads, T, S = writing.maps["cross"].shape
    return dict(T=T, S=S, cross_layer=min(layer, n_layers - 1), cross_head=min(head, n_heads - 1))


def draw_cross(writing: Writing, layer: int, head: int, present: bool, height: int | None = None) -> None:
    """One head's cross-attention map: decoder tokens as rows, encoder tokens as columns."""
    attn = writing.maps["cross"][layer, head]
    fig = head_heatmap(
        attn,
        writing.decoder_tokens,
        writing.encoder_tokens,
        title=f"Cross-attention [{attn.shape[0]} × {attn.shape[1]}], decoder layer {layer}, head {head}",
        font_size=font_size(present),
        width=main_px(present),
        height=height,
        min_label=MIN_PRESENT_LABEL_PX if height else None,
    )
    show(fig, f"walk-cross-layer{layer}-head{head}")
