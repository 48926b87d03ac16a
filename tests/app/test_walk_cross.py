"""The guided walk on an encoder-decoder (AppTest, tiny BART): one more step, before the last, draws the
decoder's cross-attention over the encoder's output, as the model computes it; any other model's walk is
unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from families import make_seq2seq
from test_app import SENTENCE, decode, no_errors, start
from test_app_seq2seq import written
from test_walk import step_title

from attention import load_model
from attention.tracing.trace import trace_layer
from ui.page.present import figure_height
from ui.views.walk import CROSS, HEADING_PX, steps_of


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    folder = make_seq2seq(tmp_path_factory.mktemp("bart"), "bart")  # encoder 4 heads, decoder 2
    model, tokenizer = load_model(str(folder))
    return folder, written(model, tokenizer)


def heatmap_specs(at) -> list[dict]:
    specs = (json.loads(chart.proto.spec) for chart in at.get("plotly_chart"))
    return [spec for spec in specs if spec["data"][0].get("type") == "heatmap"]


def heatmaps(at) -> list[np.ndarray]:
    return [
        decode(s["data"][0]["z"]).reshape(len(s["data"][0]["y"]), len(s["data"][0]["x"])) for s in heatmap_specs(at)
    ]


def test_the_cross_step_comes_before_the_last_and_only_for_an_encoder_decoder(minilm):
    model, tokenizer = minilm
    enc = tokenizer(SENTENCE, return_tensors="pt")
    trace = trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=0)
    plain, cross = ([s.title for s in steps_of(trace, False, cross=c)] for c in (False, True))
    assert cross == [*plain[:-1], CROSS, plain[-1]]


def test_the_walk_has_one_more_step_on_bart_than_on_bert(bart):
    folder, _ = bart
    at = start(view="walk", walk="99")  # the bundled BERT
    no_errors(at)
    assert "Step 11 of 11" in step_title(at)
    at = start(model=str(folder), s=SENTENCE, view="walk", walk="99")
    no_errors(at)
    assert "Step 12 of 12: What one head learned" in step_title(at)
    next(b for b in at.button if b.key == "walk_prev").click().run()
    assert f"Step 11 of 12: {CROSS}" in step_title(at)
    next(b for b in at.button if b.key == "walk_prev").click().run()
    assert "Step 10 of 12: Output projection" in step_title(at)


def test_the_cross_step_draws_the_models_cross_attention_and_names_both_lengths(bart):
    folder, out = bart
    T, S = len(out.tokens), len(out.encoder_tokens)
    at = start(model=str(folder), s=SENTENCE, view="walk", walk="10", layer="1", head="1")
    no_errors(at)
    assert CROSS in step_title(at)
    (z,) = heatmaps(at)
    expected = out.cross_attentions[1][0, 1].numpy()
    assert z.shape == expected.shape == (T, S) and T != S
    np.testing.assert_allclose(z, expected, atol=1e-6)
    said = " ".join(c.value for c in at.caption)
    assert f"L_Q = {T} decoder tokens" in said and f"L_K = {S} encoder tokens" in said
    assert f"L_Q × L_K = {T} × {S}" in said


def test_in_presentation_the_cross_map_fits_the_first_screen_at_the_decoders_last_head(bart):
    folder, out = bart
    at = start(model=str(folder), s=SENTENCE, present="1", view="walk", walk="10", layer="1", head="3")
    no_errors(at)
    (spec,) = heatmap_specs(at)
    assert spec["layout"]["height"] <= figure_height(HEADING_PX)
    (z,) = heatmaps(at)
    np.testing.assert_allclose(z, out.cross_attentions[1][0, 1].numpy(), atol=1e-6)  # head 3 → the decoder's 1
    assert any("decoder layer 1, head 1" in c.value for c in at.caption)
