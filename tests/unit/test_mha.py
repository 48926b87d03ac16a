"""MultiHeadAttention against PyTorch's fused attention and against the seed tutorials' forms."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention import MultiHeadAttention, scaled_dot_product_attention

torch.manual_seed(0)


def reference(mha: MultiHeadAttention, query, key, value, attn_mask=None, is_causal=False):
    """The same projections, attention done by torch's scaled_dot_product_attention."""
    B, L, _ = query.shape
    S = key.size(1)
    d = mha.head_dim
    q = mha.q_proj(query).view(B, L, mha.num_heads, d).transpose(1, 2)
    k = mha.k_proj(key).view(B, S, mha.num_kv_heads, d).transpose(1, 2)
    v = mha.v_proj(value).view(B, S, mha.num_kv_heads, d).transpose(1, 2)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, enable_gqa=mha.num_kv_heads != mha.num_heads
    )
    return mha.o_proj(out.transpose(1, 2).reshape(B, L, -1))


def close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_kv_heads", [None, 2, 1], ids=["MHA", "GQA", "MQA"])
def test_self_attention_matches_torch(num_kv_heads):
    mha = MultiHeadAttention(48, 6, num_kv_heads=num_kv_heads).eval()
    x = torch.randn(2, 7, 48)
    out, probs = mha(x)
    assert out.shape == (2, 7, 48) and probs.shape == (2, 6, 7, 7)
    close(out, reference(mha, x, x, x))
    close(probs.sum(-1), torch.ones(2, 6, 7))


def test_gqa_shares_kv_heads_within_groups():
    mha = MultiHeadAttention(48, 6, num_kv_heads=2).eval()
    assert mha.k_proj.out_features == 2 * 8 and mha.v_proj.out_features == 2 * 8
    # query heads 0-2 use kv head 0, 3-5 kv head 1: equal queries in a group give equal maps
    with torch.no_grad():
        w = mha.q_proj.weight.view(6, 8, 48)
        w[1] = w[0]
        w[4] = w[0]
        b = mha.q_proj.bias.view(6, 8)
        b[1] = b[0]
        b[4] = b[0]
    _, probs = mha(torch.randn(1, 5, 48))
    close(probs[:, 1], probs[:, 0])  # same group, same query weights
    assert not torch.allclose(probs[:, 4], probs[:, 0])  # other group


def test_cross_attention_with_different_lengths():
    mha = MultiHeadAttention(32, 4).eval()
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 9, 32)
    out, probs = mha(x, memory, memory)
    assert out.shape == (2, 5, 32) and probs.shape == (2, 4, 5, 9)
    close(out, reference(mha, x, memory, memory))


def test_key_padding_mask():
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    out, probs = mha(x, attention_mask=keep)
    close(out, reference(mha, x, x, x, attn_mask=keep.bool()[:, None, None, :]))
    assert torch.all(probs[1, :, :, 3:] == 0)
    close(probs.sum(-1), torch.ones(2, 4, 6))


def test_full_boolean_and_additive_masks_agree():
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(1, 5, 32)
    keep = torch.rand(1, 4, 5, 5) > 0.3
    keep[..., 0] = True  # every row keeps a key
    additive = torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    out_bool, probs_bool = mha(x, attention_mask=keep)
    out_add, probs_add = mha(x, attention_mask=additive)
    close(out_bool, reference(mha, x, x, x, attn_mask=keep))
    close(out_add, out_bool)
    close(probs_add, probs_bool)
    assert torch.all(probs_bool[~keep] == 0)


def test_causal():
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 6, 32)
    out, probs = mha(x, is_causal=True)
    close(out, reference(mha, x, x, x, is_causal=True))
    assert torch.all(probs.triu(diagonal=1) == 0)


def test_causal_combined_with_padding():
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 5, 32)
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    both = keep.bool()[:, None, None, :] & torch.ones(5, 5, dtype=torch.bool).tril()
    out, probs = mha(x, attention_mask=keep, is_causal=True)
    close(out, reference(mha, x, x, x, attn_mask=both))


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    keep = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    keep[1] = False  # the second batch item may attend to nothing
    out, probs = scaled_dot_product_attention(q, k, v, keep)
    assert not torch.isnan(out).any() and not torch.isnan(probs).any()
    assert torch.all(probs[1] == 0) and torch.all(out[1] == 0)
    close(probs[0].sum(-1), torch.ones(3, 4))
    # the same through the module with a key padding mask of zeros
    mha = MultiHeadAttention(16, 2).eval()
    out, probs = mha(torch.randn(1, 3, 16), attention_mask=torch.zeros(1, 3))
    assert torch.all(probs == 0)
    close(out, mha.o_proj.bias.expand(1, 3, 16))  # zero heads, only the output bias remains


def test_a_boolean_mask_drops_the_same_scores_as_masked_fill_to_the_bit():
    q, k, v = torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 8)
    keep = torch.ones(7, 7, dtype=torch.bool).tril() & (torch.rand(2, 1, 1, 7) > 0.3)
    keep[..., 0] = True  # every query keeps a key
    _, probs = scaled_dot_product_attention(q, k, v, keep)
    scores = (q @ k.transpose(-2, -1)).mul_(8**-0.5).masked_fill_(~keep, float("-inf"))
    assert torch.equal(probs, torch.softmax(scores, dim=-1))


def test_half_precision_scores_overflowing_where_masked_are_still_dropped():
    q = torch.full((1, 1, 2, 4), 200.0, dtype=torch.float16)
    k = torch.tensor([[1.0] * 4, [300.0] * 4], dtype=torch.float16)[None, None]  # q · k overflows for the 2nd key
    keep = torch.tensor([[True, False], [True, False]])
    _, probs = scaled_dot_product_attention(q, k, k, keep, scaling=1.0)
    assert torch.equal(probs, torch.tensor([[[[1.0, 0.0], [1.0, 0.0]]]]))


def test_scaling_is_true_division():
    mha = MultiHeadAttention(64, 4)
    assert mha.head_dim == 16 and mha.scaling == 16**-0.5
    q, k, v = torch.randn(1, 1, 3, 16), torch.randn(1, 1, 4, 16), torch.randn(1, 1, 4, 16)
    _, probs = scaled_dot_product_attention(q, k, v)
    close(probs, torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1))


def test_dropout_only_in_training():
    mha = MultiHeadAttention(32, 4, dropout=0.5)
    x = torch.randn(1, 6, 32)
    mha.eval()
    a, _ = mha(x)
    b, _ = mha(x)
    assert torch.equal(a, b)
    mha.train()
    torch.manual_seed(1)
    _, probs = mha(x)
    assert (probs == 0).any()  # some probabilities dropped
    assert not torch.allclose(probs.sum(-1), torch.ones(1, 4, 6))


class SingleHead(nn.Module):
    """One head with its own q/k/v projections, as in the concatenated-heads tutorial."""

    def __init__(self, d_model, head_dim):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(d_model, head_dim) for _ in range(3))

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(1, 2) / self.q.out_features**0.5
        return torch.softmax(scores, dim=-1) @ self.v(x)


def test_separate_single_heads_concatenated_equal_split_heads():
    D, H = 48, 6
    d = D // H
    mha = MultiHeadAttention(D, H).eval()
    heads = [SingleHead(D, d) for _ in range(H)]
    with torch.no_grad():
        for h, head in enumerate(heads):
            rows = slice(h * d, (h + 1) * d)
            for mine, theirs in ((head.q, mha.q_proj), (head.k, mha.k_proj), (head.v, mha.v_proj)):
                mine.weight.copy_(theirs.weight[rows])
                mine.bias.copy_(theirs.bias[rows])
    x = torch.randn(2, 5, D)
    concatenated = mha.o_proj(torch.cat([head(x) for head in heads], dim=-1))
    close(mha(x)[0], concatenated)


def test_fused_qkv_split_three_ways_equals_separate_projections():
    D, H = 32, 4
    mha = MultiHeadAttention(D, H).eval()
    fused = nn.Linear(D, 3 * D)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
        fused.bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
    x = torch.randn(2, 6, D)
    B, L, _ = x.shape
    q, k, v = fused(x).split(D, dim=-1)  # (B, L, D) each
    q, k, v = (t.view(B, L, H, D // H).transpose(1, 2) for t in (q, k, v))  # (B, H, L, d)
    heads, _ = scaled_dot_product_attention(q, k, v, torch.ones(L, L, dtype=torch.bool).tril())
    expected = mha.o_proj(heads.transpose(1, 2).reshape(B, L, D))
    close(mha(x, is_causal=True)[0], expected)


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(30, 4)
    with pytest.raises(ValueError, match="num_kv_heads"):
        MultiHeadAttention(32, 4, num_kv_heads=3)
    mha = MultiHeadAttention(32, 4)
    with pytest.raises(ValueError, match="key padding mask"):
        mha(torch.randn(2, 5, 32), attention_mask=torch.ones(2, 4))
