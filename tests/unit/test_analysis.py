"""Rollout, flow, head statistics and patterns, head distances and MDS: hand-computed cases on
synthetic maps, checks against scipy, and the real model on the default sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention.analysis.rollout import as_attention_tuple, attention_flow, rollout
from attention.analysis.stats import PATTERNS, embed_heads, head_distances, head_stats, pattern_labels, punctuation_mask

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."


def as_model_output(*layers) -> tuple[torch.Tensor, ...]:
    """Layers given as lists of (T, T) head maps -> the model's tuple of (1, H, T, T) tensors."""
    return tuple(torch.tensor(np.array(heads), dtype=torch.float64)[None] for heads in layers)


# ---- rollout -----------------------------------------------------------------------------------


def test_rollout_matches_the_formula_by_hand():
    layer0 = [
        [[1, 0, 0], [1, 0, 0], [1, 0, 0]],  # head a: everything to token 0
        [[0, 0, 1], [0, 0, 1], [0, 0, 1]],
    ]  # head b: everything to token 2
    layer1 = [[[0, 1, 0], [0, 1, 0], [0, 1, 0]], [[0, 1, 0], [1, 0, 0], [0, 0, 1]]]
    # mean over heads, then 0.5 · mean + 0.5 · I (rows already sum to 1):
    A0 = np.array([[0.75, 0, 0.25], [0.25, 0.5, 0.25], [0.25, 0, 0.75]])  # mean rows are [.5, 0, .5]
    A1 = np.array([[0.5, 0.5, 0], [0.25, 0.75, 0], [0, 0.25, 0.75]])  # mean [[0,1,0],[.5,.5,0],[0,.5,.5]]
    # R1 = A1 · A0, row by row: .5·A0[0] + .5·A0[1], .25·A0[0] + .75·A0[1], .25·A0[1] + .75·A0[2]
    R1 = np.array([[0.5, 0.25, 0.25], [0.375, 0.375, 0.25], [0.25, 0.125, 0.625]])
    np.testing.assert_allclose(A1 @ A0, R1)  # the hand arithmetic, checked
    result = rollout(as_model_output(layer0, layer1))
    assert result.shape == (2, 1, 3, 3)
    np.testing.assert_allclose(result[0, 0].numpy(), A0)
    np.testing.assert_allclose(result[1, 0].numpy(), R1)


def test_rollout_rows_sum_to_one_even_for_a_query_that_attends_to_nothing():
    torch.manual_seed(0)
    attentions = tuple(torch.softmax(torch.randn(2, 4, 5, 5), dim=-1) for _ in range(3))
    attentions[1][1, :, 2] = 0.0  # a query whose keys were all masked gets an all-zero row
    result = rollout(attentions)
    assert result.shape == (3, 2, 5, 5)
    torch.testing.assert_close(result.sum(dim=-1), torch.ones(3, 2, 5))
    # that row is 0.5 · e_2 before renormalising, so layer 1 of item 1 passes token 2 through unchanged
    torch.testing.assert_close(result[1, 1, 2], result[0, 1, 2])


# ---- flow --------------------------------------------------------------------------------------

# One head per layer, so A_l = 0.5 · W_l + 0.5 · I:
#   A1 = [[1, 0, 0], [.5, .5, 0], [0, 0, 1]]      A2 = [[.5, .5, 0], [0, 1, 0], [.5, 0, .5]]
# Edges (0, j) -> (1, i) carry A1[i, j]: 0->0 cap 1, 0->1 cap .5, 1->1 cap .5, 2->2 cap 1.
# Edges (1, j) -> (2, i) carry A2[i, j]: 0->0 .5, 1->0 .5, 1->1 1, 0->2 .5, 2->2 .5.
FLOW_W1 = [[1, 0, 0], [1, 0, 0], [0, 0, 1]]
FLOW_W2 = [[0, 1, 0], [0, 1, 0], [1, 0, 0]]
# flow[i, j] from input j to output i, path by path:
#   j=0 -> i=0: via (1,0) min(1, .5) = .5, plus via (1,1) min(.5, .5) = .5: 1.0 (rollout gives .75)
#   j=1 -> i=0: via (1,1) min(.5, .5) = .5       j=2 -> i=0: (1,2) only reaches (2,2): 0
#   j=0 -> i=1: via (1,1) min(.5, 1) = .5        j=1 -> i=1: via (1,1) min(.5, 1) = .5
#   j=2 -> i=1: 0                                 j=0 -> i=2: via (1,0) min(1, .5) = .5
#   j=1 -> i=2: (1,1) does not reach (2,2): 0    j=2 -> i=2: via (1,2) min(1, .5) = .5
FLOW_BY_HAND = np.array([[1.0, 0.5, 0], [0.5, 0.5, 0], [0.5, 0, 0.5]])


def test_flow_matches_max_flow_by_hand():
    attentions = as_model_output([FLOW_W1], [FLOW_W2])
    np.testing.assert_allclose(attention_flow(attentions), FLOW_BY_HAND, atol=1e-8)
    assert rollout(attentions)[1, 0, 0, 0].item() == pytest.approx(0.75)  # flow is not rollout


def test_flow_all_layers_starts_with_the_first_layer_capacities():
    flow = attention_flow(as_model_output([FLOW_W1], [FLOW_W2]), layers="all")
    assert flow.shape == (2, 3, 3)
    # into layer 1 the only path from j to i is the edge itself, so the flow is A1
    np.testing.assert_allclose(flow[0], [[1, 0, 0], [0.5, 0.5, 0], [0, 0, 1]], atol=1e-8)
    np.testing.assert_allclose(flow[1], FLOW_BY_HAND, atol=1e-8)


def test_flow_refuses_long_inputs():
    attentions = tuple(torch.full((1, 2, 65, 65), 1 / 65) for _ in range(2))
    with pytest.raises(ValueError, match="offered up to 64 tokens"):
        attention_flow(attentions)
    five = tuple(torch.full((1, 1, 5, 5), 0.2) for _ in range(2))
    assert attention_flow(five, max_tokens=5).shape == (5, 5)  # up to the limit is fine
    with pytest.raises(ValueError, match="offered up to 4 tokens"):
        attention_flow(five, max_tokens=4)


def test_flow_picks_the_batch_item():
    pair = tuple(
        torch.cat([a, torch.eye(3, dtype=a.dtype)[None, None]]) for a in as_model_output([FLOW_W1], [FLOW_W2])
    )  # item 1 attends only to itself
    np.testing.assert_allclose(attention_flow(pair, batch=0), FLOW_BY_HAND, atol=1e-8)
    np.testing.assert_allclose(attention_flow(pair, batch=1), np.eye(3), atol=1e-8)


# ---- statistics and patterns on synthetic maps -----------------------------------------------------

# a sentence pair: [CLS] a1..a8 [SEP] b1..b8 [SEP], 19 positions; "," is a1's neighbour a2
PAIR_TOKENS = ["[CLS]"] + [f"a{k}" for k in range(8)] + ["[SEP]"] + [f"b{k}" for k in range(8)] + ["[SEP]"]
PAIR_TOKENS[2] = ","
PAIR_SEQ = [None] + [0] * 8 + [None] + [1] * 8 + [None]
PAIR_SPECIAL = [s is None for s in PAIR_SEQ]
L = len(PAIR_TOKENS)
SEP = [9, 18]


def normalized(matrix: np.ndarray) -> np.ndarray:
    return matrix / matrix.sum(axis=1, keepdims=True)


def vertical_map() -> np.ndarray:  # .45 to [CLS], .45 split over the [SEP]s, .1 spread
    m = np.full((L, L), 0.1 / L)
    m[:, 0] += 0.45
    m[:, SEP] += 0.225
    return m


def diagonal_map() -> np.ndarray:  # .4 self, .2 previous, .2 next, .2 spread
    return normalized(0.4 * np.eye(L) + 0.2 * np.eye(L, k=-1) + 0.2 * np.eye(L, k=1) + 0.2 / L)


def block_map() -> np.ndarray:  # uniform over the query's own segment; specials attend everywhere
    seq = np.array([-1 if s is None else s for s in PAIR_SEQ])
    m = (seq[:, None] == seq[None, :]) & (seq[:, None] >= 0)
    m = m.astype(float)
    m[seq < 0] = 1.0
    return normalized(m)


def broad_map() -> np.ndarray:
    return np.full((L, L), 1.0 / L)


def heterogeneous_map() -> np.ndarray:  # .9 on one token of the other segment, .1 spread
    m = np.full((L, L), 0.1 / L)
    for i in range(L):
        m[i, 14 if i < 9 else 3] += 0.9
    return m


BUILT = {
    "vertical": vertical_map(),
    "diagonal": diagonal_map(),
    "block": block_map(),
    "broad": broad_map(),
    "heterogeneous": heterogeneous_map(),
}


def pair_stats(*maps: np.ndarray) -> dict[str, np.ndarray]:
    attn = np.stack(maps)[None]  # (1, H, L, L)
    return head_stats(attn, PAIR_SPECIAL, PAIR_SEQ, punctuation_mask(PAIR_TOKENS))


def test_each_built_pattern_gets_its_label():
    labels = pattern_labels(pair_stats(*BUILT.values()), L, pair=True)
    assert labels.shape == (1, 5)
    assert list(labels[0]) == list(BUILT) == list(PATTERNS)


def test_block_needs_a_sentence_pair():
    stats = pair_stats(block_map())
    assert stats["within_segment"][0, 0] == pytest.approx(1.0)
    assert pattern_labels(stats, L, pair=True)[0, 0] == "block"
    assert pattern_labels(stats, L, pair=False)[0, 0] == "broad"  # ln 8 ≥ 0.7 · ln 19


def test_thresholds_can_be_overridden():
    stats = pair_stats(vertical_map())
    assert pattern_labels(stats, L, pair=True, vertical=0.95)[0, 0] != "vertical"


def test_statistics_by_hand():
    identity, uniform = np.eye(L), broad_map()
    previous = np.eye(L, k=-1)
    previous[0, 0] = 1.0  # row 0 has no previous token: it attends to itself
    stats = pair_stats(identity, uniform, previous, vertical_map())
    np.testing.assert_allclose(stats["entropy"][0, :2], [0.0, np.log(L)])
    np.testing.assert_allclose(stats["to_self"][0, :3], [1.0, 1 / L, 1 / L])
    np.testing.assert_allclose(stats["to_prev"][0, :3], [0.0, (L - 1) / L / L, (L - 1) / L])
    np.testing.assert_allclose(stats["to_next"][0, :3], [0.0, (L - 1) / L / L, 0.0])
    # Σ_j |i - j| / L averaged over rows, summed here with plain loops
    uniform_distance = sum(abs(i - j) for i in range(L) for j in range(L)) / L / L
    np.testing.assert_allclose(stats["distance"][0, :3], [0.0, uniform_distance, (L - 1) / L])
    np.testing.assert_allclose(stats["to_cls"][0, :2], [1 / L, 1 / L])
    np.testing.assert_allclose(stats["to_sep"][0, :2], [2 / L, 2 / L])
    np.testing.assert_allclose(stats["to_punct"][0, :2], [1 / L, 1 / L])  # "," at position 2
    np.testing.assert_allclose(stats["to_cls"][0, 3], 0.45 + 0.1 / L)
    np.testing.assert_allclose(stats["to_sep"][0, 3], 0.45 + 0.2 / L)
    # within the own segment: the identity stays in it; uniform rows put 8 of 19 there
    np.testing.assert_allclose(stats["within_segment"][0, :2], [1.0, 8 / L])
    for value in stats.values():
        assert value.shape == (1, 4)
    # rows of different entropies: 16 rows uniform over 8 keys, 3 special rows over all 19
    entropy = pair_stats(block_map())["entropy"][0, 0]
    assert entropy == pytest.approx((16 * np.log(8) + 3 * np.log(L)) / L)


def test_punctuation_mask():
    tokens = ["[CLS]", "didn", "'", "t", ".", "...", "##.", "a.", "«", "$", "é", "", "[SEP]"]
    assert punctuation_mask(tokens).tolist() == [
        False,
        False,
        True,
        False,
        True,
        True,
        True,
        False,
        True,
        True,
        False,
        False,
        False,
    ]


# ---- heads compared ----------------------------------------------------------------------------------


def random_maps(rng, n_layers: int, H: int, length: int) -> np.ndarray:
    return normalized_rows(rng.random((n_layers, H, length, length)) ** 4)


def normalized_rows(a: np.ndarray) -> np.ndarray:
    return a / a.sum(axis=-1, keepdims=True)


def test_js_distance_values_by_hand():
    # p = [1, 0] vs q = [0, 1]: disjoint, distance 1. p = [1, 0] vs q = [.5, .5]: m = [.75, .25],
    # KL(p|m) = log2(4/3), KL(q|m) = .5·log2(2/3) + .5·log2(2); distance = sqrt of half their sum.
    heads = np.array([[[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.5, 0.5]]]])  # (1 layer, 2 heads, 2, 2)
    half = np.sqrt(0.5 * (np.log2(4 / 3) + 0.5 * np.log2(2 / 3) + 0.5))
    assert head_distances([heads])[0, 1] == pytest.approx((1.0 + half) / 2)


def test_head_distances_match_scipy_and_are_symmetric():
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(0)
    sentences = [random_maps(rng, 2, 3, 4), random_maps(rng, 2, 3, 6)]
    sentences[0][1, 2] = sentences[0][0, 0]  # heads 0 and 5 agree on sentence 0 only, so d = d_1 / 2
    result = head_distances(sentences)
    expected = np.zeros((6, 6))
    for attn in sentences:
        heads = attn.reshape(6, *attn.shape[2:])
        for a in range(6):
            for b in range(6):
                rows = [jensenshannon(p, q, base=2) for p, q in zip(heads[a], heads[b])]
                expected[a, b] += np.mean(rows) / len(sentences)
    np.testing.assert_allclose(result, expected, atol=1e-12)
    np.testing.assert_array_equal(result, result.T)
    np.testing.assert_array_equal(np.diag(result), 0.0)


def test_identical_heads_are_at_distance_zero():
    rng = np.random.default_rng(1)
    attn = random_maps(rng, 2, 2, 5)
    attn[1, 1] = attn[0, 0]
    d = head_distances([attn, attn])
    assert d[0, 3] == 0.0 and d[3, 0] == 0.0
    assert d[0, 1] > 0.05


def pairwise(points: np.ndarray) -> np.ndarray:
    return np.linalg.norm(points[:, None] - points[None, :], axis=-1)


def test_mds_recovers_points_on_a_plane():
    rng = np.random.default_rng(2)
    flat = np.c_[rng.normal(size=(8, 2)) * [3.0, 1.0], np.zeros(8)] + [5.0, -2.0, 1.0]  # shifted
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    points = flat @ rotation.T  # a plane tilted in 3-D
    embedding = embed_heads(pairwise(points), heads_per_layer=4)
    assert embedding.coords.shape == (8, 2)
    np.testing.assert_allclose(pairwise(embedding.coords), pairwise(points), atol=1e-9)
    np.testing.assert_array_equal(embedding.layer, [0, 0, 0, 0, 1, 1, 1, 1])


def test_mds_puts_points_on_a_line_on_one_axis():
    positions = np.array([0.0, 1.0, 3.0, 7.0, 8.0, 12.0])
    embedding = embed_heads(np.abs(positions[:, None] - positions[None, :]), heads_per_layer=3)
    np.testing.assert_allclose(embedding.coords[:, 1], 0.0, atol=1e-6)
    np.testing.assert_allclose(np.abs(embedding.coords[:, 0] - embedding.coords[0, 0]), positions, atol=1e-9)
    np.testing.assert_array_equal(embedding.layer, [0, 0, 0, 1, 1, 1])


# ---- the real model ----------------------------------------------------------------------------------


def test_rollout_on_the_default_model(minilm):
    from attention.runs.run import run_sentence

    model, tokenizer = minilm
    run = run_sentence(model, tokenizer, DEFAULT_SENTENCE)
    with torch.inference_mode():
        out = model(run.encoded.input_ids)
    result = rollout(out.attentions)
    L = len(run.tokens)
    assert result.shape == (6, 1, L, L)
    torch.testing.assert_close(result.sum(dim=-1), torch.ones(6, 1, L))
    torch.testing.assert_close(rollout(as_attention_tuple(run.attentions)), result)


def test_flow_on_the_default_model_starts_at_the_first_layer(minilm):
    model, tokenizer = minilm
    enc = tokenizer("The cat sat.", return_tensors="pt")
    with torch.inference_mode():
        attentions = model(enc["input_ids"]).attentions
    flow = attention_flow(attentions, layers="all")
    T = enc["input_ids"].shape[1]
    assert flow.shape == (6, T, T)
    assert flow.min() >= 0.0 and flow.max() <= 1.0 + 1e-6
    first = 0.5 * attentions[0][0].mean(dim=0).double().numpy() + 0.5 * np.eye(T)
    np.testing.assert_allclose(flow[0], first, atol=1e-6)


def test_head_patterns_on_the_default_sentence(minilm):
    from attention.runs.run import run_sentence

    model, tokenizer = minilm
    run = run_sentence(model, tokenizer, DEFAULT_SENTENCE)
    stats = head_stats(run.attentions, run.encoded.special, run.encoded.sequence_ids, punctuation_mask(run.tokens))
    for name, value in stats.items():
        assert value.shape == (6, 12), name
        assert np.isfinite(value).all(), name
    labels = pattern_labels(stats, len(run.tokens))
    assert set(labels.ravel()) <= set(PATTERNS)
    # MiniLM sends much of its attention to [CLS] and [SEP]: many heads are sinks
    assert (labels == "vertical").sum() >= 1


def test_embedding_of_fewer_heads_than_dimensions_pads_with_zeros():
    emb = embed_heads(np.zeros((1, 1)), dims=2, heads_per_layer=1)
    assert emb.coords.shape == (1, 2) and not emb.coords.any()


def test_head_distances_reports_progress_up_to_one():
    rng = np.random.default_rng(0)
    maps = [rng.dirichlet(np.ones(4), size=(2, 3, 4)) for _ in range(2)]
    seen = []
    head_distances(maps, progress=seen.append)
    assert len(seen) == 2 * 6 and seen == sorted(seen) and seen[-1] == 1.0
