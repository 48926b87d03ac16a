"""Each family's shape flow names its own steps: partial rotary, soft-capping, query_pre_attn_scalar, its window,
DeBERTa's position terms; read from the figure's box texts and hovers."""

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
