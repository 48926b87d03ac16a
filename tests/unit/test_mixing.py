"""Value-weighted maps, value zeroing and attention sinks (attention/analysis/mixing.py) against references computed
here on transformers' own eager modules: each layer's value projection and output projection read by hooks, its
probabilities from output_attentions, the measures written out as the papers define them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import make_family, reference

from attention import load_model
from attention.analysis.mixing import VALUE_ZEROING_MAX_TOKENS, norm_maps, sink_shares, value_zeroing
from attention.analysis.stats import head_stats, punctuation_mask

FAMILIES = ("bert", "gpt2", "llama")  # post-norm, a fused Q·K·V with Conv1D weights, grouped-query (4 heads, 2 K/V)
TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module", params=FAMILIES)
def case(request, tmp_path_factory):
    """(family, our model, transformers' eager base model, input_ids (1, L))."""
    folder = make_family(tmp_path_factory.mktemp(request.param), request.param)
    model, tokenizer = load_model(folder)
    return request.param, model, reference(folder), tokenizer(TEXT, return_tensors="pt")["input_ids"]


def _modules(family: str, theirs, layer: int):
    """transformers' (layer module, module whose output holds the values, o_proj's weight as (D, H·d))."""
    if family == "bert":
        block = theirs.encoder.layer[layer]
        return block, block.attention.self.value, block.attention.output.dense.weight
    if family == "gpt2":
        block = theirs.h[layer]
        return block, block.attn.c_attn, block.attn.c_proj.weight.T  # Conv1D keeps (in, out)
    block = theirs.layers[layer]
    return block, block.self_attn.v_proj, block.self_attn.o_proj.weight


def _values(family: str, output: torch.Tensor, D: int) -> torch.Tensor:
    """The value part of a value module's output (B, L, G·d)."""
    return output[..., 2 * D :] if family == "gpt2" else output


def reference_vectors(family: str, theirs, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """Per layer a_ij · f_h(x_j) written out, (H, L, L, D), from transformers' values and probabilities."""
    config = theirs.config
    D, H = config.hidden_size, config.num_attention_heads
    values = {}
    hooks = [
        _modules(family, theirs, i)[1].register_forward_hook(lambda m, a, out, i=i: values.__setitem__(i, out))
        for i in range(config.num_hidden_layers)
    ]
    with torch.no_grad():
        out = theirs(input_ids, output_attentions=True)
        vectors = []
        for i, probs in enumerate(out.attentions):
            v = _values(family, values[i][0], D)  # (L, G·d)
            L, d = v.size(0), D // H
            v = v.view(L, -1, d).transpose(0, 1).repeat_interleave(H * d // v.size(-1), dim=0)  # (H, L, d)
            W = _modules(family, theirs, i)[2].view(D, H, d)  # (D, H, d)
            f = torch.stack([v[h] @ W[:, h].T for h in range(H)])  # (H, L, D)
            vectors.append(probs[0][..., None] * f[:, None])  # (H, L, L, 1) x (H, 1, L, D)
    for hook in hooks:
        hook.remove()
    return vectors


def test_norm_maps_are_the_norms_of_the_weighted_value_vectors(case):
    family, model, theirs, input_ids = case
    ours = norm_maps(model, input_ids)
    for i, vectors in enumerate(reference_vectors(family, theirs, input_ids)):
        heads, layer = vectors.norm(dim=-1), vectors.sum(0).norm(dim=-1)  # (H, L, L), (L, L)
        scale = float(layer.max())
        # float32 vectors of this scale, as transformers' hidden states match ours to 1e-5 of theirs
        torch.testing.assert_close(torch.tensor(ours.heads[i]), heads, atol=1e-6 * scale, rtol=0)
        torch.testing.assert_close(torch.tensor(ours.layers[i]), layer, atol=1e-6 * scale, rtol=0)
        assert not np.allclose(ours.layers[i], ours.heads[i].sum(0))  # the heads' vectors add, not their norms


def reference_zeroing(family: str, theirs, input_ids: torch.Tensor, layer: int) -> torch.Tensor:
    """Mohebbi et al.'s value zeroing by their recipe: transformers' layer run again with token j's values zeroed
    in every head (a hook on its value projection), cosine distance of each token's layer output, rows normalised."""
    block, value_module, _ = _modules(family, theirs, layer)
    D = theirs.config.hidden_size
    kept = {}
    keep = block.register_forward_hook(
        lambda m, a, out: kept.__setitem__("y", out[0] if isinstance(out, tuple) else out)
    )

    def output(zeroed: int | None) -> torch.Tensor:
        def zero(module, args, out):
            out = out.clone()
            _values(family, out, D)[:, zeroed] = 0.0  # every head's value of token `zeroed`
            return out

        hook = value_module.register_forward_hook(zero) if zeroed is not None else None
        with torch.no_grad():
            theirs(input_ids)
        if hook is not None:
            hook.remove()
        return kept["y"][0].double()  # (L, D)

    base, L = output(None), input_ids.size(1)
    distances = torch.stack([1 - torch.cosine_similarity(base, output(j), dim=-1) for j in range(L)], dim=1)
    keep.remove()
    return distances / distances.sum(dim=1, keepdim=True)  # (L, L): row i, column j


@pytest.mark.parametrize("layer", [0, 1])
@pytest.mark.parametrize("per_pass", [5, 16])  # the zeroed tokens in several passes, or in one
def test_value_zeroing_matches_the_layer_run_again_with_zeroed_values(case, layer, per_pass, monkeypatch):
    monkeypatch.setattr("attention.analysis.mixing.ZEROED_PER_PASS", per_pass)
    family, model, theirs, input_ids = case
    ours = torch.tensor(value_zeroing(model, input_ids, layer))
    expected = reference_zeroing(family, theirs, input_ids, layer)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
    if family != "bert":  # a causal layer: token i's output reads no later token's values
        assert float(ours.triu(1).abs().max()) == 0.0


def test_sink_shares_are_the_first_token_shares_of_both_maps(case):
    family, model, theirs, input_ids = case
    shares = sink_shares(model, input_ids)
    with torch.no_grad():
        maps = torch.stack(theirs(input_ids, output_attentions=True).attentions)[:, 0]  # (n_layers, H, L, L)
    norms = torch.stack([v.norm(dim=-1) for v in reference_vectors(family, theirs, input_ids)])  # (n_layers, H, L, L)
    raw = maps[..., 0].mean(-1)
    weighted = (norms[..., 0] / norms.sum(-1)).mean(-1)
    np.testing.assert_allclose(shares["to_first"], raw.double(), atol=1e-6, rtol=0)
    np.testing.assert_allclose(shares["to_first_weighted"], weighted.double(), atol=1e-5, rtol=0)
    assert not np.allclose(shares["to_first"], shares["to_first_weighted"], atol=1e-3)
    L = input_ids.size(1)  # head_stats gives the same two from the maps and norms held
    stats = head_stats(maps.numpy(), [False] * L, [0] * L, punctuation_mask(["a"] * L), norms=norms.numpy())
    np.testing.assert_allclose(stats["to_first"], shares["to_first"], atol=1e-6, rtol=0)
    np.testing.assert_allclose(stats["to_first_weighted"], shares["to_first_weighted"], atol=1e-5, rtol=0)


def test_padding_is_left_out(case):
    family, model, _, input_ids = case
    L = input_ids.size(1)
    padded = torch.cat([input_ids, input_ids[:, :3]], dim=1)  # three more ids, masked out
    mask = torch.cat([torch.ones(1, L, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long)], dim=1)
    alone, masked = norm_maps(model, input_ids), norm_maps(model, padded, mask)
    np.testing.assert_allclose(masked.layers[1], alone.layers[1], atol=1e-5 * float(alone.layers[1].max()))
    assert value_zeroing(model, padded, 1, mask).shape == (L, L)


def test_bad_input_is_refused_before_any_work(case):
    family, model, _, input_ids = case
    too_long = torch.zeros(1, VALUE_ZEROING_MAX_TOKENS + 1, dtype=torch.long)  # past the cap and the positions
    with pytest.raises(ValueError, match=f"shorten it to {VALUE_ZEROING_MAX_TOKENS} tokens"):
        value_zeroing(model, too_long, 0)
    for layer in (2, -1, True):
        with pytest.raises(ValueError, match="layer must be an integer from 0 to 1"):
            value_zeroing(model, input_ids, layer)
    with pytest.raises(ValueError, match="one sentence"):
        norm_maps(model, input_ids.repeat(2, 1))
