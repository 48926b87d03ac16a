"""The shape-flow diagram: one attention layer's steps for this input, drawn from its Trace.

Every box's words (its operation, symbolic shape and real sizes) and its hover (the operation in words,
the code and its whole ``path:lineno``) are read from the recorded forward pass. The diagram is laid out
for the screen: given a height, its rows are cut into stages that each fit it (``flow_stages``), and one
stage is drawn at a time. Coordinates are pixels at the figure's width, y down.
"""

from __future__ import annotations

import plotly.graph_objects as go

from viz._style import base_layout
from viz.flow_arrows import connections
from viz.flow_boxes import LINE, box_shape, box_text, hit_areas, legend
from viz.flow_layout import lane_centres, place, rows_of, stages
from viz.tensor_map import fitted_title, tensor_fits, tensor_heatmap, tensor_margins

__all__ = [
    "cross_attention_flow",
    "design_width",
    "fitted_title",
    "flow_stages",
    "min_width",
    "shape_flow",
    "tensor_fits",
    "tensor_heatmap",
    "tensor_margins",
]

WIDTH = 720  # widest layout in px at font size 14, scaled with the font; narrower when less room is given
MIN_LANE_CHARS = 11  # a lane's box holds at least this many bold characters a line ("[B, H, L, d]")


def shape_flow(
    trace,
    selected: str | None = None,
    font_size: int = 14,
    width: int | None = None,
    height: int | None = None,
    stage: int | None = None,
    head: int | None = None,
) -> go.Figure:
    """One layer's attention as boxes, top to bottom; click a box to select its step.

    ``width`` (px) is the most the figure may take (``WIDTH`` scaled with ``font_size`` at most). With
    ``height``, the rows are cut into stages no taller than it and stage ``stage`` is drawn (by default
    the one holding ``selected``); without, every row is. Each box has one invisible bar exactly covering
    it, with ``customdata=[step name]``, so a click anywhere in the box selects that step; ``selected`` is
    outlined in the highlight colour. ``head`` is named in the legend and hovers: the head whose tensors
    the page shows.
    """
    fs = font_size
    width = min(design_width(fs), width or design_width(fs))
    cut, texts, top = _stages(trace, fs, width, height, head)
    if stage is None:
        stage = next((i for i, rows in enumerate(cut) if any(b.name == selected for r in rows for b in r)), 0)
    stage = min(max(stage, 0), len(cut) - 1)
    words = f"<b>stage {stage + 1} of {len(cut)}</b>" if len(cut) > 1 else ""
    note, lines = legend(trace, width - fs, fs, head, words)
    bottom = place(cut[stage], {n: t.height for n, t in texts.items()}, fs * (0.6 + LINE * lines) + fs, fs)
    boxes = {b.name: b for row in cut[stage] for b in row}
    shapes = [box_shape(b, trace.step(n), n == selected, fs) for n, b in boxes.items()]
    annotations = [note] + [texts[n].annotation(b) for n, b in boxes.items()]
    flow_lines, arrows = connections(boxes, trace.names, lane_centres(width, fs)[1], fs)
    total = bottom + fs
    layout = base_layout(fs)
    layout.update(
        width=width,
        height=int(total),
        margin=dict(l=0, r=0, t=0, b=0),
        showlegend=False,
        xaxis=dict(range=[0, width], visible=False, fixedrange=True),
        yaxis=dict(range=[total, 0], visible=False, fixedrange=True),
        plot_bgcolor="white",
        paper_bgcolor="white",
        dragmode=False,
        hovermode="closest",
        barmode="overlay",
        shapes=shapes + flow_lines,
        annotations=annotations + arrows,
        meta=dict(stages=len(cut), stage=stage),
    )
    return go.Figure(hit_areas(trace, boxes, head, fs), layout)


def flow_stages(trace, font_size: int = 14, width: int | None = None, height: int | None = None) -> list[list[str]]:
    """The names of the steps of each stage ``shape_flow`` draws at this size, in order."""
    fs = font_size
    width = min(design_width(fs), width or design_width(fs))
    cut, _, _ = _stages(trace, fs, width, height, None)
    return [[b.name for row in rows for b in row] for rows in cut]


def _stages(trace, fs: int, width: int, height: int | None, head: int | None):
    """The rows of boxes cut into stages that fit ``height`` under the legend, and each box's text."""
    rows = rows_of(trace.names, width, fs)
    texts = {b.name: box_text(trace.step(b.name), b.w, fs, trace.S) for row in rows for b in row}
    _, lines = legend(trace, width - fs, fs, head, "<b>stage 1 of 2</b>")  # the tallest legend
    top = fs * (0.6 + LINE * lines) + fs
    room = None if height is None else height - top - fs
    return stages(rows, {n: t.height for n, t in texts.items()}, room, fs), texts, top


def design_width(font_size: int) -> int:
    """The width the diagram takes when it has room: ``WIDTH`` scaled with the font."""
    return round(WIDTH * font_size / 14)


def min_width(font_size: int) -> int:
    """The narrowest width at which a lane's box still holds ``MIN_LANE_CHARS`` bold characters a line."""
    from viz.flow_boxes import BOLD_W, FILL, PAD
    from viz.flow_layout import GAP, OUTER

    fs = font_size
    lane = MIN_LANE_CHARS * BOLD_W * fs / FILL + 2 * PAD * fs
    return int(3 * lane + 2 * OUTER * fs + 2 * GAP * fs) + 1


def cross_attention_flow(
    model,
    input_ids,
    decoder_input_ids,
    layer: int = 0,
    attention_mask=None,
    decoder_attention_mask=None,
    **kwargs,
) -> go.Figure:
    """The shape flow of decoder layer ``layer``'s cross-attention in an encoder-decoder (our
    ``EncoderDecoder``): Q from the decoder's states, K and V from the encoder's output; ``kwargs`` go to
    ``shape_flow``. For a notebook; the page does not load encoder-decoders yet."""
    from attention.tracing.trace import trace_cross_attention  # here: `import viz` imports no torch

    trace = trace_cross_attention(model, input_ids, decoder_input_ids, layer, attention_mask, decoder_attention_mask)
    return shape_flow(trace, **kwargs)
