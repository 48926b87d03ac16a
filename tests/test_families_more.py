"""XLM-RoBERTa, Qwen3, GPT-NeoX, OPT and OLMo2, loaded from tiny random task checkpoints, give
transformers' eager numbers, single and padded; what each declares (Q/K norms, partial rotary, a
per-head fused Q·K·V, parallel residuals, OPT's positions and projections) holds, and the shape-flow
trace records it."""
import pytest
import torch

import test_decoders
from attention import encode, load_model

from families import make_more, reference

CASES = {  # id -> (family, config overrides)
    "xlm-roberta": ("xlm-roberta", {}),
}
KINDS = ("sentence", "left padded", "right padded")


@pytest.fixture(scope="module", params=list(CASES))
def loaded(request, tmp_path_factory):
    family, overrides = CASES[request.param]
    folder = make_more(tmp_path_factory.mktemp(request.param), family, **overrides)
    model, tokenizer = load_model(folder)
    return request.param, model, tokenizer, reference(folder)


@pytest.mark.parametrize("kind", KINDS)
def test_parity_with_transformers(loaded, kind):
    case, model, tokenizer, theirs = loaded
    input_ids, attention_mask = test_decoders.inputs(tokenizer, kind)
    hidden, attention = test_decoders.differences(model, theirs, input_ids, attention_mask)
    print(f"\n{case:12} {kind:13} max|Δ hidden| {hidden:.2e}  max|Δ maps| {attention:.2e}")
    assert hidden <= 1e-5 and attention <= 1e-6, (case, kind, hidden, attention)
