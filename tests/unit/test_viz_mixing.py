"""viz.mixing_view, the notebook's Mixing figure: a head's or layer's raw map beside its value-weighted map, or the
layer's beside its value zeroing, each the library's numbers (mixing.norm_maps, mixing.value_zeroing) with every row
divided by its sum, over the tokens kept; bad arguments a clear ValueError."""

from __future__ import annotations

import numpy as np
import pytest
from families import make_family

import viz
from attention import load_model
from attention.analysis.mixing import norm_maps, value_zeroing
from attention.runs.run import run_sentence

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """(model, its run of TEXT, input_ids (1, L), value-weighted maps)."""
    model, tokenizer = load_model(make_family(tmp_path_factory.mktemp("llama"), "llama"))
    run = run_sentence(model, tokenizer, TEXT)
    ids = run.encoded.input_ids
    return model, run, ids, norm_maps(model, ids)


def rows_of(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    return m / m.sum(axis=1, keepdims=True)


def drawn(fig) -> tuple[np.ndarray, np.ndarray]:
    left, right = (np.asarray(d.z, dtype=np.float64) for d in fig.data if d.type == "heatmap")
    return left, right


def test_a_heads_raw_map_beside_its_value_weighted_map(case):
    model, run, ids, norms = case
    fig = viz.mixing_view(run.attentions, run.tokens, 1, 2, weighted=norms)
    left, right = drawn(fig)
    np.testing.assert_allclose(left, rows_of(run.attentions[1, 2]), atol=1e-6)
    np.testing.assert_allclose(right, rows_of(norms.heads[1][2]), atol=1e-6)
    assert not np.allclose(left, right, atol=1e-3)  # the weighting moves the shares
    assert [a.text for a in fig.layout.annotations][:2] == ["Attention, L1 H2", "‖a·f(x)‖, L1 H2"]
    assert fig.layout.coloraxis is not None and all(d.coloraxis == "coloraxis" for d in fig.data)  # one scale


def test_the_layers_maps_and_a_models_own_attentions(case):
    model, run, ids, norms = case
    out = model(ids)  # a model's outputs.attentions, one (1, H, L, L) tensor per layer, as head_view takes
    fig = viz.mixing_view(out.attentions, run.tokens, 0, weighted=norms)
    left, right = drawn(fig)
    np.testing.assert_allclose(left, rows_of(run.attentions[0].mean(axis=0)), atol=1e-6)
    np.testing.assert_allclose(right, rows_of(norms.layers[0]), atol=1e-6)


def test_the_layers_value_zeroing_over_the_tokens_kept(case):
    model, run, ids, norms = case
    zeroing = value_zeroing(model, ids, 1)
    keep = np.ones(len(run.tokens), dtype=bool)
    keep[0] = False
    fig = viz.mixing_view(run.attentions, run.tokens, 1, zeroing=zeroing, keep=keep)
    left, right = drawn(fig)
    np.testing.assert_allclose(left, rows_of(run.attentions[1].mean(axis=0)[1:, 1:]), atol=1e-6)
    np.testing.assert_allclose(right, rows_of(zeroing[1:, 1:]), atol=1e-6)
    assert len(fig.data[0].x) == len(run.tokens) - 1


def test_bad_arguments_are_a_clear_message(case):
    model, run, ids, norms = case
    n = len(run.tokens)
    with pytest.raises(ValueError, match="either weighted"):
        viz.mixing_view(run.attentions, run.tokens, 0)
    with pytest.raises(ValueError, match="either weighted"):
        viz.mixing_view(run.attentions, run.tokens, 0, weighted=norms, zeroing=np.eye(n))
    with pytest.raises(ValueError, match="layer must be"):
        viz.mixing_view(run.attentions, run.tokens, len(run.attentions), weighted=norms)
    with pytest.raises(ValueError, match="head must be"):
        viz.mixing_view(run.attentions, run.tokens, 0, run.attentions.shape[1], weighted=norms)
    with pytest.raises(ValueError, match="must agree"):
        viz.mixing_view(run.attentions, run.tokens[:-1], 0, weighted=norms)
