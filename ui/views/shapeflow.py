"""The Shape flow view: the diagram of one attention layer's steps with the real shapes of this
sentence's tensors, and the tensor of the step clicked, for the chosen head."""

from __future__ import annotations

import streamlit as st

from attention.trace import head_matrix
from viz.shapeflow import min_width, shape_flow, tensor_fits, tensor_heatmap

from ..layout import column_px, main_px, slots
from ..page import axis_labels, figure_slot, font_size, show, too_big_for_batch
from ..present import MIN_PRESENT_LABEL_PX, figure_height
from ..runs import get_batch, get_trace
from ..state import SHAPEFLOW_DEFAULT_STEP, SHORT_SECOND

# Presentation: the diagram is taller than the screen and the tensor is drawn above it, so a click on a
# box far down scrolls the page back to the tensor it chose (the click's count makes each script new).
SCROLL_TO_TENSOR = """<script>
setTimeout(() => document.querySelector('[data-testid="stPlotlyChart"]')
  ?.scrollIntoView({behavior: "smooth", block: "start"}), 300);
</script>"""


def draw(run) -> None:
    slot = figure_slot()
    text, text_b = st.session_state.submitted
    padded = st.checkbox(f"Trace a padded batch: this sentence and “{SHORT_SECOND}”", key="shapeflow_padded")
    if padded and too_big_for_batch(run):
        padded = False
    texts = (text, SHORT_SECOND) if padded else (text,)
    trace = get_trace(st.session_state.source, texts, "" if padded else text_b, st.session_state.layer)
    step = st.session_state.get("shapeflow_step", SHAPEFLOW_DEFAULT_STEP)
    if step not in trace.names:
        step = SHAPEFLOW_DEFAULT_STEP
    tokens = run.tokens if not padded else get_batch(st.session_state.source, texts).tokens[0]
    fs, spec = font_size(), [3, 2]
    head = st.session_state.head
    matrix, rows, cols = head_matrix(trace, step, head)
    kind = "probs" if step in ("probs", "mask") else "values"

    def tensor(width: int, height: int | None = None):
        fig = tensor_heatmap(
            matrix,
            axis_labels(rows, tokens, matrix.shape[0]),
            axis_labels(cols, tokens, matrix.shape[1]),
            title=f"{trace.step(step).title}, head {head}",
            font_size=fs,
            kind=kind,
            width=width,
            height=height,
            min_label=MIN_PRESENT_LABEL_PX if height else None,
        )
        show(fig, f"tensor-{step}")

    if slot is not None:  # presentation: the diagram is taller than a screen, so the tensor comes first
        with slot:
            tensor(main_px(), figure_height())
        show(
            shape_flow(trace, selected=step, font_size=fs, width=main_px()),
            "shape-flow",
            key="shapeflow_chart",
            on_select=pick_step,
            selection_mode="points",
        )
        st.caption("Click a box of the diagram to show its tensor, above, for the selected head.")
        if clicks := st.session_state.pop("shapeflow_clicked", 0):  # back up to the tensor just chosen
            st.html(f"<!-- click {clicks} -->" + SCROLL_TO_TENSOR, unsafe_allow_javascript=True)
        return
    beside = column_px(spec, 0) >= min_width(fs) and tensor_fits(tokens, fs, column_px(spec, 1))
    if not beside:
        st.caption(
            f"At {len(tokens)} tokens the "
            "diagram and the tensor do not fit side by side: the tensor is drawn under the diagram."
        )
    left, right = st.columns(spec) if beside else slots(False)
    with left:
        show(
            shape_flow(trace, selected=step, font_size=fs, width=column_px(spec, 0) if beside else main_px()),
            "shape-flow",
            key="shapeflow_chart",
            on_select=pick_step,
            selection_mode="points",
        )
    with right:
        tensor(column_px(spec, 1) if beside else main_px())
        st.caption("Click a box of the diagram to show its tensor for the selected head.")


def pick_step() -> None:
    """The diagram's click: show the tensor of the step clicked."""
    for point in st.session_state.shapeflow_chart.selection.get("points", []):
        data = point.get("customdata")
        if data:
            st.session_state.shapeflow_step = data[0] if isinstance(data, (list, tuple)) else data
            st.session_state.shapeflow_clicked = st.session_state.get("shapeflow_clicks", 0) + 1
            st.session_state.shapeflow_clicks = st.session_state.shapeflow_clicked
            return
