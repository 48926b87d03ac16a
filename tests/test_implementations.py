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
    return MultiHeadAttention(D, H, num_kv_heads=G, **parts).eval(), torch.randn(2, L, D)


def test_the_table_names_every_implementation():
    assert set(IMPLEMENTATIONS) == {"explicit", "fused", "rows", "map_only", "by_group", "by_head", "long"}
    with pytest.raises(ValueError, match="no attention implementation 'flash'"):
        Call("flash")


@pytest.mark.parametrize("softcap", [None, 3.0])
def test_each_implementation_gives_the_explicit_numbers(softcap):
    mha, x = attention_and_input(softcap=softcap)
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


def test_by_group_reads_each_key_value_head_once_for_a_new_query():
    mha, x = attention_and_input()
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
