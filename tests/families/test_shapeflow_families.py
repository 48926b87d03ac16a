"""Each family's shape flow names its own steps: partial rotary, soft-capping, query_pre_attn_scalar, its window,
DeBERTa's position terms, Phi-3's fused Q·K·V, the Q and K norms of Qwen3, Gemma3 and OLMo2, Gemma3's local rotary
base, a norm after the attention; read from the figure's box texts and hovers."""

import pytest
import torch
from families import make_more
from test_shapeflow import box_text

from attention import load_model
from attention.tracing.trace import trace_layer
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


# ---- each term as the loaded model has it: biases, the norm's scale, rope scaling, the mask's kind ----
BIAS_LETTERS = {"qkv_proj": "QKV", "q_proj": "Q", "k_proj": "K", "v_proj": "V", "output": "O"}
MODULES = {"qkv_proj": "qkv_proj", "q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output": "o_proj"}


def loaded_case(tmp_path, family: str, **overrides):
    from families import CONFIGS, make_family

    make = make_family if family in CONFIGS else make_more
    return load_model(make(tmp_path / family, family, **overrides))


@pytest.mark.parametrize(
    "family, overrides, biased",
    [
        ("phi3", {}, set()),
        ("qwen3", {}, set()),
        ("olmo2", {}, set()),
        ("gemma", {}, set()),
        ("modernbert", {}, set()),
        ("gpt_neox", {}, {"qkv_proj", "output"}),
        ("qwen2", {}, {"q_proj", "k_proj", "v_proj"}),  # q, k and v biased, o not
        ("llama", {"attention_bias": True}, {"q_proj", "k_proj", "v_proj", "output"}),  # a checkpoint's own setting
        ("modernbert", {"attention_bias": True}, {"qkv_proj", "output"}),
    ],
)
def test_a_projection_adds_a_bias_only_where_the_layer_has_that_tensor(tmp_path, family, overrides, biased):
    model, tokenizer = loaded_case(tmp_path, family, **overrides)
    trace, _ = flow_of(model, tokenizer, 0)
    fig, attention = shape_flow(trace), model.layers[0].attention
    drawn = [name for name in BIAS_LETTERS if name in trace.names and " · W_" in trace.step(name).op]
    assert drawn and set(drawn) >= biased
    for name in drawn:
        has = getattr(attention, MODULES[name]).bias is not None
        assert has == (name in biased)
        assert (f"+ b_{BIAS_LETTERS[name]}" in box_text(fig, name)) == has, (name, trace.step(name).op)


def test_the_embedding_projection_says_its_bias_and_what_the_embeddings_sum(tmp_path):
    from families import make_family

    model, tokenizer = load_model(make_family(tmp_path / "electra", "electra"))
    trace, _ = flow_of(model, tokenizer, 0)
    assert "word + token type + position embeddings, then LayerNorm, 16 wide" in trace.step("embedding").op
    assert "x · W_Pᵀ + b_P (E → D)" in " ".join(trace.step("embed_proj").op.split())
    model, tokenizer = loaded_case(tmp_path, "opt", word_embed_proj_dim=16, do_layer_norm_before=False)  # OPT-350m
    assert model.embeddings.project.bias is None
    trace, _ = flow_of(model, tokenizer, 0)
    assert trace.step("embedding").op == "word embeddings, 16 wide"  # its positions come after the projection
    assert "b_P" not in trace.step("embed_proj").op and "then position embeddings added" in trace.step("embed_proj").op


@pytest.mark.parametrize("family", ["gemma", "gemma2", "gemma3_text"])
def test_gemmas_norms_multiply_by_one_plus_their_weight(loaded, family):
    model, _ = loaded(family)
    assert model.config.norms.norm == "rms_norm_offset"
    trace, _ = flow(loaded, family, 0)
    fig = shape_flow(trace)
    assert "attention_norm(x): RMSNorm times (1 + its weight), before the attention (pre-norm)" in box_text(
        fig, "input"
    )
    if family == "gemma3_text":
        assert "RMSNorm of Q over each head's d, times (1 + its weight)" in box_text(fig, "q_norm")
        assert "RMSNorm of K over each head's d, times (1 + its weight)" in box_text(fig, "k_norm")


@pytest.mark.parametrize("family", ["qwen3", "olmo2"])
def test_plain_rms_norms_multiply_by_their_weight(loaded, family):
    trace, text = flow(loaded, family, 0)
    assert "times its weight" in box_text(shape_flow(trace), "q_norm") and "(1 + its weight)" not in text


def test_gemma3_full_layers_divide_positions_by_the_linear_rope_factor(loaded):
    model, _ = loaded("gemma3_text")
    assert (model.config.positions.rope_type, model.config.positions.rope_factor) == ("linear", 2.0)
    full, _ = flow(loaded, "gemma3_text", 2)
    fig = shape_flow(full)
    for name in ("q_rot", "k_rot"):
        assert "base 1000: the full layers'; linear rope scaling: positions ÷ 2" in box_text(fig, name)
    _, text = flow(loaded, "gemma3_text", 0)  # windowed: their own base, unscaled
    assert "base 50" in text and "rope scaling" not in text


def test_llama_names_its_rope_scaling_and_none_without(tmp_path):
    llama3 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, rope_theta=500.0)
    model, tokenizer = loaded_case(tmp_path, "llama", rope_parameters=dict(llama3, original_max_position_embeddings=16))
    trace, _ = flow_of(model, tokenizer, 0)
    assert "llama3 rope scaling: long wavelengths' θ_i ÷ 8" in trace.step("q_rot").op
    model, tokenizer = loaded_case(tmp_path / "plain", "llama")
    trace, text = flow_of(model, tokenizer, 0)
    assert "RoPE" in trace.step("q_rot").op and "rope scaling" not in text


def test_modernbert_layer_0_reads_x_unnormed_and_the_others_pre_norm(loaded):
    model, _ = loaded("modernbert")
    trace, text = flow(loaded, "modernbert", 0)
    torch.testing.assert_close(trace.tensor("input"), trace.tensor("block_input"))  # the Identity it has
    assert "x as it is: layer 0 has no norm before its attention" in box_text(shape_flow(trace), "input")
    assert "attention_norm(x)" not in text
    later, _ = flow(loaded, "modernbert", 1)
    assert "attention_norm(x): LayerNorm times its weight, before the attention (pre-norm)" in later.step("input").op


@pytest.mark.parametrize("family", ["phi3", "gpt_neox", "olmo2"])
def test_a_decoders_mask_says_causal(loaded, family):
    trace, _ = flow(loaded, family, 0)
    assert "causal: each query sees itself and the keys before it; pairs kept" in box_text(shape_flow(trace), "mask")


def test_an_encoders_mask_does_not_say_causal(loaded):
    trace, _ = flow(loaded, "modernbert", 1)
    assert "local window of 4" in trace.step("mask").op and "causal" not in trace.step("mask").op


def test_t5s_mask_is_its_position_bias_and_its_scores_unscaled(tmp_path):
    from families import make_seq2seq

    model, tokenizer = load_model(make_seq2seq(tmp_path / "t5", "t5"))
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    trace = trace_layer(model.encoder, ids, layer=0)  # the app's shape flow of an encoder-decoder
    L = trace.L
    fig = shape_flow(trace)
    mask = box_text(fig, "mask")
    assert "each head's learned bias for each query-key distance bucket" in mask
    assert f"pairs kept: {L * L} of L·S = {L * L}" in mask  # one head's pairs, all kept
    assert "each head's distance bias added" in box_text(fig, "masked_scores")
    assert "Q · Kᵀ · 1 (unscaled)" in " ".join(box_text(fig, "scores").split())


def test_deberta_position_terms_say_their_scale(loaded):
    trace, _ = flow(loaded, "deberta-v2", 0)
    scale = f"{trace.scaling:.4g}"
    assert f"Q · (K-projected relative position)ᵀ · {scale}, added" in trace.step("c2p").op
    assert f"K · (Q-projected relative position)ᵀ · {scale}, added" in trace.step("p2c").op


@pytest.mark.parametrize(
    "family, layer, scores, mask",
    [
        ("gemma2", 0, "Q · Kᵀ · 0.5 (1/√4: query_pre_attn_scalar)", "sliding window of 5"),
        ("deberta-v2", 0, "1/√(8·3): d times 1 + 2 position terms", "no mask: nothing dropped"),
        ("modernbert", 1, "Q · Kᵀ · 0.3536 (1/√8)", "local window of 4"),
    ],
)
def test_the_walk_says_the_layers_own_scaling_and_mask(loaded, family, layer, scores, mask):
    from ui.views.walk import steps_of

    model, _ = loaded(family)
    trace, _ = flow(loaded, family, layer)
    says = {s.title: s.says for s in steps_of(trace, model.config.attention.causal)}
    assert scores in says["Scores and scaling"] and "1/√d" not in says["Scores and scaling"]
    assert f"Here: {mask}" in says["Mask"]
    assert "One sentence alone has no padding" not in says["Mask"]


def test_a_post_norm_layer_names_the_norm_after_its_residual():
    """BERT's kind (the bundled model): no norm before the attention, LayerNorm(x + output) after it."""
    model, tokenizer = load_model(None)
    trace, _ = flow_of(model, tokenizer, 1)
    assert "then LayerNorm(x + this): the norm after the residual (post-norm)" in box_text(shape_flow(trace), "output")
    assert "pre-norm" not in box_text(shape_flow(trace), "input")


@pytest.mark.parametrize("family", ["gemma3_text", "olmo2"])
def test_a_pre_norm_or_sub_block_norm_layer_says_no_post_norm(loaded, family):
    trace, _ = flow(loaded, family, 0)
    assert "post-norm" not in box_text(shape_flow(trace), "output")
