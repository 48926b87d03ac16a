"""The shape flow of each family's layer: a fused Q·K·V projection, an embedding projection, pre-norm blocks, the
checkpoint tensor each projection reads, rotary lanes, cross-attention, and every family's steps laid out in
stages that fit the screen (the figure's own checks: tests/unit/test_shapeflow.py)."""

import pytest
import torch
from test_shapeflow import box_text, rect

from attention.tracing.trace import trace_layer
from viz.shapeflow import shape_flow


def test_a_fused_qkv_projection_is_drawn_between_the_input_and_its_three_parts(tmp_path):
    """GPT-2: one c_attn makes Q, K and V together; the diagram shows it, then the three slices."""
    from families import make_family

    from attention import load_model

    model, tokenizer = load_model(make_family(tmp_path / "gpt2", "gpt2"))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    fig = shape_flow(trace_layer(model, ids, layer=1))
    L = ids.shape[1]
    assert "[B, L, 3·H·d]" in box_text(fig, "qkv_proj") and f"1 × {L} × 96" in box_text(fig, "qkv_proj")
    fused, source = rect(fig, "qkv_proj"), rect(fig, "input")
    assert source.y1 < fused.y0
    arrows = [a for a in fig.layout.annotations if a.showarrow]

    def arrow_between(a, b) -> bool:
        return any(x.ay == pytest.approx(a.y1) and x.y == pytest.approx(b.y0) and a.x0 <= x.x <= a.x1 for x in arrows)

    assert arrow_between(source, fused)
    for part in ("q_proj", "k_proj", "v_proj"):
        box = rect(fig, part)
        assert fused.y1 < box.y0 and arrow_between(fused, box)
        assert "columns" in box_text(fig, part)  # each is a slice of the fused projection
    assert "causal" in box_text(fig, "mask") or "pairs kept" in box_text(fig, "mask")


def test_an_embedding_projection_is_drawn_before_layer_0(tmp_path):
    """ELECTRA: embeddings E wide, projected to the layers' width D; the diagram of layer 0 starts there."""
    from families import make_family

    from attention import load_model

    model, tokenizer = load_model(make_family(tmp_path / "electra", "electra"))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    trace = trace_layer(model, ids, layer=0)
    assert trace.names[:3] == ["embedding", "embed_proj", "input"]
    assert trace.step("embedding").dims == ("B", "L", "E") and trace.step("embed_proj").dims == ("B", "L", "D")
    assert trace.step("embed_proj").where.startswith("attention/models/embeddings.py:")
    torch.testing.assert_close(trace.step("embed_proj").tensor, trace.step("input").tensor)
    with torch.no_grad():
        hidden = model(ids).hidden_states[0]
    torch.testing.assert_close(trace.step("input").tensor, hidden)
    fig = shape_flow(trace)
    assert "E = 16" in box_text(fig, "legend") and f"1 × {ids.shape[1]} × 16" in box_text(fig, "embedding")
    embed, proj, first = rect(fig, "embedding"), rect(fig, "embed_proj"), rect(fig, "input")
    assert embed.y1 < proj.y0 < proj.y1 < first.y0
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    for a, b in ((embed, proj), (proj, first)):
        assert any(x.ay == pytest.approx(a.y1) and x.y == pytest.approx(b.y0) for x in arrows)
    assert "embedding" not in trace_layer(model, ids, layer=1).names  # only layer 0 reads the projection


def test_a_pre_norm_block_shows_the_hidden_states_before_the_norm(tmp_path):
    """GPT-2 normalises before its attention: the diagram shows x, then attention_norm(x) as the input."""
    from families import make_family

    from attention import load_model

    model, tokenizer = load_model(make_family(tmp_path / "gpt2", "gpt2"))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    trace = trace_layer(model, ids, layer=1)
    assert trace.names[:2] == ["block_input", "input"]
    with torch.no_grad():
        hidden = model(ids).hidden_states[1]
        normed = model.layers[1].attention_norm(hidden)
    torch.testing.assert_close(trace.step("block_input").tensor, hidden)
    torch.testing.assert_close(trace.step("input").tensor, normed)
    assert "pre-norm" in trace.step("input").op
    fig = shape_flow(trace)
    assert rect(fig, "block_input").y1 < rect(fig, "input").y0


@pytest.mark.parametrize(
    "family, step, name",
    [
        ("distilbert", "q_proj", "attention.q_lin"),
        ("distilbert", "output", "attention.out_lin"),
        ("gpt2", "qkv_proj", "attn.c_attn"),
        ("bert", "k_proj", "attention.self.key"),
        ("llama", "v_proj", "self_attn.v_proj"),
    ],
)
def test_each_projection_names_the_checkpoint_tensor_it_uses(tmp_path, family, step, name):
    """The diagram speaks the family's own names (DistilBERT's q_lin, GPT-2's c_attn) beside our code."""
    from families import make_family

    from attention import load_model

    model, tokenizer = load_model(make_family(tmp_path / family, family))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    trace = trace_layer(model, ids, layer=1)
    assert trace.step(step).weights == name
    assert model.load_report.weight_names[
        f"layers.1.{dict(output='attention.o_proj').get(step, 'attention.' + step)}.weight"
    ].endswith(f"1.{name}.weight")
    assert f"weights: {name}" in " ".join(box_text(shape_flow(trace), step).split())


def test_rotary_steps_sit_on_their_lanes_and_no_arrow_crosses_a_box(tmp_path):
    """Llama: Q and K are rotated after the split into heads; the arrows run through the rotation boxes,
    never over another box's text."""
    from families import make_family

    from attention import load_model

    model, tokenizer = load_model(make_family(tmp_path / "llama", "llama"))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    fig = shape_flow(trace_layer(model, ids, layer=1))
    boxes = {s.name: s for s in fig.layout.shapes if s.type == "rect" and s.name}
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    for a, b in (("q_heads", "q_rot"), ("k_heads", "k_rot"), ("k_rot", "k_shared")):
        top, low = boxes[a], boxes[b]
        assert any(x.ay == pytest.approx(top.y1) and x.y == pytest.approx(low.y0) for x in arrows), (a, b)
    for x in arrows:  # a vertical arrow passes through no box but its two ends
        if x.ax != x.x:
            continue
        lo, hi = sorted((x.ay, x.y))
        crossed = [n for n, r in boxes.items() if r.x0 < x.x < r.x1 and lo + 1 < r.y0 and r.y1 < hi - 1]
        assert not crossed, (x.x, lo, hi, crossed)


# ---- laid out for the screen: every family's steps, in stages that fit -----------------------------------

FAMILY_STEPS = {
    "bert": {"q_proj", "k_view", "v_heads", "scores", "mask", "probs", "heads", "merged", "output"},
    "gpt2": {"block_input", "qkv_proj", "q_proj", "k_proj", "v_proj", "mask", "masked_scores"},
    "llama": {"q_rot", "k_rot", "k_shared", "v_shared", "masked_scores"},
    "electra": {"embedding", "embed_proj", "input"},
}


def family_trace(tmp_path, family, **overrides):
    from families import make_family

    from attention import load_model

    model, tokenizer = load_model(make_family(tmp_path / family, family, **overrides))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    return trace_layer(model, ids, layer=0 if family == "electra" else 1)


def drawn_steps(trace, font_size, width, height) -> list[str]:
    """Every step drawn over all the stages, each stage's figure checked to fit ``height``."""
    from viz.shapeflow import flow_stages

    names = []
    for i, stage in enumerate(flow_stages(trace, font_size, width, height)):
        fig = shape_flow(trace, font_size=font_size, width=width, height=height, stage=i)
        assert fig.layout.height <= height and fig.layout.width <= width
        assert fig.layout.meta["stage"] == i
        drawn = [c[0] for t in fig.data if t.customdata is not None for c in t.customdata]
        assert drawn == stage
        names += drawn
    return names


@pytest.mark.parametrize("family", list(FAMILY_STEPS))
@pytest.mark.parametrize("font_size, width, height", [(14, 466, 640), (18, 606, 608)])
def test_every_step_of_each_family_is_drawn_once_in_stages_that_fit(tmp_path, family, font_size, width, height):
    kv = dict(num_key_value_heads=2) if family == "llama" else {}  # K/V shared by groups
    trace = family_trace(tmp_path, family, **kv)
    assert FAMILY_STEPS[family] <= set(trace.names)
    names = drawn_steps(trace, font_size, width, height)
    assert sorted(names) == sorted(trace.names)


def test_a_cross_attention_layer_reads_q_from_the_decoder_and_k_v_from_the_encoder(tmp_path):
    from families import make_seq2seq

    from attention import load_model
    from viz.shapeflow import cross_attention_flow

    model, tokenizer = load_model(make_seq2seq(tmp_path / "bart", "bart"))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    decoder = torch.tensor([[model.config.encoder_decoder.decoder_start_token_id, 5, 6]])
    fig = cross_attention_flow(model, ids, decoder, layer=1)
    L, S = decoder.shape[1], ids.shape[1]
    assert L != S
    assert f"[B, S, D]  =  1 × {S} × 32" in box_text(fig, "memory")
    assert f"1 × {L} × 32" in box_text(fig, "input") and f"1 × 2 × {L} × {S}" in box_text(fig, "probs")
    assert "memory · W_Kᵀ" in box_text(fig, "k_proj") and "x · W_Qᵀ" in box_text(fig, "q_proj")
    assert "attention/models/blocks.py" in box_text(fig, "memory")
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    memory, source = rect(fig, "memory"), rect(fig, "input")
    for part, start in (("q_proj", source), ("k_proj", memory), ("v_proj", memory)):
        box = rect(fig, part)
        assert any(x.ay == pytest.approx(start.y1) and x.y == pytest.approx(box.y0) for x in arrows), part
    with torch.no_grad():
        out = model(ids, decoder_input_ids=decoder)
    from attention.tracing.trace import trace_cross_attention

    trace = trace_cross_attention(model, ids, decoder, layer=1)
    torch.testing.assert_close(trace.tensor("probs"), out.cross_attentions[1])
    torch.testing.assert_close(trace.tensor("memory"), out.encoder_last_hidden_state)
    assert sorted(drawn_steps(trace, 18, 606, 608)) == sorted(trace.names)


def test_the_stages_are_as_few_as_a_greedy_cut_and_share_the_rows_evenly():
    from viz.flow_layout import Box, greedy_cut, stages

    rows = [[Box(f"r{i}", 0.0, 0.0, 10.0)] for i in range(7)]  # 100 px each, 28 px between: 3 rows fit in 400
    heights = {row[0].name: 100.0 for row in rows}
    assert [b - a for a, b in greedy_cut([100.0] * 7, 400, 14)] == [3, 3, 1]
    cut = stages(rows, heights, 400, 14)
    assert sorted(len(stage) for stage in cut) == [2, 2, 3]
    assert [row for stage in cut for row in stage] == rows  # in order, each row once
    tall = [[Box("tall", 0.0, 0.0, 10.0)]]  # a row taller than the room is a stage of its own
    assert [len(s) for s in stages(tall + rows[:2], {**heights, "tall": 900.0}, 400, 14)] == [1, 2]


def test_llamas_last_stage_is_not_left_with_a_single_box(tmp_path):
    from viz.shapeflow import flow_stages

    trace = family_trace(tmp_path, "llama", num_key_value_heads=2)
    cut = flow_stages(trace, 14, 720, 640)  # the design width: greedily 13, 8 and 1 boxes
    assert len(cut) == 3 and min(len(stage) for stage in cut) >= 5, [len(stage) for stage in cut]
    assert sorted(drawn_steps(trace, 14, 720, 640)) == sorted(trace.names)
