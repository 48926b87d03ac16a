"""Gemma, Gemma2 and Phi, loaded from tiny random task checkpoints, give transformers' eager numbers, single and
padded; what each declares (Gemma's (1 + w) norms and scaled embeddings, Gemma2's capped scores, alternating
windows and norms after each sub-block, Phi's one shared norm, partial rotary and `dense`) holds, the shape-flow
trace records it, and a config value the code does not follow is refused by name."""

import copy

import pytest
import test_config_checks
import test_decoders
import torch
from families import make_more, reference
from parity import parity_suite
from safetensors.torch import load_file, save_file

from attention import ModelLoadError, encode, load_model
from attention.core.request import MapRequest
from attention.models.parts import OffsetRMSNorm
from attention.tracing.trace import trace_layer
from viz.shapeflow import shape_flow

CASES = {  # id -> (family, config overrides)
    "gemma": ("gemma", {}),
    "gemma-mqa": ("gemma", dict(num_key_value_heads=1)),
    "gemma2": ("gemma2", {}),
    "gemma2-uncapped": ("gemma2", dict(attn_logit_softcapping=None, query_pre_attn_scalar=16)),
    "phi": ("phi", {}),
    "phi-qk-layernorm": ("phi", dict(qk_layernorm=True, num_key_value_heads=2)),
}
SENTENCE = test_decoders.SENTENCES[0]


load, test_parity_with_transformers = parity_suite(CASES)


def test_gemma_scales_its_embeddings_in_their_dtype_and_norms_by_one_plus_weight(load):
    model, tokenizer, _ = load("gemma")
    c = model.config
    assert (c.norms.norm, c.head_size, c.feed_forward.hidden_act, c.embeddings.scale_embedding_in_dtype) == (
        "rms_norm_offset",
        16,
        "gelu_pytorch_tanh",
        True,
    )
    norm = model.layers[0].attention_norm
    assert isinstance(norm, OffsetRMSNorm)
    x = torch.randn(2, 3, 32)
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.norms.layer_norm_eps) * (1 + norm.weight)
    torch.testing.assert_close(norm(x), expected)
    ids = encode(tokenizer, SENTENCE).input_ids
    embeddings = copy.deepcopy(model.embeddings).to(torch.bfloat16)  # a copy: the module's model stays float32
    with torch.no_grad():
        scaled = embeddings(ids, None)
    words = embeddings.word_embeddings.weight[ids]  # (1, L, D) bfloat16
    assert torch.equal(scaled, words * torch.tensor(32**0.5).to(torch.bfloat16))  # 5.65625, not 5.65685...
    assert not torch.equal(scaled, words * 32**0.5)


def test_gemma2_caps_its_scores_alternates_windows_and_norms_each_sub_blocks_output(load):
    model, tokenizer, _ = load("gemma2")
    c = model.config
    assert [c.window_of(i) for i in range(3)] == [5, None, 5]
    assert (
        c.attention.attn_logit_softcapping,
        c.attention.query_pre_attn_scalar,
        c.norms.pre_norm,
        c.norms.norm_after_sublayer,
    ) == (
        2.0,
        4,
        True,
        True,
    )
    layer = model.layers[0]
    assert all(isinstance(getattr(layer, n), OffsetRMSNorm) for n in ("attention_post_norm", "output_post_norm"))
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=0)
    q, k = trace.tensor("q_rot"), trace.tensor("k_shared")
    raw = q @ k.transpose(-2, -1) * 4**-0.5  # (1, H, L, L)
    assert raw.abs().max() > 2  # the cap changes something
    torch.testing.assert_close(trace.tensor("softcap"), torch.tanh(raw / 2.0) * 2.0)
    assert trace.tensor("softcap").abs().max() <= 2.0
    assert shape_flow(trace).layout.annotations
    with torch.no_grad():
        full = model(enc.input_ids, enc.attention_mask)
        some = model(enc.input_ids, enc.attention_mask, request=MapRequest({1}))  # layers 0 and 2: no map kept
    assert some.attentions[0] is None and some.attentions[2] is None
    torch.testing.assert_close(some.attentions[1], full.attentions[1])
    torch.testing.assert_close(some.last_hidden_state, full.last_hidden_state)
    rows = torch.tensor([[3, 0, 7]])
    with torch.no_grad():
        picked = model(
            enc.input_ids, enc.attention_mask, request=MapRequest(rows=rows)
        )  # capped scores: rows of the full map
    for layer_map, full_map in zip(picked.attentions, full.attentions):
        torch.testing.assert_close(layer_map, full_map[:, :, rows[0]])


def test_phi_runs_attention_and_feed_forward_on_one_norm_and_turns_half_of_each_head(load):
    model, tokenizer, _ = load("phi")
    c, layer = model.config, model.layers[1]
    assert (c.rotary_dim, c.head_size, c.norms.parallel_residual, c.norms.one_block_norm) == (4, 8, True, True)
    assert not hasattr(layer, "output_norm") and layer.attention.o_proj.bias is not None
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=1)
    assert trace.step("output").weights == "self_attn.dense"
    before, after = trace.tensor("q_heads"), trace.tensor("q_rot")
    assert torch.equal(after[..., 4:], before[..., 4:]) and not torch.allclose(after[..., 1:, :4], before[..., 1:, :4])
    x = trace.tensor("block_input")
    with torch.no_grad():
        normed = layer.attention_norm(x)
        expected = x + trace.tensor("output") + layer.feed_forward(normed)  # (1, L, D)
        out = model(enc.input_ids, enc.attention_mask)
    torch.testing.assert_close(out.hidden_states[2], model.final_norm(expected))  # the last layer's: after final_norm
    assert shape_flow(trace).layout.annotations


@pytest.mark.parametrize(
    "family, values, words",
    [
        ("gemma", {"use_bidirectional_attention": True}, "use_bidirectional_attention"),
        ("gemma", {"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}}, "yarn"),
        ("gemma2", {"layer_types": ["full_attention", "sliding_attention", "full_attention"]}, "layer_types"),
        ("gemma2", {"attn_logit_softcapping": -1.0}, "attn_logit_softcapping"),
        ("phi", {"rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.1}}, "rotary fraction"),
        ("phi", {"qk_layernorm": "yes"}, "qk_layernorm"),
    ],
)
def test_config_values_not_followed_are_refused_by_name(tmp_path, family, values, words):
    folder = test_config_checks.edited(make_more(tmp_path / family, family), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_loading_stays_strict_about_gemma2s_extra_norms(tmp_path):
    folder = make_more(tmp_path / "gemma2", "gemma2")
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.layers.1.post_feedforward_layernorm.weight"]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert "post_feedforward_layernorm" in str(err.value) or "output_post_norm" in str(err.value)


def test_a_gemma_config_saying_gelu_runs_the_tanh_approximation_as_transformers_does(tmp_path):
    """The released Gemma checkpoints say hidden_act "gelu" (and hidden_activation "gelu_pytorch_tanh")."""
    folder = test_config_checks.edited(
        make_more(tmp_path / "gemma", "gemma"), hidden_act="gelu", hidden_activation="gelu_pytorch_tanh"
    )
    model, tokenizer = load_model(folder)
    assert model.config.feed_forward.hidden_act == "gelu_pytorch_tanh"
    ids = tokenizer("The animal didn't cross the street.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids).last_hidden_state, reference(folder)(ids).last_hidden_state, atol=1e-5, rtol=0
        )
