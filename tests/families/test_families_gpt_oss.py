"""gpt-oss, loaded from tiny random task checkpoints, gives transformers' eager numbers, single and padded: each
head's learned sink takes a share of every row (rows of the map sum to less than 1), windowed and full layers
alternate, a mixture of experts routes each token through its top experts, and rotary is rescaled by yarn as the
released models' is; options it does not follow are refused by name."""

import numpy as np
import pytest
import test_config_checks
import test_decoders
import torch
from families import make_more
from parity import parity_suite

from attention import ModelLoadError, encode, load_model
from attention.models.experts import MixtureOfExperts
from attention.runs.run import run_sentence
from attention.tracing.trace import trace_layer

CASES = {  # id -> (family, config overrides)
    "gpt_oss": ("gpt_oss", {}),  # layers 0 and 2 windowed to 3 keys, 1 and 3 full; 2 of 4 experts a token
    "gpt_oss-one-expert": ("gpt_oss", dict(num_experts_per_tok=1, swiglu_limit=0.5)),  # the clamp reached
    "gpt_oss-plain-rotary": ("gpt_oss", dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
}
SENTENCE = test_decoders.SENTENCES[0]


load, test_parity_with_transformers = parity_suite(CASES)


def test_the_sinks_take_a_share_of_every_row_and_windows_alternate(load):
    model, tokenizer, _ = load("gpt_oss")
    assert tuple(model.config.window_of(i) for i in range(4)) == (3, None, 3, None)
    assert (model.config.positions.rope_type, model.config.positions.rope_truncate) == ("yarn", False)
    enc = encode(tokenizer, SENTENCE)
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, layer=1)
    assert "yarn rope scaling (factor 4)" in trace.step("q_rot").op
    assert "learned sink" in trace.step("probs").op  # the shape flow names the sink where the softmax covers it
    run = run_sentence(model, tokenizer, SENTENCE)
    L = len(run.tokens)
    far = np.tril(np.ones((L, L), dtype=bool), k=-3)  # keys 3 or more positions back
    for layer in range(4):
        maps = run.attentions[layer]  # (H, L, L)
        sums = maps.sum(-1)  # (H, L): what the tokens get of each row; the rest is the sink's
        assert sums.max() < 1 - 1e-3 and sums.min() > 0
        assert (np.abs(maps[:, far]).max() == 0) == (layer % 2 == 0)
    # the sinks matter: the same weights with every sink at -inf are a plain softmax, rows summing to 1
    for layer in model.layers:
        layer.attention.sinks.data.fill_(float("-inf"))
    try:
        plain = run_sentence(model, tokenizer, SENTENCE)
        np.testing.assert_allclose(plain.attentions.sum(-1), 1.0, atol=1e-5)
    finally:
        for layer, theirs in zip(model.layers, load("gpt_oss")[2].layers):
            layer.attention.sinks.data.copy_(theirs.self_attn.sinks.data)


def test_each_token_goes_through_its_top_experts(load):
    model, tokenizer, theirs = load("gpt_oss")
    enc = encode(tokenizer, SENTENCE)
    with torch.no_grad():
        model(enc.input_ids, enc.attention_mask)
    mixture = model.layers[0].mixture
    assert isinstance(mixture, MixtureOfExperts) and mixture.choices is not None and mixture.weights is not None
    assert mixture.choices.shape == (1, enc.input_ids.size(1), 2)
    torch.testing.assert_close(mixture.weights.sum(-1), torch.ones(1, enc.input_ids.size(1)))
    x = torch.randn(1, 5, model.config.hidden_size)
    with torch.no_grad():  # the block's feed-forward alone against transformers' GptOssMLP on the same input
        ours, (reference, _) = model.layers[0].feed_forward(x), theirs.layers[0].mlp(x)
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (dict(quantization_config={"quant_method": "mxfp4"}), "mxfp4"),
        (dict(sliding_window=None), "sliding_window"),
        (dict(num_experts_per_tok=5), "num_experts_per_tok"),
        (
            dict(layer_types=["full_attention", "full_attention", "sliding_attention", "sliding_attention"]),
            "layer_types",
        ),
        (dict(rope_parameters={"rope_type": "longrope", "rope_theta": 10.0, "factor": 2.0}), "longrope"),
    ],
)
def test_options_not_followed_are_refused_by_name(tmp_path, values, words):
    folder = test_config_checks.edited(make_more(tmp_path / "gpt_oss", "gpt_oss"), **values)
    with pytest.raises(ModelLoadError) as err:
        load_model(folder)
    assert words in str(err.value) and "\n" not in str(err.value)
