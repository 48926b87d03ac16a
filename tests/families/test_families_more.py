"""XLM-RoBERTa, Qwen3, GPT-NeoX, OPT, OLMo2 and SmolLM3, loaded from tiny random task checkpoints, give
transformers' eager numbers, single and padded; what each declares (Q/K norms, partial rotary, a
per-head fused Q·K·V, parallel residuals, OPT's positions and projections) holds, and the shape-flow
trace records it."""

import pytest
import test_config_checks
import test_decoders
import torch
from families import make_more
from parity import parity_suite

from attention import ModelLoadError, encode, load_model
from attention.analysis.gqa import to_grouped
from attention.models.residuals import Parallel
from attention.tracing.trace import head_matrix, trace_layer
from viz.shapeflow import shape_flow

CASES = {  # id -> (family, config overrides)
    "xlm-roberta": ("xlm-roberta", {}),
    "qwen3": ("qwen3", {}),
    "gpt_neox": ("gpt_neox", {}),
    "gpt_neox-sequential": ("gpt_neox", dict(use_parallel_residual=False)),
    "opt": ("opt", {}),
    "olmo2": ("olmo2", {}),
    "smollm3": ("smollm3", {}),  # layer 1 without positions (NoPE)
    "smollm3-first-nope": ("smollm3", dict(no_rope_layers=[0, 1])),
    "opt-post-norm-projected": ("opt", dict(do_layer_norm_before=False, word_embed_proj_dim=16)),  # as OPT-350m
}
SENTENCE = test_decoders.SENTENCES[0]


load, test_parity_with_transformers = parity_suite(CASES)


def test_qwen3_normalises_each_heads_q_and_k_before_rotary(load):
    model, tokenizer, _ = load("qwen3")
    c = model.config
    assert (c.attention.qk_norm, c.head_size, c.num_attention_heads * c.head_size, c.hidden_size) == (
        "head",
        16,
        64,
        32,
    )
    assert model.layers[0].attention.q_norm.weight.shape == (16,)
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=1)
    names = trace.names
    assert names.index("q_heads") < names.index("q_norm") < names.index("q_rot")
    assert names.index("k_heads") < names.index("k_norm") < names.index("k_rot")
    assert trace.step("q_norm").dims == ("B", "H", "L", "d") and trace.step("k_norm").dims == ("B", "G", "S", "d")
    assert "each head's d" in trace.step("k_norm").op and "attention.k_norm(k)" in trace.step("k_norm").code
    q = trace.tensor("q_heads")
    weight = model.layers[1].attention.q_norm.weight
    normed = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + c.norms.layer_norm_eps) * weight
    torch.testing.assert_close(trace.tensor("q_norm"), normed)
    matrix, rows, cols = head_matrix(trace, "k_norm", head=3)
    assert (rows, cols) == ("S", "d")
    torch.testing.assert_close(torch.from_numpy(matrix), trace.tensor("k_norm")[0, c.kv_head_of[3]])
    assert {a.name for a in shape_flow(trace).layout.annotations} >= {"q_norm", "k_norm"}


@pytest.mark.parametrize("case", ["gpt_neox", "gpt_neox-sequential"])
def test_gpt_neox_reads_its_fused_projection_per_head_and_turns_a_share_of_each_head(load, case):
    model, tokenizer, _ = load(case)
    c = model.config
    assert (c.positions.rotary_fraction, c.rotary_dim, c.head_size, c.attention.qkv_per_head) == (0.5, 4, 8, True)
    assert all(isinstance(layer.residual, Parallel) == (case == "gpt_neox") for layer in model.layers)
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=1)
    assert "q_proj" not in trace and trace.names[:3] == ["block_input", "input", "qkv_proj"]
    assert trace.step("qkv_proj").weights == "attention.query_key_value"
    qkv = trace.tensor("qkv_proj")[0]  # (L, H·3·d): head h's q, k, v are columns 24h:24h+8, +8:+16, +16:+24
    torch.testing.assert_close(trace.tensor("k_view")[0, :, 2], qkv[:, 56:64])
    assert trace.step("v_view").dims == ("B", "S", "H", "d") and "each head's" in trace.step("v_view").op
    matrix, rows, cols = head_matrix(trace, "qkv_proj", head=2)
    assert (rows, cols) == ("L", "3·d")
    torch.testing.assert_close(torch.from_numpy(matrix), qkv[:, 48:72])
    before, after = trace.tensor("q_heads"), trace.tensor("q_rot")
    assert torch.equal(after[..., 4:], before[..., 4:])  # the last half of each head is not turned
    assert not torch.allclose(after[..., 1:, :4], before[..., 1:, :4])  # the first half is, after position 0
    assert shape_flow(trace).layout.annotations


@pytest.mark.parametrize(
    "family, values, words",
    [
        ("qwen3", {"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}}, "yarn"),
        (
            "qwen3",
            {"layer_types": ["sliding_attention", "full_attention"], "use_sliding_window": True, "sliding_window": 4},
            "layer_types",
        ),
        ("gpt_neox", {"rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.1}}, "rotary fraction"),
        ("gpt_neox", {"use_parallel_residual": "yes"}, "use_parallel_residual"),
        ("opt", {"layer_norm_elementwise_affine": False}, "layer_norm_elementwise_affine"),
        ("opt", {"activation_function": "mystery"}, "hidden_act 'mystery'"),
    ],
)
def test_config_values_not_followed_are_refused_by_name(tmp_path, family, values, words):
    folder = test_config_checks.edited(make_more(tmp_path / family, family), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("case", ["opt", "opt-post-norm-projected"])
def test_opt_declares_its_norms_positions_and_projections(load, case):
    model, tokenizer, _ = load(case)
    c, projected = model.config, case != "opt"
    assert (c.norms.pre_norm, c.norms.final_norm, c.positions.position_offset, c.positions.positions_from_mask) == (
        not projected,
        not projected,
        2,
        True,
    )
    assert model.embeddings.position_embeddings.weight.shape == (64 + 2, 32)  # D wide, after project_in
    assert hasattr(model.embeddings, "project") == hasattr(model, "project_out") == projected
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=0)
    assert ("embed_proj" in trace) == projected and trace.step("output").weights == "self_attn.out_proj"
    with torch.no_grad():
        out = model(enc.input_ids, enc.attention_mask)
    assert out.last_hidden_state.shape[-1] == (16 if projected else 32)  # project_out: back to word_embed_proj_dim
    assert shape_flow(trace).layout.annotations


def test_olmo2_normalises_all_heads_q_and_k_at_once_and_each_sub_blocks_output(load):
    model, tokenizer, _ = load("olmo2")
    c, layer = model.config, model.layers[1]
    assert (c.attention.qk_norm, c.norms.pre_norm, c.norms.norm_after_sublayer) == ("projection", False, True)
    assert (layer.attention.q_norm.weight.shape, layer.attention.k_norm.weight.shape) == ((32,), (16,))
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=1)
    names = trace.names
    assert names.index("k_proj") < names.index("k_norm") < names.index("k_view") < names.index("k_rot")
    assert trace.step("q_norm").dims == ("B", "L", "H·d") and trace.step("k_norm").dims == ("B", "S", "G·d")
    assert "all heads' G·d" in trace.step("k_norm").op
    k = trace.tensor("k_proj")
    normed = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + c.norms.layer_norm_eps) * layer.attention.k_norm.weight
    torch.testing.assert_close(trace.tensor("k_norm"), normed)
    matrix, rows, cols = head_matrix(trace, "k_norm", head=3)  # query head 3 reads K/V head 1: columns 8:16
    assert (rows, cols) == ("S", "d")
    torch.testing.assert_close(torch.from_numpy(matrix), trace.tensor("k_norm")[0, :, 8:16])
    assert shape_flow(trace).layout.annotations


@pytest.mark.parametrize("case", ["olmo2", "qwen3"])
def test_grouping_keeps_the_q_and_k_norms(load, case):
    """to_grouped as many K/V heads as query heads is the model itself, its Q and K norms kept (OLMo2's over all
    heads, Qwen3's over each head); one K/V head: OLMo2's K norm is d wide, the mean of its heads' weights."""
    model, tokenizer, _ = load(case)
    enc = encode(tokenizer, SENTENCE)
    H, d = model.config.num_attention_heads, model.layers[1].attention.head_dim
    with torch.no_grad():
        base, same = model(enc.input_ids).attentions, to_grouped(model, H)(enc.input_ids).attentions
    for theirs, ours in zip(base, same, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    one = to_grouped(model, 1).layers[1].attention
    weight = model.layers[1].attention.k_norm.weight.detach()  # (G·d,) for OLMo2, (d,) for Qwen3
    torch.testing.assert_close(one.k_norm.weight.detach(), weight.view(-1, d).mean(0))
    assert (
        one.k_norm.normalized_shape == (d,) and one.q_norm.weight.shape == model.layers[1].attention.q_norm.weight.shape
    )


@pytest.mark.parametrize(("case", "nope"), [("smollm3", (1,)), ("smollm3-first-nope", (0,))])
def test_smollm3_leaves_its_nope_layers_unturned(load, case, nope):
    model, tokenizer, theirs = load(case)
    assert model.config.positions.nope_layers == nope
    enc = encode(tokenizer, SENTENCE)
    for layer in range(2):  # the shape flow shows rotary only where the layer has it
        trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=layer)
        assert ("q_rot" in trace.names and "k_rot" in trace.names) == (layer not in nope), (layer, trace.names)
        assert ("no positions in this layer (NoPE)" in trace.step("scores").op) == (layer in nope)
    # the part matters: the same weights with every layer turned are another model
    turned = type(model)(model.config.replace(nope_layers=())).eval()
    turned.load_state_dict(model.state_dict())
    input_ids, attention_mask = test_decoders.inputs(tokenizer, "sentence")
    hidden, _ = test_decoders.differences(turned, theirs, input_ids, attention_mask)
    assert hidden > 1e-3


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (dict(use_sliding_window=True, sliding_window=4), "use_sliding_window"),
        (dict(no_rope_layers=[1]), "no_rope_layers"),
        (dict(no_rope_layers=[1, 2]), "no_rope_layers"),
        (dict(no_rope_layers=None, no_rope_layer_interval=0), "no_rope_layer_interval"),
    ],
)
def test_smollm3_options_not_followed_are_refused_by_name(tmp_path, values, words):
    folder = test_config_checks.edited(make_more(tmp_path / "smollm3", "smollm3"), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)
