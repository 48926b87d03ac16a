"""OLMo 3, loaded from tiny random task checkpoints, gives transformers' eager numbers, single and padded: three
layers of every four windowed (here to 3 keys, which the test sentences pass), the fourth full, each kind on its
own rotary base; options it does not follow are refused by name."""

import numpy as np
import pytest
import test_config_checks
import test_decoders
from families import make_more
from parity import parity_suite

from attention import ModelLoadError, encode, load_model
from attention.runs.run import run_sentence
from attention.tracing.trace import trace_layer

SCALED = {  # the full layers' rotary rescaled on one base, the windowed layers' on another
    "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
}
CASES = {  # id -> (family, config overrides)
    "olmo3": ("olmo3", {}),  # layers 0-2 windowed to 3 keys, layer 3 full
    "olmo3-full-first": ("olmo3", dict(layer_types=["full_attention", "sliding_attention"] * 2)),
    "olmo3-scaled": ("olmo3", dict(rope_parameters=SCALED)),
}
SENTENCE = test_decoders.SENTENCES[0]


load, test_parity_with_transformers = parity_suite(CASES)


@pytest.mark.parametrize(
    ("case", "windows"),
    [("olmo3", (3, 3, 3, None)), ("olmo3-full-first", (None, 3, None, 3))],
)
def test_three_layers_of_four_see_only_the_latest_keys(load, case, windows):
    model, tokenizer, _ = load(case)
    assert tuple(model.config.window_of(i) for i in range(4)) == windows
    run, enc = run_sentence(model, tokenizer, SENTENCE), encode(tokenizer, SENTENCE)
    L = len(run.tokens)
    assert L > 4
    far = np.tril(np.ones((L, L), dtype=bool), k=-3)  # keys 3 or more positions back: outside a window of 3
    for layer, window in enumerate(windows):
        maps = run.attentions[layer]  # (H, L, L)
        assert (np.abs(maps[:, far]).max() == 0) == (window is not None), (case, layer)
        trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=layer)
        assert ("sliding window of 3" in trace.step("mask").op) == (window is not None)


def test_each_kind_of_layer_turns_on_its_own_base(load):
    model, tokenizer, _ = load("olmo3-scaled")
    p = model.config.positions
    assert (p.rope_theta, p.rope_type, p.rope_factor, p.local_rope_theta) == (1000.0, "linear", 2.0, 50.0)
    enc = encode(tokenizer, SENTENCE)
    windowed = trace_layer(model, enc.input_ids, enc.attention_mask, layer=0).step("q_rot").op
    full = trace_layer(model, enc.input_ids, enc.attention_mask, layer=3).step("q_rot").op
    assert "base 50: the windowed layers' own" in windowed and "rope scaling" not in windowed
    assert "base 1000: the full layers'; linear rope scaling" in full


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (
            dict(layer_types=["sliding_attention", "full_attention", "full_attention", "sliding_attention"]),
            "layer_types",
        ),
        (dict(sliding_window=0), "sliding_window"),
        (dict(sliding_window=None), "sliding_window"),
        (dict(rope_parameters={**SCALED, "sliding_attention": {"rope_type": "linear", "factor": 2.0}}), "sliding"),
    ],
)
def test_options_not_followed_are_refused_by_name(tmp_path, values, words):
    folder = test_config_checks.edited(make_more(tmp_path / "olmo3", "olmo3"), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)
