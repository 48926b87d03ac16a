"""Presentation mode's fit to the first screen of a 1280 × 720 window, in the figures themselves: every row
of a 16-token sentence labelled where the rows are as tall as the labels, a title that names the layer, the
head and the sentence (it goes with the PNG the camera icon saves), and query·key opening on the pronoun."""

from __future__ import annotations

import json

import numpy as np
from test_app import SENTENCE, head_figure, no_errors, start

from ui.page.present import MIN_PRESENT_LABEL_PX, figure_height
from viz._style import TITLE_GLYPH
from viz.heatmap import head_heatmap
from viz.shapeflow import tensor_heatmap

TOKENS = [
    "[CLS]",
    "the",
    "animal",
    "didn",
    "'",
    "t",
    "cross",
    "the",
    "street",
    "because",
    "it",
    "was",
    "too",
    "tired",
    ".",
    "[SEP]",
]
WALK_BUDGET = figure_height(56)  # the walk's figure under its one-line step heading (ui/views/walk.py)


def test_a_walk_tensor_of_16_tokens_labels_every_row_as_the_head_view_does():
    probs = np.full((16, 16), 1 / 16)
    fig = tensor_heatmap(
        probs,
        TOKENS,
        TOKENS,
        title="softmax [1 × 12 × 16 × 16], head 3",
        font_size=22,
        kind="probs",
        width=1024,
        height=WALK_BUDGET,
        min_label=MIN_PRESENT_LABEL_PX,
    )
    assert fig.layout.height <= WALK_BUDGET
    rows_px = (fig.layout.height - fig.layout.margin.t - fig.layout.margin.b) / 16
    assert MIN_PRESENT_LABEL_PX <= rows_px < 26  # about 24 px: rows as tall as an 18 px label and a little more
    assert list(fig.layout.yaxis.ticktext) == TOKENS
    assert fig.layout.yaxis.tickfont.size >= MIN_PRESENT_LABEL_PX
    head = head_heatmap(probs, TOKENS, font_size=22, width=1040, height=WALK_BUDGET, min_label=MIN_PRESENT_LABEL_PX)
    assert len(head.layout.yaxis.tickvals) == 16


def test_rows_shorter_than_the_label_are_still_thinned():
    fig = tensor_heatmap(
        np.zeros((40, 8)),
        [f"w{i}" for i in range(40)],
        font_size=22,
        width=600,
        height=WALK_BUDGET,
        min_label=MIN_PRESENT_LABEL_PX,
    )
    assert 1 < len(fig.layout.yaxis.tickvals) < 40
    assert fig.layout.yaxis.tickfont.size >= MIN_PRESENT_LABEL_PX


def compact_title(fig: dict) -> str:
    title = fig["layout"]["title"]
    assert title["text"].startswith("L2 H3 · The animal"), title
    drawn = len(title["text"]) * title["font"]["size"] * TITLE_GLYPH
    assert drawn <= (fig["layout"].get("width") or 1040), title  # one line within the figure
    return title["text"]


def test_presentation_figures_carry_the_layer_head_and_sentence_for_their_png():
    at = start(present="1", view="head", layer="2", head="3", s=SENTENCE)
    no_errors(at)
    fig = head_figure(at)
    assert fig["layout"]["height"] <= figure_height()
    text = compact_title(fig)
    assert text == "L2 H3 · " + SENTENCE or text.endswith("…")
    lines = start(present="1", view="head", layer="2", head="3", draw="lines", s=SENTENCE)
    no_errors(lines)
    figs = [json.loads(c.proto.spec) for c in lines.get("plotly_chart")]
    compact_title(next(f for f in figs if f["layout"].get("height", 0) > 200))
    plain = start(view="head", layer="2", head="3", s=SENTENCE)  # outside a presentation: as before
    assert '"Layer 2, head 3"' in "".join(c.proto.spec for c in plain.get("plotly_chart"))


def test_query_key_opens_on_the_examples_pronoun_unless_the_link_names_a_query():
    at = start(view="qk", s=SENTENCE)
    no_errors(at)
    assert at.selectbox(key="qk_query").value == TOKENS.index("it")
    assert start(view="qk", s=SENTENCE, query="3").selectbox(key="qk_query").value == 3
    assert start(view="qk", s="A sentence of no example where it stays.").selectbox(key="qk_query").value == 0
