"""Transformer.forward(request=MapRequest(rows=...)): every layer runs torch's fused attention and keeps only the given
query rows of its map, (B, H, P, S), equal to those rows of the full map; hidden states unchanged."""

import pytest
import torch
from families import make_family

import attention.core.implementations as implementations
import attention.core.mha as mha
from attention import load_model
from attention.core.request import MapRequest

SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]
CASES = {  # name -> (family, overrides, padding side, causal what-if)
    "bert padded": ("bert", {}, "right", False),
    "bert causal what-if": ("bert", {}, "right", True),
    "gpt2 left padded": ("gpt2", {}, "left", False),
    "llama gqa left padded": ("llama", {"num_key_value_heads": 2}, "left", False),
    "llama mqa right padded": ("llama", {"num_key_value_heads": 1}, "right", False),
    "mistral window": ("mistral", {}, "right", False),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    family, overrides, side, causal = CASES[request.param]
    model, tokenizer = load_model(make_family(tmp_path_factory.mktemp(family), family, **overrides))
    tokenizer.padding_side = side
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    return model, batch, causal


def pick(maps: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """(B, H, L, S) full maps -> (B, H, P, S), by plain indexing."""
    return torch.stack([maps[b][:, rows[b]] for b in range(maps.size(0))])


def some_rows(batch) -> torch.Tensor:
    """(B, P) positions: first, last, a repeat and a padding position of the shorter sentence."""
    L = batch["input_ids"].size(1)
    return torch.tensor([[0, L - 1, 3, 3, L // 2], [L - 1, 1, 0, 2, 2]])


def test_rows_equal_the_full_maps_rows_and_outputs_do_not_change(case):
    model, batch, causal = case
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")
    assert not bool(mask.all())  # a padded batch
    rows = some_rows(batch)
    with torch.inference_mode():
        full = model(ids, mask, types, causal=causal)
        picked = model(ids, mask, types, causal=causal, request=MapRequest(rows=rows))
        fused = model(ids, mask, types, causal=causal, request=MapRequest(()))
    H, L = model.config.num_attention_heads, ids.size(1)
    assert len(picked.attentions) == model.config.num_hidden_layers
    worst = 0.0
    for layer, (a, f) in enumerate(zip(picked.attentions, full.attentions)):
        assert a.shape == (2, H, rows.size(1), L), layer
        worst = max(worst, (a - pick(f, rows)).abs().max().item())
    assert worst <= 1e-6, worst
    # every row of a real token is a distribution; the maps are not all alike
    assert torch.allclose(picked.attentions[0][0].sum(-1), torch.ones(H, rows.size(1)), atol=1e-5)
    assert (picked.attentions[0][:, :, 0] - picked.attentions[0][:, :, 1]).abs().max() > 1e-3
    # the outputs are the fused ones, bit for bit, and the explicit ones to float error
    for a, f, e in zip(picked.hidden_states, fused.hidden_states, full.hidden_states):
        assert torch.equal(a, f)
        torch.testing.assert_close(a, e, atol=1e-5, rtol=0)


def test_rows_run_the_fused_attention_and_softmax_only_the_kept_rows(case, monkeypatch):
    model, batch, causal = case
    fused_calls, softmaxed = [], []
    real_fused, real_probs = implementations.F.scaled_dot_product_attention, mha.attention_probs

    def counting_fused(q, *args, **kwargs):
        fused_calls.append(tuple(q.shape))
        return real_fused(q, *args, **kwargs)

    def counting_probs(q, *args, **kwargs):
        softmaxed.append(tuple(q.shape))
        return real_probs(q, *args, **kwargs)

    monkeypatch.setattr(implementations.F, "scaled_dot_product_attention", counting_fused)
    monkeypatch.setattr(mha, "attention_probs", counting_probs)
    rows = some_rows(batch)
    with torch.inference_mode():
        model(
            batch["input_ids"],
            batch["attention_mask"],
            batch.get("token_type_ids"),
            causal=causal,
            request=MapRequest(rows=rows),
        )
    n, H, d = model.config.num_hidden_layers, model.config.num_attention_heads, model.config.head_size
    L = batch["input_ids"].size(1)
    assert fused_calls == [(2, H, L, d)] * n  # every layer's output from the fused attention
    assert softmaxed == [(2, H, rows.size(1), d)] * n  # and a softmax over the kept rows only


def test_rows_with_maps_for_and_a_head_mask(case):
    model, batch, causal = case
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")
    rows = some_rows(batch)
    n, H = model.config.num_hidden_layers, model.config.num_attention_heads
    head_mask = torch.ones(n, H)
    head_mask[0, 1] = 0
    with torch.inference_mode():
        only_last = model(ids, mask, types, causal=causal, request=MapRequest({n - 1}, rows))
        full = model(ids, mask, types, causal=causal, head_mask=head_mask, ablation="uniform")
        ablated = model(
            ids, mask, types, causal=causal, head_mask=head_mask, ablation="uniform", request=MapRequest(rows=rows)
        )
    assert only_last.attentions[:-1] == (None,) * (n - 1)
    assert only_last.attentions[-1].shape == (2, H, rows.size(1), ids.size(1))
    for a, f in zip(ablated.attentions, full.attentions):
        torch.testing.assert_close(a, pick(f, rows), atol=1e-6, rtol=0)
    for a, f in zip(ablated.hidden_states, full.hidden_states):
        assert torch.equal(a, f)


def test_bad_rows_are_a_clear_error(case):
    model, batch, _ = case
    ids = batch["input_ids"]
    with pytest.raises(ValueError, match="rows must be"):
        model(ids, request=MapRequest(rows=torch.zeros(3, 2, dtype=torch.long)))
    with pytest.raises(ValueError, match="from 0 to"):
        model(ids, request=MapRequest(rows=torch.full((2, 1), ids.size(1))))


def test_maps_only_stops_at_the_last_kept_map(case, monkeypatch):
    model, batch, causal = case
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")
    rows = some_rows(batch)
    n = model.config.num_hidden_layers
    feed_forwards = []
    for block in model.layers:
        real = block.feed_forward
        monkeypatch.setattr(block, "feed_forward", lambda x, real=real: feed_forwards.append(1) or real(x))
    with torch.inference_mode():
        picked = model(ids, mask, types, causal=causal, request=MapRequest(rows=rows))
        feed_forwards.clear()
        only = model(ids, mask, types, causal=causal, request=MapRequest(rows=rows, stop=True))
        assert len(feed_forwards) == n - 1  # the last layer stops at its map
        first = model(ids, mask, types, causal=causal, request=MapRequest({0}, stop=True))
        nothing = model(ids, mask, types, causal=causal, request=MapRequest((), stop=True))
        full = model(ids, mask, types, causal=causal)
    assert only.last_hidden_state is None and len(only.hidden_states) == n
    for a, b in zip(only.attentions, picked.attentions):
        assert torch.equal(a, b)
    for a, b in zip(only.hidden_states, picked.hidden_states):
        assert torch.equal(a, b)
    assert first.attentions[1:] == (None,) * (n - 1) and len(first.hidden_states) == 1
    torch.testing.assert_close(first.attentions[0], full.attentions[0], atol=1e-6, rtol=0)  # a whole map
    assert nothing.attentions == (None,) * n and len(nothing.hidden_states) == 1
