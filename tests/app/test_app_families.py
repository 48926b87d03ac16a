"""Every family through every view of the app (AppTest): a tiny checkpoint of each opened by its link, its head map
the model's own (a stochastic matrix over its tokens, a lower triangle for a decoder, gpt-oss's sink column), each
view and coreference mode drawn with no error. tests/browser/test_browser_families*.py draw a few of them in
Chromium: what the browser adds, the figure drawn, is the same for every family but for the extra column and view."""

from __future__ import annotations

import json

import numpy as np
import pytest
from families import DECODERS, FAMILIES, MORE_CONFIGS, corners, make_family, make_more, make_seq2seq
from test_app import SENTENCE, decode, figures, head_figure, no_errors, start, titles


@pytest.mark.parametrize("family", corners(FAMILIES + DECODERS))
def test_every_view_draws_for_the_family(tmp_path, family):
    folder = make_family(tmp_path / family, family)
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2")
    no_errors(at)
    assert any(f"— {family}" in c.value for c in at.sidebar.caption)
    head_map_is_the_models(at, folder)
    every_view_draws(at)
    first = "qkv_proj" if family == "gpt2" else "q_proj"  # the projection's stage, then the softmax's
    flow = json.dumps(figures(start(model=str(folder), s=SENTENCE, view="flow", layer="1", head="2", step=first)))
    assert ("fused QKV projection" in flow) == (family == "gpt2")
    assert "Q projection" in flow or family == "gpt2"
    assert "softmax" in json.dumps(figures(start(model=str(folder), s=SENTENCE, view="flow", layer="1", head="2")))


@pytest.mark.parametrize("family", corners(MORE_CONFIGS))
def test_every_view_draws_for_the_families_added_later(tmp_path, family):
    folder = make_more(tmp_path / family, family)
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2")
    no_errors(at)
    assert any(f"— {family}" in c.value for c in at.sidebar.caption)
    head_map_is_the_models(at, folder)
    every_view_draws(at)


def test_the_deberta_terms_view_draws_three_terms_and_their_total_and_names_other_models(tmp_path):
    folder = make_more(tmp_path / "deberta-v2", "deberta-v2")
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2", view="disentangled")
    no_errors(at)
    words = [" ".join(titles(fig)) for fig in figures(at)]  # decoded: the JSON may write "→" as \u2192
    assert any("position → content" in text and "total score" in text for text in words)
    assert "DeBERTa terms" in at.segmented_control(key="view").options
    other = start(s=SENTENCE, view="disentangled")  # the bundled BERT: not offered, and the link's view says why
    no_errors(other)
    assert any("DeBERTa terms needs a DeBERTa-v2 or -v3 checkpoint" in info.value for info in other.info)
    assert other.session_state.view == "Head" and "DeBERTa terms" not in other.segmented_control(key="view").options


def test_an_encoder_decoder_loads_and_its_views_read_its_encoder(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    at = start(model=str(folder), s=SENTENCE)
    no_errors(at)
    assert any("— bart encoder-decoder, its encoder's" in c.value for c in at.sidebar.caption)
    assert at.get("plotly_chart")


def head_map_is_the_models(at, folder) -> None:
    """Layer 1, head 2 of the page: one row and key per token, each row summing to 1; a decoder's a lower triangle
    (and the page says it is causal); gpt-oss's one more column, each row's share that went to its sink, the rest
    our run's map."""
    from attention import encode, load_model
    from attention.runs.run import run_sentence

    model, tokenizer = load_model(folder)
    tokens = encode(tokenizer, SENTENCE).tokens
    z = np.asarray(decode(head_figure(at)["data"][0]["z"]), dtype=float)
    sinks = model.layers[1].attention.sink is not None
    assert z.shape == (len(tokens), len(tokens) + sinks)
    np.testing.assert_allclose(z.sum(1), 1, atol=1e-4)
    if sinks:
        np.testing.assert_allclose(z[:, :-1], run_sentence(model, tokenizer, SENTENCE).attentions[1, 2], atol=1e-4)
        assert z[:, -1].min() > 1e-3
        z = z[:, :-1]
    if model.config.attention.causal:  # each token sees only itself and the tokens before it
        assert np.all(np.triu(z, 1) == 0) and any("(causal)" in c.value for c in at.sidebar.caption)
    else:
        assert np.triu(z, 1).sum() > 0.1


def every_view_draws(at) -> None:
    """Each view in turn, and each coreference mode, draws a figure and shows no error."""
    for view in at.segmented_control(key="view").options:
        at.segmented_control(key="view").set_value(view).run()
        no_errors(at)
        assert at.get("plotly_chart"), view
        if view == "Coreference":
            for mode in at.segmented_control(key="coref_mode").options:
                at.segmented_control(key="coref_mode").set_value(mode).run()
                no_errors(at)
