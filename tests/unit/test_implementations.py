"""The named attention implementations (attention/core/implementations.py) and the requests that choose them
(attention/core/request.py): each name gives the explicit steps' numbers, and a forward pass's request picks a layer's
implementation by name, in one place."""

import pytest
import torch

from attention.core.implementations import IMPLEMENTATIONS
from attention.core.mha import KeyValueCache, MultiHeadAttention
from attention.core.request import Call, MapRequest

D, H, G, L = 32, 4, 2, 6


def attention_and_input(seed: int = 0, **parts):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(D, H, num_kv_heads=G, **parts).eval()
    if mha.sink is not None:  # learned sinks, each head's its own (zeros as built)
        mha.sinks.data.copy_(torch.randn(H))
    return mha, torch.randn(2, L, D)


def test_the_table_names_every_implementation():
    assert set(IMPLEMENTATIONS) == {"explicit", "fused", "rows", "map_only", "by_group", "by_head", "long"}
    with pytest.raises(ValueError, match="no attention implementation 'flash'"):
        Call("flash")


PARTS = {"plain": {}, "softcap": dict(softcap=3.0), "sinks": dict(sinks=True)}


@pytest.mark.parametrize("parts", list(PARTS))
def test_each_implementation_gives_the_explicit_numbers(parts):
    mha, x = attention_and_input(**PARTS[parts])
    rows = torch.tensor([[0, 5], [2, 2]])
    with torch.inference_mode():
        out, probs = mha(x, is_causal=True, call=Call("explicit"))
        fused_out, none = mha(x, is_causal=True, call=Call("fused"))
        rows_out, picked = mha(x, is_causal=True, call=Call("rows", rows))
        nothing, only = mha(x, is_causal=True, call=Call("map_only"))
        head_out, head_map = mha(x, is_causal=True, call=Call("by_head", record=lambda name, t: t, head=1))
    assert probs is not None and probs.shape == (2, H, L, L) and none is None and nothing is None
    for other in (fused_out, rows_out, head_out):
        torch.testing.assert_close(other, out, atol=1e-5, rtol=0)  # the fused kernel sums in its own order
    assert picked is not None and only is not None and head_map is not None
    torch.testing.assert_close(picked, torch.stack([probs[b, :, r] for b, r in enumerate(rows)]), atol=1e-6, rtol=0)
    assert torch.equal(only, probs)  # the same steps on the same numbers
    assert torch.equal(head_map, probs[:, 1:2])
    if mha.sink is not None:  # each row's sink share goes to no key: rows sum to less than 1, the sink's share
        shares = 1 - probs.sum(-1)  # (B, H, L)
        assert shares.min() > 0 and not mha.fusable


@pytest.mark.parametrize("parts", list(PARTS))
def test_by_group_reads_each_key_value_head_once_for_a_new_query(parts):
    mha, x = attention_and_input(**PARTS[parts])
    with torch.inference_mode():
        whole, maps = mha(x, is_causal=True)
        cache = KeyValueCache()
        mha(x[:, :-1], is_causal=True, cache=cache, call=Call("fused"))  # the first L - 1 positions
        out, probs = mha(x[:, -1:], cache=cache, call=Call("by_group"))
    assert probs is not None and maps is not None
    torch.testing.assert_close(out, whole[:, -1:], atol=1e-5, rtol=0)
    torch.testing.assert_close(probs, maps[:, :, -1:], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="one new query"):
        mha(x, call=Call("by_group"))


def test_a_request_names_each_layers_implementation():
    record = lambda name, t: t  # noqa: E731
    rows = torch.zeros(1, 1, dtype=torch.long)
    every, some, stop = MapRequest(), MapRequest({1}), MapRequest({1}, stop=True)
    assert [every.call(i, 2).implementation for i in range(3)] == ["explicit"] * 3
    assert [some.call(i, 2).implementation for i in range(3)] == ["fused", "explicit", "fused"]
    assert stop.last(3) == 1 and [stop.call(i, 1).implementation for i in range(2)] == ["fused", "map_only"]
    assert MapRequest(rows=rows).call(0, 2, rows).implementation == "rows"
    assert some.call(0, 2, record=record).implementation == "explicit"  # recorded steps are the explicit ones
    assert MapRequest(head=1).call(0, 2).implementation == "by_head"
    assert MapRequest((), stop=True).last(3) == -1  # nothing kept: no layer runs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_sink_is_a_column_of_no_key_in_every_rows_softmax(dtype):
    """attention_probs with sinks (score_parts.Sinks.kept) against torch's softmax over the scores with the sink
    logit as one more column, that column then dropped (transformers' gpt-oss eager attention), for float32 and for
    half scores softmaxed in float32; a row with every key masked gives zeros."""
    from attention.core.dot_product import attention_probs

    torch.manual_seed(1)
    scores, sinks = torch.randn(2, H, L, L) * 4, torch.randn(1, H, 1, 1) * 4
    keys = torch.eye(L).expand(2, H, L, L)  # q · kᵀ = the scores themselves, through the attention's own steps
    masked = torch.ones(2, 1, L, L, dtype=torch.bool)
    masked[0, :, 2] = False  # a row whose keys are all masked
    ours = attention_probs(scores.to(dtype), keys.to(dtype), masked, 1.0, sink=sinks)
    seen = scores.to(dtype).float().masked_fill(~masked, float("-inf"))
    reference = torch.softmax(torch.cat((seen, sinks.expand(2, H, L, 1)), dim=-1), dim=-1)[..., :-1]
    torch.testing.assert_close(ours, reference, atol=1e-6, rtol=0)  # probabilities: a few float32 steps
    assert torch.equal(ours[0, :, 2], torch.zeros(H, L))
