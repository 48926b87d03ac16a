"""Every token labelled where the figure can grow to hold it (AppTest): a mid-length sentence's head map goes
across the page rather than thin its labels beside the panel; upright column labels stand a label's box apart
as rows do; the Cross-attention view spends the presentation screen's width on the source's columns, colours
its every-layer grid from 0 to 1 and heads the lines' two columns."""

from __future__ import annotations

import json

import numpy as np
import pytest
from families import make_seq2seq
from test_app import SENTENCE, head_figure, no_errors, start
from test_app_seq2seq import figure

from ui.page.layout import PAGE_PX
from ui.page.present import MIN_PRESENT_LABEL_PX
from viz._text import readable_all
from viz.cross import part_grid
from viz.heatmap import MIN_TICK_PX

# bundled BERT: 26, 27 and 28 tokens with [CLS] and [SEP]
MID = [
    "The animal didn't cross the street because it was too tired, so it lay down under a tree to rest.",
    "The animal didn't cross the busy street because it was too tired, so it lay down under a tree to rest.",
    "The animal didn't cross the busy street because it was too tired, so it lay down under a big tree to rest.",
]
LEGIBLE_PX = 12  # the smallest label of an ordinary page's map, as a 34-token sentence has had it
# 18 tokens: the most a presentation's head map labels at 1280 × 720, upright, a label's box apart
PRESENT_ALL = "The animal didn't cross the busy street because it was far too tired."


def ticks(fig: dict, axis: str) -> tuple[list[str], int]:
    layout = fig["layout"][axis]
    return layout["ticktext"], layout["tickfont"]["size"]


def plot_px(fig: dict) -> tuple[float, float]:
    """The cells' width and height: the plot area less the slack right of the cells."""
    layout, margin = fig["layout"], fig["layout"]["margin"]
    n_q, n_k = len(fig["data"][0]["y"]), len(fig["data"][0]["x"])
    return (layout["width"] - margin["l"] - margin["r"] - 16) / n_k, (
        layout["height"] - margin["t"] - margin["b"]
    ) / n_q


@pytest.mark.parametrize("sentence", MID, ids=lambda s: f"{len(s.split())}words")
def test_a_mid_length_sentences_head_map_labels_every_token_across_the_page(sentence):
    at = start(s=sentence, view="head")
    no_errors(at)
    fig = head_figure(at)
    tokens = [t.rsplit("·", 1)[0] for t in fig["data"][0]["x"]]
    assert 26 <= len(tokens) <= 28
    for axis in ("xaxis", "yaxis"):
        labels, size = ticks(fig, axis)
        assert labels == tokens, axis  # "it" and every other token named
        assert size >= LEGIBLE_PX, axis
    width, height = plot_px(fig)
    assert min(width, height) >= MIN_TICK_PX  # each label its own room
    assert fig["layout"]["width"] <= PAGE_PX - 300 - 2 * 5 * 16  # within the main column beside the sidebar


# bundled BERT: 7, 15 and 26 tokens with [CLS] and [SEP]
GROWING = ["The animal was tired.", "The animal didn't cross the street because it was too tired.", MID[0]]


@pytest.mark.parametrize("present", ["", "1"], ids=["page", "present"])
def test_a_shorter_sentences_head_map_is_never_smaller(present):
    """At 1280 × 800 a 15-token map had 15 px cells, drawn beside a column of checkboxes, and 26 tokens, drawn
    across the page, 21 px: the map now takes the page's width and the first screen's height, whatever its length,
    and its controls go beside it only where it leaves them room (in a presentation)."""
    cells, beside = [], []
    for sentence in GROWING:
        at = start(s=sentence, view="head", present=present)
        no_errors(at)
        cells.append(min(plot_px(head_figure(at))))
        beside.append(any(c.get("plotly_chart") for c in at.columns))  # the map in a column, its panel the other
    assert cells == sorted(cells, reverse=True), cells
    assert present or cells[1] >= 28, cells  # 15 tokens: the 28 px a token a map grows by up to 900 px
    assert beside == [bool(present)] * 3, beside  # a presentation's square map leaves room for the panel


def test_upright_column_labels_stand_a_label_apart_as_the_rows_do_in_a_presentation():
    at = start(s=PRESENT_ALL, view="head", present="1")
    no_errors(at)
    fig = head_figure(at)
    tokens = [t.rsplit("·", 1)[0] for t in fig["data"][0]["x"]]
    assert len(tokens) == 18
    for axis in ("xaxis", "yaxis"):
        labels, size = ticks(fig, axis)
        assert labels == tokens, axis
        assert size >= MIN_PRESENT_LABEL_PX, axis
    assert fig["layout"]["height"] <= 720 - 100 - 12  # the first screen's budget (ui/page/present.py)


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    return str(make_seq2seq(tmp_path_factory.mktemp("bart"), "bart"))


def test_a_presentations_cross_attention_map_takes_the_screens_width_for_the_source(bart):
    at = start(model=bart, s=SENTENCE, view="cross", present="1")  # 28 source tokens, 41 written
    no_errors(at)
    fig = figure(at, "Cross-attention, L0 H0")
    sources = [t.rsplit("·", 1)[0] for t in fig["data"][0]["x"]]
    assert len(sources) == 28
    labels, size = ticks(fig, "xaxis")
    assert labels == readable_all(sources) and size >= MIN_PRESENT_LABEL_PX  # every source token, as text, legible
    width, height = plot_px(fig)
    assert width >= MIN_PRESENT_LABEL_PX * 1.2 > height  # the columns wider than the height-bound rows
    assert 0.8 * (PAGE_PX - 2 * 5 * 22) <= fig["layout"]["width"] <= PAGE_PX - 2 * 5 * 22  # across the screen
    assert fig["layout"]["height"] <= 720 - 100 - 12


def test_the_every_layer_grid_colours_from_0_to_1_so_spread_attention_is_pale():
    maps = np.full((2, 3, 5, 28), 1 / 28, dtype=np.float32)  # every decoder token reading the source evenly
    heatmap = part_grid(maps).data[0]
    assert (heatmap.zmin, heatmap.zmax) == (0.0, 1.0)


def test_the_cross_lines_name_the_decoder_and_the_encoder_over_their_columns(bart):
    at = start(model=bart, s="The cat sat.", view="cross")
    no_errors(at)
    lines = next(
        spec
        for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
        if any(t.get("mode") == "markers+text" for t in spec["data"])
    )
    said = [(a["text"], a["x"]) for a in lines["layout"]["annotations"]]
    assert said[:2] == [("<b>decoder (target)</b>", 0.0), ("<b>encoder (source)</b>", 1.0)]
    assert lines["layout"]["margin"]["t"] >= 14 * 1.8  # a row of their own above the lines
