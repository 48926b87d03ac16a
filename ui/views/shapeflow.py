"""The Shape flow view: one attention layer's steps with the real shapes of this sentence's tensors, cut into
stages that fit the screen, and beside it the tensor of the step clicked and the chosen head's attention
map. A click on a box shows its tensor; a head chosen here, on the keys or in the sidebar moves both."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

import viz
from attention.tracing.trace import head_matrix
from viz.shapeflow import flow_stages, shape_flow, tensor_heatmap
from viz.tensor_map import bar_under, cell_px, clickable_cells

from ..compute.runs import get_batch, get_trace
from ..page.layout import column_px
from ..page.page import axis_labels, figure_slot, plain, show, too_big_for_batch
from ..page.present import MIN_PRESENT_LABEL_PX, figure_height
from ..state.actions import select
from ..state.state import SHAPEFLOW_DEFAULT_STEP, SHORT_SECOND
from ..state.view_context import ViewContext

# the diagram, and the panel of the tensor and the head's map beside it: on an ordinary page the diagram at its
# narrowest (viz.shapeflow.min_width, 395 px at 1280) so that the map beside it labels each of 16 tokens
SPEC = {False: [51, 49], True: [3, 2]}
BOX_PX = {False: 14, True: MIN_PRESENT_LABEL_PX}  # the boxes' text: ordinary page, presentation
MAP_PX = {False: 12, True: MIN_PRESENT_LABEL_PX}  # the map's text (its labels no smaller): ordinary, presentation
# the diagram's and the panel's height on an ordinary page: they start under the sentence, the view buttons and
# this view's controls (y ≈ 352 on a 1280 × 800 screen), and end on that screen
FLOW_PX = 440
TENSOR_SHARE = 0.35  # of the panel's height, the selected tensor's above the map (ordinary page; half in a show)
GAP_PX = 16  # between the tensor and the map: Streamlit's 1 rem between elements
MAP_STEPS = ("probs",)  # the head's map itself: the panel shows it once
HOLDING = 0  # shapeflow_stage after a click: the stage that holds the step clicked (the link's are 1-based)


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    slot = figure_slot(ctx.present)
    present = ctx.present
    first, stage_row, heads = st.columns([2, 3, 2], vertical_alignment="center")
    text, text_b = ctx.text, ctx.text_b
    padded = first.checkbox(
        "Padded batch",
        key="shapeflow_padded",
        persist_state="session",
        help=f"Trace a padded batch: this sentence and “{SHORT_SECOND}”.",
    )
    if padded and too_big_for_batch(run):
        padded = False
    texts = (text, SHORT_SECOND) if padded else (text,)
    trace = get_trace(ctx.source, texts, "" if padded else text_b, ctx.layer, ctx.head)
    step = st.session_state.get("shapeflow_step", SHAPEFLOW_DEFAULT_STEP)
    if step not in trace.names:
        step = SHAPEFLOW_DEFAULT_STEP
    tokens = run.tokens if not padded else get_batch(ctx.source, texts).tokens[0]
    fs, width = BOX_PX[present], column_px(present, SPEC[present], 0)
    height = figure_height() if present else FLOW_PX
    stages = flow_stages(trace, fs, width, height)
    stage, step = current_stage(stages, step, present)
    with stage_row:
        stage_controls(stages, stage)
    with heads:
        head_control(ctx.model.n_heads, ctx.head)
    head = ctx.head
    with slot or st.container():
        left, right = st.columns(SPEC[present])
        with left:
            figure = shape_flow(trace, step, fs, width, height, stage, head)
            show(figure, "shape-flow", key="shapeflow_chart", on_select=pick_step, selection_mode="points")
        with right:
            panel(trace, step, head, tokens, present, height, run.encoded.byte_level)
    # a click on a box puts its tensor above the map: the page must not scroll to keep what was in sight in
    # place (the browser's scroll anchoring), which pushed the diagram and the new tensor off the screen's top
    st.html('<style>[data-testid="stMain"] { overflow-anchor: none; }</style>')
    st.caption(
        "Click a box to show its tensor beside the diagram for the chosen head; hover a box for its code and "
        "file. " + ("Keys ← / → step through the stages." if present else "")
    )


def current_stage(stages: list[list[str]], step: str, present: bool) -> tuple[int, str]:
    """The stage shown (0-based) and its step shown. The stage chosen with the stage buttons or the link
    (``shapeflow_stage``, 1-based) where it is one; else, after a click on a box (``HOLDING``) or on an
    ordinary page, the one holding ``step``; a presentation opens on the first. A step outside the stage gives
    way to the stage's first, so the tensor beside the diagram is always one of the boxes in sight. Both are
    kept for the link."""
    chosen = st.session_state.get("shapeflow_stage")
    if isinstance(chosen, int) and chosen >= 1:
        stage = min(chosen, len(stages)) - 1
    elif chosen is None and present and step == SHAPEFLOW_DEFAULT_STEP:
        stage = 0
    else:
        stage = next((i for i, names in enumerate(stages) if step in names), 0)
    if step not in stages[stage]:
        step = stages[stage][0]
    st.session_state.shapeflow_stage, st.session_state.shapeflow_step = stage + 1, step
    return stage, step


def stage_controls(stages: list[list[str]], stage: int) -> None:
    """Buttons to the previous and next stage (keys ← and →, which the buttons show beside their words), and
    which stage this is; nothing when the whole layer fits at once. No wrapping: ← stops at the first stage,
    → at the last."""
    if len(stages) == 1:
        return
    back, where, ahead = st.columns([1, 1.2, 1], vertical_alignment="center")
    n = len(stages)
    previous, following = max(stage - 1, 0), min(stage + 1, n - 1)
    back.button(
        "Back",
        key="shapeflow_prev_stage",
        on_click=go_to,
        args=(previous, stages[previous][0]),
        shortcut="Left",
        disabled=stage == 0,
    )
    where.markdown(f"**Stage {stage + 1} of {n}**")
    ahead.button(
        "Next",
        key="shapeflow_next_stage",
        on_click=go_to,
        args=(following, stages[following][0]),
        shortcut="Right",
        disabled=stage == n - 1,
    )


def go_to(stage: int, step: str) -> None:
    """Show stage ``stage`` (0-based) and, beside it, the tensor of its step ``step``."""
    st.session_state.shapeflow_stage, st.session_state.shapeflow_step = stage + 1, step


def head_control(n_heads: int, head: int) -> None:
    """The head whose tensors and map are shown (`head`): the same head as the sidebar's and the keys'."""
    st.session_state.shapeflow_head = head
    st.selectbox(
        "Head",
        range(n_heads),
        key="shapeflow_head",
        format_func=lambda h: f"Head {h}",
        label_visibility="collapsed",
        on_change=lambda: select(head=st.session_state.shapeflow_head),
    )


def panel(trace, step: str, head: int, tokens: list[str], present: bool, height: int, byte_level: bool) -> None:
    """Beside the diagram: the selected step's tensor for ``head`` above the head's attention map (the map
    once, when the step is the map itself), the two ``height`` px tall together; then the step's code and
    its whole path. Tokens are labelled as text, half a character of a ``byte_level`` tokenizer's as bytes."""
    width, left = column_px(present, SPEC[present], 1), height
    if step not in MAP_STEPS:
        fig = step_tensor(trace, step, head, tokens, BOX_PX[present], width, present, height, byte_level)
        show(fig, f"tensor-{step}")
        left = height // 2 if present else height - fig.layout.height - GAP_PX
    show(
        clickable_cells(head_map(trace, head, tokens, present, width, left, byte_level)),
        f"layer{trace.layer}-head{head}",
        key="shapeflow_map",
        on_select=pick_map,
        selection_mode="points",
    )
    chosen = trace.step(step)
    st.code(chosen.code, language="python", wrap_lines=True)
    st.caption(plain(f"{chosen.where} · {chosen.op}"))


def step_tensor(
    trace, step: str, head: int, tokens: list[str], fs: int, width: int, present: bool, height: int, byte_level: bool
):
    """The selected step's tensor for ``head``: half the panel's ``height`` in a show, else ``TENSOR_SHARE``."""
    matrix, rows, cols = head_matrix(trace, step, head)
    return tensor_heatmap(
        matrix,
        axis_labels(rows, tokens, matrix.shape[0]),
        axis_labels(cols, tokens, matrix.shape[1]),
        title=f"{trace.step(step).title}, head {head}",
        font_size=fs,
        kind="probs" if step == "mask" else "values",
        width=width,
        height=height // 2 if present else int(height * TENSOR_SHARE),
        min_label=MIN_PRESENT_LABEL_PX if present else None,
        byte_level=byte_level,
    )


def head_map(trace, head: int, tokens: list[str], present: bool, width: int, height: int, byte_level: bool):
    """The head's attention map, ``width`` × at most ``height`` px. On an ordinary page its labels are of
    ``MAP_PX`` px, every token's while the cells are as tall as a label, and its colour bar goes under the
    cells where they come out larger so (a narrow column), else beside them (a short one, under a tensor)."""
    probs, _, _ = head_matrix(trace, "probs", head)
    fs = MAP_PX[present]
    title = f"Layer {trace.layer}, head {head}: softmax"
    fig = viz.head_heatmap(
        probs, tokens, title=title, font_size=fs, width=width, height=height, min_label=fs, byte_level=byte_level
    )
    if present:
        return fig
    under = bar_under(go.Figure(fig), tokens, tokens, fs, width=width, height=height, min_label=fs)
    return under if cell_px(under) > cell_px(fig) else fig


def pick_step() -> None:
    """The diagram's click: show the tensor of the step clicked, in the stage that holds it."""
    for point in st.session_state.shapeflow_chart.selection.get("points", []):
        data = point.get("customdata")
        if data:
            st.session_state.shapeflow_step = data[0] if isinstance(data, (list, tuple)) else data
            st.session_state.shapeflow_stage = HOLDING
            return


def pick_map() -> None:
    """A click on the head's map selects its step in the diagram: the softmax."""
    if st.session_state.shapeflow_map.selection.get("points"):
        st.session_state.shapeflow_step = "probs"
        st.session_state.shapeflow_stage = HOLDING
