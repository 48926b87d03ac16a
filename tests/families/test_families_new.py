"""Phi-3, Gemma3, ModernBERT and DeBERTa-v2, loaded from tiny random task checkpoints, give transformers' eager
numbers, single and padded; what each declares (fused projections, partial rotary, windowed layers on their own
rotary base, an encoder's two-sided window, layer 0 unnormed, DeBERTa's three terms) holds, and a config value the
code does not follow is refused by name."""

import pytest
import test_config_checks
import test_decoders
import torch
from families import make_more
from parity import parity_suite

from attention import ModelLoadError, encode, load_model
from attention.analysis.terms import layer_terms
from attention.models.positions import log_buckets
from attention.tracing.trace import trace_layer
from viz.shapeflow import shape_flow

CASES = {  # id -> (family, config overrides)
    "phi3": ("phi3", {}),
    "phi3-window": ("phi3", dict(sliding_window=5, rope_parameters=dict(rope_theta=100.0))),
    "gemma3": ("gemma3_text", {}),
    "gemma3-mqa": ("gemma3_text", dict(num_key_value_heads=1)),
    "modernbert": ("modernbert", {}),
    "modernbert-biased": ("modernbert", dict(attention_bias=True, mlp_bias=True, norm_bias=True)),
    "deberta-v2": ("deberta-v2", {}),
    "deberta-v2-c2p": ("deberta-v2", dict(pos_att_type=["c2p"], position_buckets=-1, norm_rel_ebd="none")),
    "deberta-v2-absolute": (
        "deberta-v2",
        dict(relative_attention=False, position_biased_input=True, norm_rel_ebd="none"),
    ),
}
SENTENCE = test_decoders.SENTENCES[0]


load, test_parity_with_transformers = parity_suite(CASES)


def test_phi3_cuts_its_fused_projections_and_turns_half_of_each_head(load):
    model, tokenizer, _ = load("phi3")
    c, layer = model.config, model.layers[0]
    assert (c.attention.fused_qkv, c.feed_forward.fused_gate_up, c.rotary_dim, c.head_size) == (True, True, 4, 8)
    assert layer.attention.qkv_proj.weight.shape == ((4 + 2 * 2) * 8, 32) and layer.gate_up.weight.shape == (80, 32)
    x = torch.randn(1, 3, 32)
    gate, up = layer.gate_up(x).chunk(2, dim=-1)
    torch.testing.assert_close(layer.feed_forward(x), layer.output(torch.nn.functional.silu(gate) * up))
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=0)
    assert trace.step("qkv_proj").weights == "self_attn.qkv_proj"
    before, after = trace.tensor("q_heads"), trace.tensor("q_rot")
    assert torch.equal(after[..., 4:], before[..., 4:]) and not torch.allclose(after[..., 1:, :4], before[..., 1:, :4])
    assert shape_flow(trace).layout.annotations
    windowed, _, _ = load("phi3-window")
    assert [windowed.config.window_of(i) for i in range(2)] == [5, 5]


def test_gemma3_windows_its_sliding_layers_on_their_own_rotary_base(load):
    model, tokenizer, _ = load("gemma3")
    c = model.config
    assert [c.window_of(i) for i in range(3)] == [5, 5, None]
    assert (
        c.positions.local_rope_theta,
        c.positions.rope_theta,
        c.positions.rope_type,
        c.positions.rope_factor,
        c.attention.qk_norm,
    ) == (
        50.0,
        1000.0,
        "linear",
        2.0,
        "head",
    )
    enc = encode(tokenizer, SENTENCE)
    turned = [trace_layer(model, enc.input_ids, enc.attention_mask, layer=i) for i in (0, 2)]
    for trace, theta, factor in zip(turned, (50.0, 1000.0), (1.0, 2.0)):
        q, rotated = trace.tensor("q_norm"), trace.tensor("q_rot")  # normed each head's d, then turned
        angle = 1 / factor * 1 / theta ** (torch.arange(0, 16, 2).float() / 16)  # (d/2,)
        cos, sin = (torch.cat((angle, angle)) * 3).cos(), (torch.cat((angle, angle)) * 3).sin()  # position 3
        turned3 = q[..., 3, :] * cos + torch.cat((-q[..., 3, 8:], q[..., 3, :8]), -1) * sin
        torch.testing.assert_close(rotated[..., 3, :], turned3)


def test_modernbert_sees_a_two_sided_window_and_reads_layer_0_unnormed(load):
    model, tokenizer, _ = load("modernbert")
    c = model.config
    assert [c.window_of(i) for i in range(4)] == [None, 4, 4, None]  # local_attention 6: 3 keys either side
    assert isinstance(model.layers[0].attention_norm, torch.nn.Identity)
    assert model.embeddings.LayerNorm.bias is None and model.layers[1].attention.qkv_proj.bias is None
    enc = encode(tokenizer, SENTENCE)
    with torch.no_grad():
        maps = model(enc.input_ids, enc.attention_mask).attentions
    far = (torch.arange(enc.input_ids.size(1))[:, None] - torch.arange(enc.input_ids.size(1))).abs() > 3  # (L, L)
    assert torch.all(maps[1][0][:, far] == 0) and torch.all(maps[2][0][:, ~far] > 0)
    assert torch.all(maps[0][0] > 0) and torch.all(maps[3][0] > 0)  # full layers: every key


def test_deberta_buckets_are_exact_near_and_log_spaced_far():
    buckets = log_buckets(40, 8, 16)
    assert buckets[10, 7].item() == 3 and buckets[7, 10].item() == -3  # query - key, exact within 4
    assert torch.equal(buckets, -buckets.T) and buckets[39, 0].item() == 10  # log-spaced: 39 away is bucket 10
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    distance = torch.arange(40)[:, None] - torch.arange(40)
    assert torch.equal(buckets, make_log_bucket_position(distance, 8, 16).long())
    assert torch.equal(log_buckets(6, 0, 0), torch.arange(6)[:, None] - torch.arange(6))


@pytest.mark.parametrize("case", ["deberta-v2", "deberta-v2-c2p"])
def test_debertas_three_terms_add_up_to_the_scores_it_softmaxes(load, case):
    model, tokenizer, theirs = load(case)
    input_ids, attention_mask = test_decoders.inputs(tokenizer, "right padded")
    terms = layer_terms(model, input_ids, attention_mask, layer=1)
    B, H, L = input_ids.size(0), 4, input_ids.size(1)
    assert terms.c2c.shape == terms.c2p.shape == terms.p2c.shape == terms.total.shape == (B, H, L, L)
    assert terms.c2p.abs().max() > 0.1 and (terms.p2c.abs().max() > 0.1) == (case == "deberta-v2")
    masked = terms.total.masked_fill(~attention_mask.bool()[:, None, None, :], float("-inf"))
    torch.testing.assert_close(terms.probs, torch.softmax(masked, -1).nan_to_num(0.0))
    with torch.no_grad():
        ref = theirs(input_ids, attention_mask=attention_mask, output_attentions=True).attentions[1]
    keep = attention_mask[0].bool()
    torch.testing.assert_close(terms.probs[0][:, keep][:, :, keep], ref[0][:, keep][:, :, keep], atol=1e-6, rtol=0)
    trace = trace_layer(model, input_ids[:1], attention_mask[:1], layer=1)
    assert {"c2p", "scores", "masked_scores"} <= set(trace.names)
    assert trace.scaling == pytest.approx((8 * (3 if case == "deberta-v2" else 2)) ** -0.5)


def test_layer_terms_says_plainly_when_the_model_is_not_deberta(load):
    model, tokenizer, _ = load("modernbert")
    with pytest.raises(ValueError, match="no disentangled attention"):
        layer_terms(model, encode(tokenizer, SENTENCE).input_ids)


@pytest.mark.parametrize(
    "family, values, words",
    [
        ("phi3", {"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}, "longrope"),
        ("phi3", {"rope_scaling": {"type": "su", "short_factor": [1.0], "long_factor": [1.0]}}, "longrope"),
        ("gemma3_text", {"layer_types": ["full_attention", "full_attention", "sliding_attention"]}, "layer_types"),
        ("gemma3_text", {"use_bidirectional_attention": True}, "use_bidirectional_attention"),
        ("gemma3_text", {"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
        (
            "gemma3_text",
            {"rope_parameters": {"sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1.0}}},
            "sliding layers",
        ),
        ("modernbert", {"layer_types": ["full_attention", "sliding_attention", "full_attention"]}, "layer_types"),
        ("deberta-v2", {"share_att_key": False}, "share_att_key"),
        ("deberta-v2", {"conv_kernel_size": 3}, "conv_kernel_size"),
        ("deberta-v2", {"position_biased_input": True}, "position_biased_input"),
        ("deberta-v2", {"pos_att_type": ["c2p", "p2p"]}, "pos_att_type"),
    ],
)
def test_config_values_not_followed_are_refused_by_name(tmp_path, family, values, words):
    folder = test_config_checks.edited(make_more(tmp_path / family, family), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)
