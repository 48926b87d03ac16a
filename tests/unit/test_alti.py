"""ALTI (attention/analysis/alti.py) against its published formulation (Ferrando et al. 2022, eqs. for T_i(x_j),
the LayerNorm's linear part and the Manhattan contributions) written out token by token on transformers' BERT, and
on a layer built so that its answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import make_family, reference

from attention import load_model
from attention.analysis.alti import alti

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = make_family(tmp_path_factory.mktemp("bert"), "bert")
    model, tokenizer = load_model(folder)
    return model, tokenizer, reference(folder), tokenizer(TEXT, return_tensors="pt")["input_ids"]


@torch.no_grad()
def published(theirs, input_ids, layer: int) -> torch.Tensor:
    """c_ij of `layer` by the paper's formulas, one (i, j) at a time, from transformers' own tensors: the values,
    the probabilities, the layer's input, and its attention LayerNorm's input z_i and output ỹ_i."""
    attention = theirs.encoder.layer[layer].attention
    seen = {}
    hooks = [
        attention.self.value.register_forward_hook(lambda m, a, out: seen.__setitem__("v", out[0].double())),
        attention.output.LayerNorm.register_forward_hook(
            lambda m, a, out: seen.update(z=a[0][0].double(), y=out[0].double())
        ),
    ]
    with torch.no_grad():
        out = theirs(input_ids, output_attentions=True, output_hidden_states=True)
    for hook in hooks:
        hook.remove()
    probs, x = out.attentions[layer][0].double(), out.hidden_states[layer][0].double()  # (H, n, n), (n, D)
    H, n, _ = probs.shape
    D = x.size(1)
    d = D // H
    W = attention.output.dense.weight.double()  # (D, H·d)
    ln = attention.output.LayerNorm
    gamma = ln.weight.double()
    c = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        sigma = (seen["z"][i].var(unbiased=False) + ln.eps).sqrt()
        y = seen["y"][i]
        for j in range(n):
            t = sum(probs[h, i, j] * (W[:, h * d : (h + 1) * d] @ seen["v"][j, h * d : (h + 1) * d]) for h in range(H))
            t = t + (x[i] if i == j else 0)  # T_i(x_j), the residual as token i's own
            scaled = gamma * (t - t.mean()) / sigma  # the LayerNorm's linear part
            c[i, j] = max(0.0, float(y.abs().sum() - (y - scaled).abs().sum()))
    return c / c.sum(1, keepdim=True)


@pytest.mark.parametrize("rows", [5, 16])  # query rows in several passes, or in one
def test_alti_is_the_published_formulation(bert, rows, monkeypatch):
    monkeypatch.setattr("attention.analysis.alti.ROWS_PER_PASS", rows)
    model, _, theirs, input_ids = bert
    ours = alti(model, input_ids)
    for layer in range(2):
        # float32 layers matching transformers to 1e-5 of their size: shares of a row differ by 5e-8 at most here
        np.testing.assert_allclose(ours.layers[layer], published(theirs, input_ids, layer), atol=1e-6, rtol=0)
    np.testing.assert_allclose(ours.rollout[1], ours.layers[1] @ ours.layers[0], atol=1e-6, rtol=0)
    assert not np.allclose(ours.layers[1], np.eye(input_ids.size(1)), atol=0.05)


def test_a_layer_that_moves_nothing_leaves_each_token_its_own(bert):
    model, _, _, input_ids = bert
    attention, norm = model.layers[0].attention, model.layers[0].attention_norm
    saved = [t.detach().clone() for t in (attention.o_proj.weight, attention.o_proj.bias, norm.bias)]
    try:
        with torch.no_grad():  # no value reaches the output, no bias: ỹ_i is token i's own term exactly
            for t in (attention.o_proj.weight, attention.o_proj.bias, norm.bias):
                t.zero_()
        ours = alti(model, input_ids)
    finally:
        with torch.no_grad():
            for t, kept in zip((attention.o_proj.weight, attention.o_proj.bias, norm.bias), saved):
                t.copy_(kept)
    np.testing.assert_allclose(ours.layers[0], np.eye(input_ids.size(1)), atol=1e-6, rtol=0)


def test_alti_refuses_a_decoder(tmp_path):
    model, tokenizer = load_model(make_family(tmp_path / "gpt2", "gpt2"))
    with pytest.raises(ValueError, match="post-norm encoder"):
        alti(model, tokenizer(TEXT, return_tensors="pt")["input_ids"])
