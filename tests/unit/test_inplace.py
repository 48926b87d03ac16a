"""The forward pass's buffers: without gradients the scores are masked, capped and softmaxed in their own
buffer, DeBERTa's bucketed distances are taken once per forward and a gated feed-forward multiplies into its
activation; with gradients the same numbers, and a backward pass that works."""

import pytest
import torch
import torch.nn.functional as F

import attention.models.disentangled as disentangled
from attention import Transformer
from attention.core.dot_product import attention_probs
from attention.core.masks import build_mask, may_empty_rows
from attention.core.score_parts import SoftCap
from attention.models import FAMILIES
from attention.models.blocks import gated

torch.manual_seed(0)


def explicit(q, k, mask, scaling, softcap=None):
    """softmax(cap(q · kᵀ · scaling) with -inf where mask is False), every step a new tensor."""
    scores = q @ k.transpose(-2, -1) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


@pytest.mark.parametrize("softcap", [None, 2.0])
def test_scores_are_masked_capped_and_softmaxed_in_one_buffer_without_gradients(softcap):
    q, k = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    mask = build_mask(None, True, 2, 5, 5)  # (1, 1, 5, 5) causal
    kept = {}

    def keep(name, tensor):  # the tensors themselves, not copies
        kept[name] = tensor
        return tensor

    with torch.inference_mode():
        probs = attention_probs(q, k, mask, 0.5, keep, cap=softcap and SoftCap(softcap))
    names = ["scores", "masked_scores"] + (["softcap"] if softcap else [])
    assert {kept[name].data_ptr() for name in names} == {probs.data_ptr()}
    torch.testing.assert_close(probs, explicit(q, k, mask, 0.5, softcap), rtol=0, atol=1e-6)


@pytest.mark.parametrize("softcap", [None, 2.0])
def test_with_gradients_the_steps_take_new_buffers_and_backward_matches(softcap):
    q, k = torch.randn(1, 2, 4, 8, requires_grad=True), torch.randn(1, 2, 4, 8, requires_grad=True)
    mask = build_mask(torch.tensor([[1, 1, 1, 0]]), True, 1, 4, 4)  # causal and a padded key
    ours = attention_probs(q, k, mask, 8**-0.5, cap=softcap and SoftCap(softcap))
    theirs = explicit(q, k, mask, 8**-0.5, softcap)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    weights = torch.randn_like(ours)
    grads = torch.autograd.grad((ours * weights).sum(), (q, k))
    torch.testing.assert_close(grads, torch.autograd.grad((theirs * weights).sum(), (q, k)))


def test_only_a_mask_that_can_leave_a_query_no_key_asks_for_the_nan_pass():
    causal = build_mask(None, True, 1, 4, 4)
    assert not may_empty_rows(None) and not may_empty_rows(causal)
    assert not may_empty_rows(build_mask(None, True, 1, 4, 4, window=2))  # each query still sees itself
    padded = build_mask(torch.tensor([[0, 1, 1, 1]]), True, 1, 4, 4)  # query 0's only key is padding
    assert may_empty_rows(padded)
    assert may_empty_rows(torch.zeros(1, 1, 4, 4))  # additive masks are assumed to


def test_debertas_bucketed_distances_are_taken_once_per_forward(monkeypatch):
    from transformers import DebertaV2Config

    values = DebertaV2Config(
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        vocab_size=50,
        relative_attention=True,
        position_biased_input=False,
        pos_att_type=["p2c", "c2p"],
        position_buckets=8,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
    ).to_dict()
    model = Transformer(FAMILIES["deberta-v2"].read_config(values)).eval()
    calls = []
    buckets = disentangled.log_buckets
    monkeypatch.setattr(disentangled, "log_buckets", lambda *args: calls.append(args) or buckets(*args))
    ids = torch.randint(0, 50, (1, 12))
    with torch.inference_mode():
        first = model(ids).attentions
        assert len(calls) == 1  # three layers, one computation
        model(ids)
        assert len(calls) == 1  # the same length again: kept
        model(ids[:, :7])
        assert len(calls) == 2  # a new length: taken anew
        again = model(ids).attentions
    assert len(calls) == 3
    for a, b in zip(first, again):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_gated_feed_forward_multiplies_into_its_activation_only_without_gradients():
    gate, up = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    with torch.no_grad():
        activated = F.silu(gate)
        assert gated(activated, up).data_ptr() == activated.data_ptr()
    torch.testing.assert_close(activated, F.silu(gate) * up, rtol=0, atol=0)
    gate.requires_grad_(True)
    activated = F.relu(gate)  # relu's backward reads its output: it must stay as it is
    out = gated(activated, up)
    assert out.data_ptr() != activated.data_ptr()
    (grad,) = torch.autograd.grad(out.sum(), gate)
    torch.testing.assert_close(grad, (gate > 0).float() * up)


def test_a_grouped_query_writing_step_reads_each_shared_key_without_copying_it(tmp_path, monkeypatch):
    """One new token of a GQA model: each key/value head's group of queries is one matrix against it (no
    repeat_interleave of the cached keys and values), with the maps and hidden states of the copying path."""
    from families import make_family

    from attention import load_model
    from attention.models.decoding import decode
    from attention.writing.search import BufferedCache

    folder = make_family(tmp_path / "llama", "llama", num_attention_heads=4, num_key_value_heads=2)
    model, _ = load_model(str(folder))
    ids = torch.tensor([[5, 9, 3, 7, 2, 8]])
    with torch.inference_mode():
        full = model(ids)
        cache = [BufferedCache(ids.size(1)) for _ in model.layers]
        decode(model, ids[:, :-1], cache, keep_maps=True)
        copies = []
        repeat = torch.Tensor.repeat_interleave
        monkeypatch.setattr(torch.Tensor, "repeat_interleave", lambda *a, **k: copies.append(1) or repeat(*a, **k))
        step = decode(model, ids[:, -1:], cache, keep_maps=True)
    assert copies == []
    torch.testing.assert_close(step.last_hidden_state, full.last_hidden_state[:, -1:], atol=1e-5, rtol=0)
    for row, whole in zip(step.attentions, full.attentions, strict=True):
        assert row.shape == (1, 4, 1, ids.size(1))
        torch.testing.assert_close(row, torch.as_tensor(whole)[:, :, -1:], atol=1e-6, rtol=0)


def test_gpt2s_projections_keep_the_checkpoints_in_out_layout(tmp_path):
    """GPT-2's Conv1D weights, saved (in, out), are read as (out, in) views of that storage, not transposed copies:
    F.linear then multiplies by the (in, out) matrix as GPT-2's Conv1D does (faster for one token here)."""
    from families import make_family

    from attention import load_model

    model, _ = load_model(str(make_family(tmp_path / "gpt2", "gpt2")))
    attention = model.layers[0].attention
    weight = attention.qkv_proj.weight  # (3·D, D)
    assert weight.shape == (3 * model.config.hidden_size, model.config.hidden_size)
    assert weight.t().is_contiguous() and not weight.is_contiguous()


def test_a_cap_is_a_part_its_attention_holds_and_its_own_words():
    """Gemma 2's soft-cap is a score part built with the attention: the fused kernel is not used for it, and the
    shape flow's sentence for its step is the part's."""
    from attention.core.mha import MultiHeadAttention
    from attention.tracing.steps import op_words, score_parts

    capped, plain = MultiHeadAttention(8, 2, softcap=2.0), MultiHeadAttention(8, 2)
    assert isinstance(capped.cap, SoftCap) and plain.cap is None
    assert not capped.fusable and plain.fusable
    facts = {"parts": score_parts(capped)}
    assert op_words("softcap", {}, {"H": 2, "G": 2}, 0.5, 0, facts) == "soft-cap: 2.0·tanh(scores/2.0)"
    assert score_parts(plain) == {}
    with pytest.raises(ValueError, match="positive"):
        SoftCap(0.0)
