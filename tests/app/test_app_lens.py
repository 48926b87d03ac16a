"""The Logit lens view (AppTest): every layer × position of a causal model through its final norm and LM head, the
last layer's the model's own next-token probabilities, the commit layer marked; an encoder is offered the bundled
writer; a text past the lens's cap is one message before any work."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import make_family
from test_app import SENTENCE, decode, figures, no_errors, start

from attention import load_model
from attention.writing.generate import lm_head


def lens_figure(at) -> dict:
    found = [f for f in figures(at) if ((f["layout"].get("title") or {}).get("text") or "").startswith("Logit lens")]
    assert len(found) == 1, [(f["layout"].get("title") or {}).get("text") for f in figures(at)]
    return found[0]


def test_each_layer_read_through_the_head_the_last_the_models_own(tmp_path):
    folder = make_family(tmp_path / "llama", "llama")
    at = start(model=str(folder), s=SENTENCE, view="lens")
    no_errors(at)
    fig = lens_figure(at)
    grid, marks = fig["data"][0], fig["data"][1]
    model, tokenizer = load_model(folder)
    ids = tokenizer(SENTENCE, return_tensors="pt").input_ids
    with torch.inference_mode():
        last = model(ids).last_hidden_state[0]  # (L, D), after the final norm
        probs = torch.softmax(lm_head(model)(last), dim=-1)  # (L, V)
    z = decode(grid["z"])
    assert z.shape == (model.config.num_hidden_layers, ids.size(1))
    np.testing.assert_allclose(z[-1], probs.max(-1).values.numpy(), atol=1e-6)  # the last layer: the model's own
    assert "1. " in grid["hovertext"][0][0] and "5. " in grid["hovertext"][0][0]
    assert marks["name"] == "where the model commits" and len(marks["x"]) == ids.size(1)
    assert any("commits" in c.value for c in at.caption)
    from test_app_report import fact, report

    page = report(at)  # the report holds the grid and a link that reopens it
    assert "view=lens" in fact(page, "Link") and fact(page, "View") == "Logit lens" and "<figure" in page


def test_presentation_mode_draws_it_to_the_first_screen(tmp_path):
    from ui.page.page import figure_height

    folder = make_family(tmp_path / "llama", "llama")
    at = start(model=str(folder), s=SENTENCE, view="lens", present="1")
    no_errors(at)
    assert lens_figure(at)["layout"]["height"] <= figure_height()


def test_an_encoder_is_offered_the_bundled_writer():
    at = start(s=SENTENCE, view="lens")
    no_errors(at)
    assert any("Logit lens needs a causal decoder" in i.value for i in at.info)
    assert any(b.key == "offer_writer_button" for b in at.button)


def test_a_text_past_the_cap_is_one_message_and_no_work(tmp_path, monkeypatch):
    import ui.compute.generation as generation
    import ui.views.lens as view

    folder = make_family(tmp_path / "llama", "llama")
    monkeypatch.setattr(view, "LENS_MAX_TOKENS", 4)
    monkeypatch.setattr(generation, "logit_lens", lambda *a, **k: pytest.fail("the lens ran past its cap"))
    at = start(model=str(folder), s=SENTENCE, view="lens")
    no_errors(at)
    assert any("offered up to 4 tokens" in i.value for i in at.info)
    assert not [f for f in figures(at) if (f["layout"].get("title") or {}).get("text") == "Logit lens"]


def test_a_deep_models_lens_draws_every_few_layers_and_the_choice_and_a_link_change_them(tmp_path):
    """30 layers do not fit the page's 500 px readably: every 2nd is drawn by default (the last among them); the
    choice under the figure draws every layer, and a link's `every` and `layers` draw a range."""
    folder = make_family(tmp_path / "llama", "llama", num_hidden_layers=30)
    at = start(model=str(folder), s=SENTENCE, view="lens")
    no_errors(at)
    rows = lens_figure(at)["data"][0]["y"]
    assert rows == [f"layer {i}" for i in range(1, 30, 2)]
    at.select_slider(key="lens_every").set_value(1).run()
    no_errors(at)
    assert lens_figure(at)["data"][0]["y"] == [f"layer {i}" for i in range(30)]
    assert at.query_params["every"] == "1"  # the link keeps the choice
    at = start(model=str(folder), s=SENTENCE, view="lens", every="3", layers="10-20")
    no_errors(at)
    assert lens_figure(at)["data"][0]["y"] == ["layer 11", "layer 14", "layer 17", "layer 20"]
    at = start(model=str(folder), s=SENTENCE, view="lens", layers="20-10")  # a bad range: a notice, all drawn
    no_errors(at)
    assert len(lens_figure(at)["data"][0]["y"]) == 15
    assert any("The link's layers is its first past its last" in box.value for box in at.info), [
        i.value for i in at.info
    ]
