"""Each family's shape flow names its own steps: partial rotary, soft-capping, query_pre_attn_scalar, its window,
DeBERTa's position terms, Phi-3's fused Q·K·V, the Q and K norms of Qwen3, Gemma3 and OLMo2, Gemma3's local rotary
base, a norm after the attention; read from the figure's box texts and hovers."""

import pytest
from families import make_more
from test_shapeflow import box_text

from attention import load_model
from attention.trace import trace_layer
from viz.shapeflow import shape_flow

SENTENCE = "The cat sat on the mat and it was warm."


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    cache = {}

    def load(family: str):
        if family not in cache:
            cache[family] = load_model(make_more(tmp_path_factory.mktemp(family), family))
        return cache[family]

    return load


def flow(loaded, family: str, layer: int):
    model, tokenizer = loaded(family)
    return flow_of(model, tokenizer, layer)


def flow_of(model, tokenizer, layer: int):
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    trace = trace_layer(model, ids, layer=layer)
    return trace, " ".join(" ".join(box_text(shape_flow(trace), n) for n in trace.names).split())


@pytest.mark.parametrize("family", ["phi", "gpt_neox"])
def test_partial_rotary_says_how_many_dims_turn(loaded, family):
    model, _ = loaded(family)
    r, d = model.config.rotary_dim, model.config.head_size
    assert r < d
    _, text = flow(loaded, family, 0)
    assert f"rotary on {r} of {d} dims" in text and f"{d - r} unturned" in text
    assert "i+d/2" not in text


def test_gemma2_soft_caps_as_its_own_step_with_its_scale_and_window(loaded):
    trace, text = flow(loaded, "gemma2", 0)
    names = trace.names
    assert names.index("scores") < names.index("softcap") < names.index("masked_scores")
    assert "soft-cap: 2.0·tanh(scores/2.0)" in text
    assert "Q · Kᵀ · 0.5 (1/√4: query_pre_attn_scalar)" in text
    assert "sliding window of 5: each query sees the 5 latest keys" in text
    full, text = flow(loaded, "gemma2", 1)  # the full layer: capped, no window
    assert "soft-cap: 2.0·tanh(scores/2.0)" in text and "window" not in text


def test_gemma2_soft_cap_box_follows_the_scores_and_holds_the_capped_tensor(loaded):
    trace, _ = flow(loaded, "gemma2", 0)
    assert float(trace.tensor("softcap").abs().max()) <= 2.0 < float(trace.tensor("scores").abs().max())
    assert "soft-cap" in box_text(shape_flow(trace), "softcap")


def test_modernbert_local_layers_say_their_window_and_global_ones_none(loaded):
    _, text = flow(loaded, "modernbert", 1)
    assert "local window of 4: keys fewer than 4 positions away either side" in text
    _, text = flow(loaded, "modernbert", 0)
    assert "window" not in text


def test_deberta_position_terms_are_steps_added_to_the_scores(loaded):
    trace, text = flow(loaded, "deberta-v2", 0)
    fig = shape_flow(trace)
    assert "c2p: content → position" in box_text(fig, "c2p") and "added to the scores" in box_text(fig, "c2p")
    assert "p2c: position → content" in box_text(fig, "p2c") and "added to the scores" in box_text(fig, "p2c")
    assert "scores + c2p + p2c" in box_text(fig, "masked_scores")
    assert "1/√(8·3): d times 1 + 2 position terms" in text
    rows = {a.name: a.y for a in fig.layout.annotations if a.name in ("scores", "c2p", "p2c", "masked_scores")}
    assert rows["scores"] < rows["c2p"] < rows["p2c"] < rows["masked_scores"]  # between the scores and the mask


def test_phi3_fused_qkv_partial_rotary_and_window(tmp_path):
    model, tokenizer = load_model(make_more(tmp_path / "phi3", "phi3", sliding_window=5))
    r, d = model.config.rotary_dim, model.config.head_size
    assert (r, d) == (4, 8)
    trace, text = flow_of(model, tokenizer, 0)
    assert trace.names.index("qkv_proj") < trace.names.index("q_proj")
    assert "(D → (H+2G)·d): Q, K and V in one" in text
    assert "columns 0:32 of QKV, no copy" in text and "columns 32:48 of QKV" in text and "columns 48:64 of QKV" in text
    assert f"rotary on {r} of {d} dims: coordinates i and i+{r // 2}" in text and f"{d - r} unturned" in text
    assert "sliding window of 5: each query sees the 5 latest keys" in text


def test_phi3_without_window_says_none(loaded):
    _, text = flow(loaded, "phi3", 0)
    assert "fused QKV projection" in text and "rotary on 4 of 8 dims" in text and "window" not in text


def test_qwen3_normalises_each_heads_q_and_k_before_rotary(loaded):
    trace, text = flow(loaded, "qwen3", 0)
    names = trace.names
    assert names.index("q_heads") < names.index("q_norm") < names.index("q_rot")
    assert names.index("k_heads") < names.index("k_norm") < names.index("k_rot")
    fig = shape_flow(trace)
    assert "RMSNorm of Q over each head's d, times its weight" in box_text(fig, "q_norm")
    assert "RMSNorm of K over each head's d, times its weight" in box_text(fig, "k_norm")
    assert "Q · Kᵀ · 0.25 (1/√16)" in text  # head_dim 16 of its own, H·d ≠ D


def test_gemma3_windowed_layers_turn_on_their_own_base(loaded):
    trace, text = flow(loaded, "gemma3_text", 0)  # windowed
    fig = shape_flow(trace)
    assert "RMSNorm of Q over each head's d" in box_text(fig, "q_norm")
    assert "RMSNorm of K over each head's d" in box_text(fig, "k_norm")
    assert trace.names.index("q_norm") < trace.names.index("q_rot")
    assert "sliding window of 5: each query sees the 5 latest keys" in text
    assert "base 50: the windowed layers' own (local_rope_theta)" in box_text(fig, "q_rot")
    assert "Q · Kᵀ · 0.5 (1/√4: query_pre_attn_scalar)" in text
    full, text = flow(loaded, "gemma3_text", 2)  # the full layer: all keys, the global base
    assert "window" not in text and "base 50" not in text
    assert "base 1000: the full layers'" in box_text(shape_flow(full), "k_rot")
    assert "Q · Kᵀ · 0.5 (1/√4: query_pre_attn_scalar)" in text


@pytest.mark.parametrize("family", ["gemma3_text", "olmo2"])
def test_norm_after_the_attention_named_on_its_output(loaded, family):
    trace, _ = flow(loaded, family, 0)
    assert "then post_attention_layernorm before the residual adds it" in box_text(shape_flow(trace), "output")


def test_olmo2_normalises_all_heads_q_and_k_and_not_its_input(loaded):
    trace, text = flow(loaded, "olmo2", 0)
    names, fig = trace.names, shape_flow(trace)
    assert "block_input" not in names and "pre-norm" not in text
    assert "not normalised first: the norm comes after the attention" in box_text(fig, "input")
    assert names.index("q_proj") < names.index("q_norm") < names.index("q_view")
    assert "RMSNorm of Q over all heads' H·d, times its weight" in box_text(fig, "q_norm")
    assert "RMSNorm of K over all heads' G·d, times its weight" in box_text(fig, "k_norm")


@pytest.mark.parametrize("family", ["qwen3", "phi3"])
def test_norm_after_the_attention_not_named_where_there_is_none(loaded, family):
    trace, _ = flow(loaded, family, 0)
    assert "post_attention_layernorm" not in box_text(shape_flow(trace), "output")
