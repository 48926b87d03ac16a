"""Gemma 4 (gemma4_text), loaded from tiny random Gemma4ForCausalLM checkpoints, gives transformers' eager numbers,
single and padded: RMSNorms times their weight, unscaled scores, a weight-free norm on the values, wider heads on the
full layers turned by proportional rotary on a share of their pairs, per-layer inputs and each layer's saved scalar;
options it does not follow are refused by name."""

import copy

import numpy as np
import pytest
import test_config_checks
import test_decoders
import test_mixing
import torch
from families import make_more, reference
from parity import parity_suite

from attention import ModelLoadError, encode, load_model
from attention.analysis.gqa import to_grouped
from attention.analysis.mixing import value_zeroing
from attention.core.rotary import inverse_frequencies
from attention.runs.run import run_sentence
from attention.tracing.trace import trace_layer

HALF_TURNED = {  # half of the full layers' pairs turned, on a small base so that the turn shows in a short sentence
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 100.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
}
CASES = {  # id -> (family, config overrides)
    "gemma4": ("gemma4_text", {}),  # layers 0 and 2 windowed to 4 keys, 1 and 3 full with 16-wide heads
    "gemma4-half-turned": ("gemma4_text", dict(rope_parameters=HALF_TURNED)),
    "gemma4-no-per-layer-inputs": ("gemma4_text", dict(hidden_size_per_layer_input=0)),  # the layer scalar alone
}
SENTENCE = test_decoders.SENTENCES[0]


load, test_parity_with_transformers = parity_suite(CASES)


def test_full_layers_have_wider_heads_and_windowed_layers_see_the_latest_keys(load):
    model, tokenizer, theirs = load("gemma4")
    assert [layer.attention.head_dim for layer in model.layers] == [8, 16, 8, 16]
    assert tuple(model.config.window_of(i) for i in range(4)) == (4, None, 4, None)
    assert [float(layer.layer_scalar) for layer in model.layers] == [float(t.layer_scalar) for t in theirs.layers]
    run = run_sentence(model, tokenizer, SENTENCE)
    L = len(run.tokens)
    far = np.tril(np.ones((L, L), dtype=bool), k=-4)  # keys 4 or more positions back: outside a window of 4
    for layer in range(4):
        assert (np.abs(run.attentions[layer][:, far]).max() == 0) == (layer % 2 == 0), layer


def test_a_config_without_layer_types_reads_them_as_transformers_does(tmp_path):
    """No layer_types in config.json: each sixth layer full, and the last one full whatever the pattern says (here the
    fourth of four); the model then equals transformers' reading of the same folder."""
    folder = make_more(tmp_path / "gemma4", "gemma4_text", layer_types=None)  # saved [s, s, s, f]
    folder = test_config_checks.edited(folder, layer_types=None, sliding_window=3)
    model, tokenizer = load_model(folder)
    assert tuple(model.config.window_of(i) for i in range(4)) == (3, 3, 3, None)
    assert [layer.attention.head_dim for layer in model.layers] == [8, 8, 8, 16]
    input_ids, attention_mask = test_decoders.inputs(tokenizer, "left padded")
    hidden, attention = test_decoders.differences(model, reference(folder), input_ids, attention_mask)
    assert hidden <= 1e-5 and attention <= 1e-6, (hidden, attention)


def test_proportional_rotary_turns_the_first_pairs_at_frequencies_over_the_whole_width(load):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    model, _, theirs = load("gemma4-half-turned")
    full = model.config.for_layer(1)
    ours = inverse_frequencies(full)  # (8,): pairs 0-3 turned, 4-7 at frequency 0
    reference, _ = ROPE_INIT_FUNCTIONS["proportional"](theirs.config, layer_type="full_attention")
    torch.testing.assert_close(ours, reference, atol=0, rtol=0)
    assert bool((ours[4:] == 0).all()) and bool((ours[:4] > 0).all())


def test_the_shape_flow_names_each_mechanism(load):
    model, tokenizer, _ = load("gemma4")
    enc = encode(tokenizer, SENTENCE)
    windowed, full = (trace_layer(model, enc.input_ids, enc.attention_mask, layer=i) for i in (0, 1))
    assert "base 10000: the windowed layers' own" in windowed.step("q_rot").op
    assert "proportional: only pairs 0 to 1 of 8 turn" in full.step("q_rot").op  # 0.25 of 16 / 2
    for trace in (windowed, full):
        assert "no weight (v_norm)" in trace.step("v_norm").op
        assert "unscaled" in trace.step("scores").op
        assert "times its weight" in trace.step("q_norm").op and "1 + its weight" not in trace.step("q_norm").op
        assert "8-wide per-layer input" in trace.step("output").op and "layer_scalar" in trace.step("output").op
    assert full.d == 16 and windowed.d == 8


@pytest.mark.parametrize("layer", [0, 1])
def test_value_zeroing_runs_the_per_layer_input_and_scalar_after_the_layer(load, layer):
    model, tokenizer, theirs = load("gemma4")
    input_ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    ours = torch.tensor(value_zeroing(model, input_ids, layer))
    expected = test_mixing.reference_zeroing("gemma4", theirs, input_ids, layer)  # their v_proj's output zeroed
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)


def test_grouping_the_keys_and_values_keeps_the_norms(load):
    """Two K/V heads made equal pool into one exactly: the grouped model's maps are the model's own, which holds only
    where the copy keeps each head's q and k norms and the value norm."""
    model, tokenizer, _ = load("gemma4")
    same = copy.deepcopy(model)
    with torch.no_grad():
        for layer in same.layers:
            for projection in (layer.attention.k_proj, layer.attention.v_proj):
                rows = projection.weight.view(2, -1, projection.weight.size(1))  # (G, d, D)
                rows[1] = rows[0]
    input_ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        own, grouped = same(input_ids), to_grouped(same, 1)(input_ids)
    for a, b in zip(own.attentions, grouped.attentions):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    torch.testing.assert_close(own.last_hidden_state, grouped.last_hidden_state, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (dict(attention_k_eq_v=True), "attention_k_eq_v"),
        (dict(num_kv_shared_layers=2), "num_kv_shared_layers"),
        (dict(use_double_wide_mlp=True), "use_double_wide_mlp"),
        (dict(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=8), "enable_moe_block"),
        (dict(use_bidirectional_attention="all"), "use_bidirectional_attention"),
        (dict(use_bidirectional_attention="vision"), "use_bidirectional_attention"),
        (dict(rope_parameters={**HALF_TURNED, "full_attention": {"rope_type": "yarn", "factor": 2.0}}), "yarn"),
        (dict(rope_parameters={**HALF_TURNED, "sliding_attention": {"rope_type": "linear", "factor": 2.0}}), "sliding"),
        (dict(per_layer_config={"1": {"head_dim": 16, "num_key_value_heads": 1}, "3": {"head_dim": 16}}), "K/V heads"),
        (dict(vocab_size_per_layer_input=10), "vocab_size_per_layer_input"),
        (dict(sliding_window=None), "sliding_window"),
        (dict(layer_types=["sliding_attention", "full_attention", "full_attention", "full_attention"]), "layer_types"),
    ],
)
def test_options_not_followed_are_refused_by_name(tmp_path, values, words):
    folder = test_config_checks.edited(make_more(tmp_path / "gemma4", "gemma4_text"), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)
