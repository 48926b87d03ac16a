"""Llama, Mistral and Qwen2, loaded from tiny random sharded causal-LM checkpoints, give transformers'
numbers for every key/value head count; and what they declare (rotary positions and their scaling,
grouped K/V, Qwen2's biases, Mistral's window, head_dim, tied embeddings) holds."""

import json

import pytest
import torch
from families import DECODERS, make_family, reference

from attention import ModelLoadError, encode, load_model
from attention.analysis.ablation import ablate
from attention.analysis.gqa import kv_head_options, to_grouped
from attention.analysis.query_key import query_key
from attention.config import ModelConfig
from attention.core.request import MapRequest
from attention.core.rotary import inverse_frequencies
from attention.runs.run import run_padded_batch, run_sentence
from attention.tracing.trace import head_matrix, trace_layer
from viz.shapeflow import shape_flow

SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]
KV_HEADS = {1: "MQA", 2: "GQA", 4: "MHA"}  # of 4 query heads


def differences(ours, theirs, input_ids, attention_mask):
    """Max |Δ| of every hidden state and attention map at the real positions, after checking counts."""
    with torch.no_grad():
        mine = ours(input_ids, attention_mask)
        ref = theirs(input_ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=True)
    n_layers = ours.config.num_hidden_layers
    assert len(mine.hidden_states) == len(ref.hidden_states) == n_layers + 1
    assert len(mine.attentions) == len(ref.attentions) == n_layers
    assert mine.attentions[0].shape == (input_ids.shape[0], ours.config.num_attention_heads, *input_ids.shape[1:] * 2)
    torch.testing.assert_close(mine.last_hidden_state, mine.hidden_states[-1], atol=0, rtol=0)
    hidden = attention = 0.0
    for b, keep in enumerate(attention_mask.bool()):
        for a, r in zip(mine.hidden_states, ref.hidden_states):
            hidden = max(hidden, (a[b, keep] - r[b, keep]).abs().max().item())
        for a, r in zip(mine.attentions, ref.attentions):
            attention = max(attention, (a[b][:, keep][:, :, keep] - r[b][:, keep][:, :, keep]).abs().max().item())
            assert torch.all(a[b][:, keep][:, :, ~keep] == 0)  # padding keys get no attention at all
    return hidden, attention


def inputs(tokenizer, kind):
    if kind == "sentence":
        enc = encode(tokenizer, SENTENCES[0])
        return enc.input_ids, enc.attention_mask
    tokenizer.padding_side = kind.split()[0]
    try:
        batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    finally:
        tokenizer.padding_side = "right"
    return batch["input_ids"], batch["attention_mask"]


@pytest.fixture(scope="module", params=[(f, kv) for f in DECODERS for kv in KV_HEADS], ids=lambda p: f"{p[0]}-kv{p[1]}")
def loaded(request, tmp_path_factory):
    family, kv = request.param
    folder = make_family(tmp_path_factory.mktemp(family), family, num_key_value_heads=kv, max_shard_size="20KB")
    model, tokenizer = load_model(folder)
    return family, kv, model, tokenizer, reference(folder)


@pytest.mark.parametrize("kind", ["sentence", "left padded", "right padded"])
def test_parity_with_transformers(loaded, kind):
    family, kv, model, tokenizer, theirs = loaded
    input_ids, attention_mask = inputs(tokenizer, kind)
    hidden, attention = differences(model, theirs, input_ids, attention_mask)
    print(f"\n{family:8} {KV_HEADS[kv]:4} {kind:13} max|Δ hidden| {hidden:.2e}  max|Δ attention| {attention:.2e}")
    assert hidden <= 1e-5 and attention <= 1e-6, (family, kv, kind, hidden, attention)


def test_checkpoint_is_read_from_shards_and_declares_its_family(loaded):
    family, kv, model, _, _ = loaded
    c = model.config
    assert model.load_report.weights_file == "model.safetensors.index.json"
    assert model.load_report.ignored_keys == ("lm_head.weight",)  # not tied in these checkpoints
    assert (c.model_type, c.positions.position_embedding_type, c.norms.norm, c.kv_heads, c.head_size) == (
        family,
        "rotary",
        "rms_norm",
        kv,
        8,
    )
    assert c.kv_head_of == tuple(h // (4 // kv) for h in range(4))
    assert not hasattr(model.embeddings, "position_embeddings")
    biases = {name.rsplit(".", 2)[-2] for name, _ in model.named_parameters() if name.endswith("bias")}
    assert biases == ({"q_proj", "k_proj", "v_proj"} if family == "qwen2" else set())
    assert model.layers[0].attention.k_proj.out_features == kv * 8
    assert c.attention.sliding_window == (5 if family == "mistral" else None)


def test_mistral_window_is_shorter_than_the_sentence(tmp_path):
    model, tokenizer = load_model(make_family(tmp_path / "mistral", "mistral"))
    enc = encode(tokenizer, SENTENCES[0])
    with torch.no_grad():
        maps = model(enc.input_ids, enc.attention_mask).attentions
    L = enc.input_ids.shape[1]
    assert L > 5
    for probs in maps:  # a query sees itself and the 4 keys before it, nothing older
        assert torch.all(probs[0].tril(diagonal=-5) == 0) and torch.all(probs[0].triu(diagonal=1) == 0)
        assert torch.all(probs[0].diagonal(offset=-4, dim1=1, dim2=2) > 0)


def test_trace_ablation_gqa_runs_and_query_key(loaded):
    family, kv, model, tokenizer, _ = loaded
    enc = encode(tokenizer, SENTENCES[0])
    L = enc.input_ids.shape[1]
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=1)
    names = trace.names
    assert names.index("k_heads") < names.index("q_rot") < names.index("k_rot") < names.index("scores")
    kv_letter = "G" if kv < 4 else "H"
    assert trace.step("q_rot").dims == ("B", "H", "L", "d") and trace.step("k_rot").dims == ("B", kv_letter, "S", "d")
    assert "RoPE" in trace.step("q_rot").op and "rotate(q" in trace.step("q_rot").code
    assert ("k_shared" in names) == (kv < 4)
    figure = shape_flow(trace)
    tops = {a.name: a.y for a in figure.layout.annotations if a.name in ("k_heads", "q_rot", "k_rot", "scores")}
    assert tops["k_heads"] < tops["q_rot"] == tops["k_rot"] < tops["scores"]  # one row, between heads and scores
    assert any("Q rotated by position" in a.text for a in figure.layout.annotations if a.name == "q_rot")
    matrix, rows, cols = head_matrix(trace, "k_rot", head=3)
    assert (rows, cols) == ("S", "d")
    torch.testing.assert_close(torch.from_numpy(matrix), trace.step("k_rot").tensor[0, model.config.kv_head_of[3]])
    qk = query_key(trace, head=2, query=L - 1)
    assert abs(qk.product.sum(-1) * qk.scaling - qk.scores).max() < 1e-5

    result = ablate(model, enc.input_ids, enc.attention_mask, head_mask=[[1, 0, 1, 1], [1] * 4])
    assert result.attention_change[0, 1] > 0 and result.attention_change[0, 0] == 0

    assert kv_head_options(4, kv) == [g for g in (4, 2, 1) if kv % g == 0]
    with torch.no_grad():
        base = model(enc.input_ids, enc.attention_mask)
        same = to_grouped(model, 4)(enc.input_ids, enc.attention_mask)  # the shared heads repeated: the same
        shared = to_grouped(model, 1)
        pooled = shared(enc.input_ids, enc.attention_mask)
    torch.testing.assert_close(same.attentions[1], base.attentions[1], atol=1e-6, rtol=0)
    assert shared.config.kv_heads == 1 == shared.layers[0].attention.num_kv_heads and model.config.kv_heads == kv
    assert pooled.attentions[0].shape == base.attentions[0].shape

    run = run_sentence(model, tokenizer, SENTENCES[0])
    assert run.attentions.shape[:3] == (2, 4, L) and run.tokens[0] == "<s>"
    batch = run_padded_batch(model, tokenizer, SENTENCES)
    assert batch.attentions.shape[1] == 2 and batch.mask.sum(1).tolist()[0] > batch.mask.sum(1).tolist()[1]


def test_regrouping_a_grouped_model_across_its_groups_is_refused(tmp_path):
    model, _ = load_model(
        make_family(tmp_path / "llama", "llama", num_attention_heads=6, num_key_value_heads=3, hidden_size=48)
    )
    assert kv_head_options(6, 3) == [3, 1]
    with pytest.raises(
        ValueError,
        match="already shares 3 key/value heads among its 6 query heads: num_kv_heads must divide 3 \\(one of 3, 1\\)",
    ):
        to_grouped(model, 2)


def check_parity(folder, family="llama"):
    model, tokenizer = load_model(folder)
    input_ids, attention_mask = inputs(tokenizer, "left padded")
    hidden, attention = differences(model, reference(folder), input_ids, attention_mask)
    assert hidden <= 1e-5 and attention <= 1e-6, (hidden, attention)
    return model


@pytest.mark.parametrize(
    "scaling",
    [
        dict(rope_type="linear", factor=2.5),
        dict(rope_type="dynamic", factor=2.0),
        dict(
            rope_type="llama3",
            factor=8.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=16,
        ),
        dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16),  # the ramp's ends truncated
        dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, beta_fast=8.0, truncate=False),
        dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, attention_factor=1.5),
        dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, mscale=2.0, mscale_all_dim=1.0),
    ],
)
def test_rope_scaling_types_match_transformers(tmp_path, scaling):
    parameters = dict(scaling, rope_theta=50.0)  # a small theta: llama3's three wavelength bands all occur
    model = check_parity(make_family(tmp_path / "llama", "llama", rope_parameters=parameters))
    assert (
        model.config.positions.rope_type,
        model.config.positions.rope_factor,
        model.config.positions.rope_theta,
    ) == (
        scaling["rope_type"],
        scaling["factor"],
        50.0,
    )


def test_dynamic_frequencies_beyond_the_positions_are_transformers(tmp_path):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    theirs = LlamaConfig(
        hidden_size=32,
        num_attention_heads=4,
        max_position_embeddings=64,
        rope_parameters=dict(rope_type="dynamic", factor=3.0, rope_theta=1000.0),
    )
    ours = ModelConfig(
        hidden_size=32,
        num_attention_heads=4,
        max_position_embeddings=64,
        position_embedding_type="rotary",
        rope_type="dynamic",
        rope_factor=3.0,
        rope_theta=1000.0,
    )
    for seq_len in (10, 64, 100):
        expected, _ = ROPE_INIT_FUNCTIONS["dynamic"](theirs, None, seq_len=seq_len)
        torch.testing.assert_close(inverse_frequencies(ours, seq_len), expected, atol=0, rtol=1e-6)


def test_older_config_names_rope_theta_and_rope_scaling(tmp_path):
    folder = make_family(tmp_path / "llama", "llama")
    config = json.loads((folder / "config.json").read_text())
    config.pop("rope_parameters")
    config.update(rope_theta=250.0, rope_scaling={"type": "linear", "factor": 4.0})
    (folder / "config.json").write_text(json.dumps(config))
    model, _ = load_model(folder)
    assert (
        model.config.positions.rope_theta,
        model.config.positions.rope_type,
        model.config.positions.rope_factor,
    ) == (250.0, "linear", 4.0)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(rope_parameters=dict(rope_type="longrope", factor=2.0, rope_theta=1e4)),
            "rope_scaling type 'longrope' is not supported",
        ),
        (dict(rope_parameters=dict(rope_type="llama3", factor=8.0, rope_theta=1e4)), "'llama3' needs low_freq_factor"),
        (
            dict(rope_parameters=dict(rope_type="yarn", factor=2.0, rope_theta=1e4)),
            "'yarn' needs original_max_position",
        ),
        (
            dict(rope_parameters=dict(rope_type="default", rope_theta=1e4, partial_rotary_factor=0.5)),
            "partial_rotary_factor",
        ),
        (dict(head_dim=7), "head_dim 7 is odd"),
    ],
)
def test_a_rope_config_this_model_cannot_follow_is_one_clear_error(tmp_path, change, message):
    folder = make_family(tmp_path / "llama", "llama")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ModelLoadError, match=message):
        load_model(folder)


def test_head_dim_other_than_hidden_over_heads(tmp_path):
    model = check_parity(make_family(tmp_path / "llama", "llama", head_dim=12))
    assert model.config.head_size == 12 and model.layers[0].attention.q_proj.out_features == 48
    assert model.layers[0].attention.scaling == 12**-0.5


def test_tied_word_embeddings(tmp_path):
    model = check_parity(make_family(tmp_path / "llama", "llama", tie_word_embeddings=True))
    assert model.load_report.ignored_keys == ()


def test_qwen2_sliding_window_in_later_layers(tmp_path):
    model = check_parity(
        make_family(tmp_path / "qwen2", "qwen2", use_sliding_window=True, sliding_window=4, max_window_layers=1)
    )
    assert (model.config.attention.sliding_window, model.config.attention.first_sliding_layer) == (4, 1)
    assert model.config.window_of(0) is None and model.config.window_of(1) == 4


def test_base_model_without_prefix(tmp_path):
    model = check_parity(make_family(tmp_path / "mistral", "mistral", model_class="MistralModel"))
    assert model.load_report.weights_file == "model.safetensors" and model.load_report.ignored_keys == ()


@pytest.mark.parametrize("family", DECODERS)
def test_maps_only_where_asked(tmp_path, family):
    """Layers whose maps are not asked for run torch's fused attention: same hidden states, no map."""
    model, tokenizer = load_model(make_family(tmp_path / family, family, num_hidden_layers=3))
    input_ids, attention_mask = inputs(tokenizer, "left padded")
    with torch.no_grad():
        full = model(input_ids, attention_mask)
        some = model(input_ids, attention_mask, request=MapRequest({1}))
    assert some.attentions[0] is None and some.attentions[2] is None
    torch.testing.assert_close(some.attentions[1], full.attentions[1], atol=1e-6, rtol=0)
    real = attention_mask.bool()
    for a, b in zip(some.hidden_states, full.hidden_states):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a[real], b[real], atol=1e-5, rtol=0)
