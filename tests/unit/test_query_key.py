"""The query·key view: one query's vectors, products, scores and probabilities, as the model used them."""

import numpy as np
import pytest
import torch
from test_trace import run as traced

from attention import BertConfig, BertModel, MultiHeadAttention
from attention.analysis.query_key import QueryKey, query_key

SHORT = "The cat sat on the mat."
LAYER = 2


@pytest.fixture(scope="module")
def single(minilm):
    model, tok = minilm
    return traced(model, tok(SHORT, return_tensors="pt"), LAYER)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max())
    return e / e.sum()


def tiny_model(num_kv_heads: int | None = None) -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    model = BertModel(config).eval()
    if num_kv_heads is not None:
        model.layers[1].attention = MultiHeadAttention(32, 4, num_kv_heads=num_kv_heads).eval()
    return model


def test_products_sum_to_the_recorded_scores_and_probs_are_the_models_attentions(single):
    trace, attentions = single
    L, H, d = trace.L, trace.H, trace.d
    assert (L, H, d) == (9, 12, 32)
    for head in range(H):
        for query in range(L):
            qk = query_key(trace, head, query)
            assert (qk.layer, qk.head, qk.query) == (LAYER, head, query)
            assert qk.scaling == pytest.approx(d**-0.5, rel=1e-12)
            np.testing.assert_allclose(qk.product.sum(-1) * qk.scaling, qk.scores, rtol=0, atol=1e-5)
            np.testing.assert_allclose(qk.probs, softmax(qk.scores), rtol=0, atol=1e-6)
            np.testing.assert_allclose(qk.probs, attentions[LAYER][0, head, query].numpy(), rtol=0, atol=1e-6)


def test_vectors_are_the_recorded_ones_with_the_right_shapes(single):
    trace, _ = single
    qk = query_key(trace, 7, 3)
    assert isinstance(qk, QueryKey)
    assert qk.q.shape == (32,) and qk.k.shape == qk.product.shape == (9, 32)
    assert qk.scores.shape == qk.probs.shape == (9,)
    np.testing.assert_array_equal(qk.q, trace.step("q_heads").tensor[0, 7, 3].numpy())
    np.testing.assert_array_equal(qk.k, trace.step("k_heads").tensor[0, 7].numpy())
    np.testing.assert_array_equal(qk.product, qk.q[None, :] * qk.k)
    np.testing.assert_array_equal(qk.scores, trace.step("scores").tensor[0, 7, 3].numpy())
    np.testing.assert_array_equal(qk.probs, trace.step("probs").tensor[0, 7, 3].numpy())
    assert qk.probs.sum() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    "head, query, message",
    [
        (12, 0, "head must be an integer from 0 to 11"),
        (-1, 0, "head"),
        (True, 0, "head"),
        ("1", 0, "head"),
        (0, 9, "query must be an integer from 0 to 8"),
        (0, -1, "query"),
        (0, 1.0, "query"),
    ],
)
def test_a_head_or_query_out_of_range_is_refused(single, head, query, message):
    trace, _ = single
    with pytest.raises(ValueError, match=message):
        query_key(trace, head, query)


def test_numpy_integers_are_accepted(single):
    trace, _ = single
    qk = query_key(trace, np.int64(2), np.int64(1))
    assert (qk.head, qk.query) == (2, 1)


def test_a_padded_first_sentence_scores_every_key_and_gives_dropped_keys_no_weight(minilm):
    model, tok = minilm
    enc = tok(["It was.", SHORT], padding=True, return_tensors="pt")
    trace, attentions = traced(model, enc, 0)
    kept = int(enc["attention_mask"][0].sum())
    assert kept < trace.S == 9
    qk = query_key(trace, 5, 1)
    assert qk.scores.shape == (9,) and np.isfinite(qk.scores).all()  # the scores before the mask
    np.testing.assert_allclose(qk.product.sum(-1) * qk.scaling, qk.scores, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(qk.probs[kept:], 0.0)
    np.testing.assert_allclose(qk.probs[:kept], softmax(qk.scores[:kept]), rtol=0, atol=1e-6)
    np.testing.assert_allclose(qk.probs, attentions[0][0, 5, 1].numpy(), rtol=0, atol=1e-6)


def test_grouped_query_attention_reads_the_key_head_of_the_query_heads_group():
    model = tiny_model(num_kv_heads=2)
    trace, attentions = traced(model, {"input_ids": torch.randint(5, 99, (1, 7))}, 1)
    assert "k_shared" in trace and (trace.H, trace.G) == (4, 2)
    k_heads = trace.step("k_heads").tensor[0]
    for head in range(4):
        qk = query_key(trace, head, 2)
        np.testing.assert_array_equal(qk.k, k_heads[head // 2].numpy())
        np.testing.assert_allclose(qk.product.sum(-1) * qk.scaling, qk.scores, rtol=0, atol=1e-5)
        np.testing.assert_allclose(qk.probs, attentions[1][0, head, 2].numpy(), rtol=0, atol=1e-6)


def test_a_scaling_other_than_one_over_root_d_is_read_off_the_scores():
    model = tiny_model()
    model.layers[0].attention.scaling = 0.5
    trace, attentions = traced(model, {"input_ids": torch.randint(5, 99, (1, 6))}, 0)
    qk = query_key(trace, 1, 4)
    assert qk.scaling == pytest.approx(0.5, rel=1e-5)
    np.testing.assert_allclose(qk.product.sum(-1) * qk.scaling, qk.scores, rtol=0, atol=1e-5)
    np.testing.assert_allclose(qk.probs, attentions[0][0, 1, 4].numpy(), rtol=0, atol=1e-6)
