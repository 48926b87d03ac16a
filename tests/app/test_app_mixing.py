"""The Mixing view (AppTest): a head's raw map beside its value-weighted map, the layer's, or the layer's value
zeroing, each the library's numbers with every row divided by its sum; the special tokens hidden on request; a text
past value zeroing's cap is one message before any work."""

from __future__ import annotations

import numpy as np
import pytest
from test_app import decode, figures, no_errors, start

from attention import encode
from attention.analysis.mixing import norm_maps, value_zeroing

WORDS = "The animal didn't cross the street because it was too tired"


def pair(at) -> tuple[np.ndarray, np.ndarray]:
    found = [f for f in figures(at) if len([d for d in f["data"] if d["type"] == "heatmap"]) == 2]
    assert len(found) == 1
    left, right = (decode(d["z"]) for d in found[0]["data"] if d["type"] == "heatmap")
    return left, right


def rows_of(m: np.ndarray) -> np.ndarray:
    return m / m.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def bundled(minilm):
    model, tokenizer = minilm
    return model, encode(tokenizer, WORDS)


def test_a_heads_value_weighted_map_beside_its_raw_one(bundled):
    model, enc = bundled
    at = start(s=WORDS, view="mixing", layer="2", head="5")
    no_errors(at)
    left, right = pair(at)
    norms = norm_maps(model, enc.input_ids, enc.attention_mask)
    np.testing.assert_allclose(right, rows_of(norms.heads[2][5]), atol=1e-5)
    assert np.allclose(left.sum(1), 1, atol=1e-5) and not np.allclose(left, right, atol=1e-3)
    assert any("[CLS]/[SEP]" in c.value and "raw" in c.value for c in at.caption)


def test_the_layers_value_zeroing_with_special_tokens_hidden(bundled):
    model, enc = bundled
    at = start(s=WORDS, view="mixing", layer="1")
    at.radio(key="mixing_kind").set_value("Value zeroing, the layer").run(timeout=120)
    at.checkbox(key="hide_special").check().run(timeout=120)
    no_errors(at)
    left, right = pair(at)
    keep = ~np.array(enc.special, dtype=bool)
    zeroed = value_zeroing(model, enc.input_ids, 1, enc.attention_mask)[np.ix_(keep, keep)]
    assert right.shape == (keep.sum(), keep.sum())
    np.testing.assert_allclose(right, rows_of(zeroed), atol=1e-5)


def test_past_the_cap_value_zeroing_is_one_message_and_no_work(monkeypatch):
    import ui.compute.computations as computations
    import ui.views.mixing as view

    monkeypatch.setattr(view, "VALUE_ZEROING_MAX_TOKENS", 4)
    monkeypatch.setattr(computations, "value_zeroing", lambda *a, **k: pytest.fail("value zeroing ran past its cap"))
    at = start(s=WORDS, view="mixing")
    at.radio(key="mixing_kind").set_value("Value zeroing, the layer").run(timeout=120)
    no_errors(at)
    assert any("offered up to 4 tokens" in i.value for i in at.info)


def test_a_link_reopens_value_zeroing_and_the_report_and_presentation_hold_it(bundled):
    from test_app_report import fact, report

    from ui.page.present import figure_height

    model, enc = bundled
    at = start(s=WORDS, view="mixing", layer="1", mix="zeroing")
    no_errors(at)
    assert at.radio(key="mixing_kind").value == "Value zeroing, the layer"
    right = pair(at)[1]
    np.testing.assert_allclose(right, rows_of(value_zeroing(model, enc.input_ids, 1, enc.attention_mask)), atol=1e-5)
    page = report(at)
    assert fact(page, "Beside the raw map") == "Value zeroing, the layer"
    assert "mix=zeroing" in fact(page, "Link") and page.count("<figure") >= 1
    chosen = start(s=WORDS, view="mixing", layer="1")
    chosen.radio(key="mixing_kind").set_value("Value-weighted, the layer").run()
    assert "mix=layer" in fact(report(chosen), "Link")  # a choice made on the page is written to its link
    shown = start(s=WORDS, view="mixing", layer="1", mix="layer", present="1")
    no_errors(shown)
    (fig,) = [f for f in figures(shown) if len([d for d in f["data"] if d["type"] == "heatmap"]) == 2]
    assert fig["layout"]["height"] <= figure_height()  # the pair within the first screen


def test_on_a_decoder_the_caption_gives_the_first_tokens_share_raw_and_weighted(tmp_path):
    """A decoder adds no [CLS]/[SEP]: the caption gives the first token's share (its attention sink) instead, raw
    and value-weighted, as Head stats' to_first and to_first_weighted count it (stats.first_share)."""
    from families import make_family

    from attention import load_model
    from attention.analysis.stats import first_share
    from attention.runs.run import run_sentence

    folder = make_family(tmp_path / "gpt2", "gpt2")
    model, tokenizer = load_model(folder)
    text = "the cat sat on the mat"
    run = run_sentence(model, tokenizer, text)
    enc = run.encoded
    assert not any(enc.special) and model.config.attention.causal
    raw = first_share(np.asarray(run.attentions[1][2]))  # (L, L)
    weighted = first_share(norm_maps(model, enc.input_ids, enc.attention_mask).heads[1][2])
    at = start(model=str(folder), s=text, view="mixing", layer="1", head="2")
    no_errors(at)
    said = f"To the first token (“{run.tokens[0]}”): {raw:.0%} of each row raw, {weighted:.0%} here."
    assert any(said in c.value for c in at.caption), [c.value[-90:] for c in at.caption]
