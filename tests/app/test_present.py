"""Presentation mode (?present=1): the buttons (and their keys) that step through heads, layers and
views, and the figures sized for the first screen of a 1280 × 720 window."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import numpy as np
from test_app import SENTENCE, heatmaps, no_errors, start

from ui.page.present import KEYS, PAGE_KEYS
from ui.page.registry import named
from viz.heatmap import head_heatmap


def press(at, name: str):
    at.button(key=f"present_{name}").click()
    return at.run()


def test_buttons_step_the_head_the_layer_and_the_view():
    at = start(present="1", view="head", layer="1", head="2", s=SENTENCE)
    no_errors(at)
    assert at.selectbox(key="layer").value == 1 and at.selectbox(key="head").value == 2
    press(at, "next_head")
    assert at.session_state.head == 3 and at.query_params["head"] == "3"
    press(at, "prev_head")
    press(at, "prev_head")
    assert at.session_state.head == 1 and at.query_params["head"] == "1"
    press(at, "next_layer")
    assert at.session_state.layer == 2 and at.query_params["layer"] == "2"
    press(at, "prev_layer")
    press(at, "prev_layer")
    assert at.session_state.layer == 0
    press(at, "prev_layer")  # wraps round
    assert at.session_state.layer == 5
    press(at, "next_view")
    assert at.session_state.view == named("overview").label and at.query_params["view"] == "overview"
    no_errors(at)


def test_every_button_names_its_key_and_the_walk_keeps_its_arrows():
    at = start(present="1", view="head", s=SENTENCE)
    shortcuts = {KEYS[name][1] for name in KEYS}
    assert len(shortcuts) == len(KEYS) and not shortcuts & {"Left", "Right"}
    for name in KEYS:
        assert at.button(key=f"present_{name}").proto.shortcut == KEYS[name][1].lower()


def test_the_key_table_names_the_shape_flows_stage_keys_and_they_step_its_stages():
    at = start(present="1", view="shapeflow", layer="2", s=SENTENCE)
    no_errors(at)
    [table] = [h.proto.body for h in at.get("html") if "present-keys" in h.proto.body]
    assert "<b>← / →</b> stage" in table
    ahead, back = at.button(key="shapeflow_next_stage"), at.button(key="shapeflow_prev_stage")
    assert (back.proto.shortcut, ahead.proto.shortcut) == ("left", "right")
    assert "shapeflow_prev_stage" in PAGE_KEYS["ArrowLeft"] and "shapeflow_next_stage" in PAGE_KEYS["ArrowRight"]
    first = at.session_state.shapeflow_stage if "shapeflow_stage" in at.session_state else None
    ahead.click().run()
    assert at.session_state.shapeflow_stage not in (None, first)
    head = start(present="1", view="head", s=SENTENCE)
    [table] = [h.proto.body for h in head.get("html") if "present-keys" in h.proto.body]
    assert "← / →" not in table  # the head view has no stages


def test_the_head_view_fits_the_first_screen_with_large_labels():
    at = start(present="1", view="head", s=SENTENCE)
    no_errors(at)
    fig = heatmaps(at)[0]
    assert fig["layout"]["height"] <= 720 - 100 and fig["layout"]["width"] >= 640
    assert fig["layout"]["xaxis"]["tickfont"]["size"] >= 18


def test_a_height_budget_thins_the_labels_rather_than_shrinking_them():
    tokens = [f"w{i}" for i in range(60)]
    fig = head_heatmap(np.full((60, 60), 1 / 60), tokens, font_size=22, width=1040, height=600, min_label=18)
    assert fig.layout.height <= 600
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.tickfont.size >= 18
        assert len(axis.tickvals) < 60
    plain = head_heatmap(np.full((60, 60), 1 / 60), tokens, font_size=14)
    assert plain.layout.height > 600  # no budget: as before


def test_the_link_to_this_head_is_shown_as_plain_text_and_follows_the_keys():
    text = "<b>bold</b> & [a](javascript:x) *it*"
    at = start(present="1", view="head", layer="1", head="2", s=text)
    no_errors(at)
    [link] = [c.value for c in at.code]
    query = parse_qs(urlsplit(link).query)
    assert query["layer"] == ["1"] and query["head"] == ["2"] and query["view"] == ["head"]
    assert query["s"] == [text] and query["present"] == ["1"]
    press(at, "next_head")
    [link] = [c.value for c in at.code]
    assert parse_qs(urlsplit(link).query)["head"] == ["3"]
    assert not [c for c in start(view="head", s=text).code]  # only in presentation mode
