"""Every family's mixing, read from its own forward pass (attention/analysis/mixing.py): its heads' f_h(x_j) weighted
by the map add up to what its attention outputs, and its first-token shares are those of its own maps. The measures
themselves are checked against transformers in test_mixing.py; this checks the reading on every projection layout
(separate, fused, per head), grouped heads, head widths other than D / H, score parts and soft-caps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import CONFIGS, MORE_CONFIGS, SEQ2SEQ_CONFIGS, make_family, make_more, make_seq2seq

from attention import load_model
from attention.analysis.mixing import each_layer, norm_maps, sink_shares
from attention.tracing.trace import trace_layer

TEXT = "The trophy doesn't fit in the suitcase because it is too big."
NAMES = (*CONFIGS, *MORE_CONFIGS, "bart", "t5")  # an encoder-decoder's encoder


@pytest.fixture(scope="module", params=NAMES)
def stack(request, tmp_path_factory):
    """(one stack of layers, input_ids (1, L)) of the family."""
    name, folder = request.param, tmp_path_factory.mktemp(request.param)
    if name in SEQ2SEQ_CONFIGS:
        make_seq2seq(folder, name)
    elif name in MORE_CONFIGS:
        make_more(folder, name)
    else:
        make_family(folder, name)
    model, tokenizer = load_model(folder)
    model = getattr(model, "encoder", model)
    return model, tokenizer(TEXT, return_tensors="pt")["input_ids"]


def test_weighted_values_add_up_to_the_attention_output(stack):
    model, input_ids = stack
    read = {}
    each_layer(model, input_ids, None, lambda i, probs, f, records: read.update({i: (probs, f)}))
    for layer, (probs, f) in read.items():
        trace = trace_layer(model, input_ids, layer=layer)
        bias = model.layers[layer].attention.o_proj.bias
        summed = torch.bmm(probs.double(), f).sum(0) + (0 if bias is None else bias.double())  # (L, D)
        output = trace.step("output").tensor[0].double()  # (L, D), o_proj's
        torch.testing.assert_close(summed, output, atol=1e-5 * float(output.abs().max()), rtol=0)


def test_first_token_shares_are_those_of_the_models_own_maps(stack):
    model, input_ids = stack
    shares = sink_shares(model, input_ids)
    with torch.inference_mode():
        maps = torch.stack(model(input_ids).attentions)[:, 0].double()  # (n_layers, H, L, L)
    np.testing.assert_allclose(shares["to_first"], maps[..., 0].mean(-1), atol=1e-6, rtol=0)
    norms = np.stack(norm_maps(model, input_ids).heads)  # (n_layers, H, L, L)
    weighted = (norms[..., 0] / norms.sum(-1)).mean(-1)
    np.testing.assert_allclose(shares["to_first_weighted"], weighted, atol=1e-6, rtol=0)
    assert ((shares["to_first_weighted"] >= 0) & (shares["to_first_weighted"] <= 1)).all()
