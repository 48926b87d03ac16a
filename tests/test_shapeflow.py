"""The shape-flow figure and the tensor heatmap: what a person sees, read from the recorded trace."""

import dataclasses
import html
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from attention import BertConfig, BertModel, MultiHeadAttention
from attention.trace import Trace, head_matrix, trace_layer
from viz._style import HIGHLIGHT
from viz.shapeflow import shape_flow, tensor_heatmap

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "The animal didn't cross the street because it was too tired."
NINE = "The cat sat on the mat!"  # 9 tokens with [CLS] and [SEP]


def trace_of(minilm, texts, layer=0, **kwargs):
    model, tok = minilm
    enc = tok(texts, return_tensors="pt", **kwargs)
    return trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=layer)


@pytest.fixture(scope="module")
def trace16(minilm):
    return trace_of(minilm, SENTENCE)


@pytest.fixture(scope="module")
def padded(minilm):
    return trace_of(minilm, [SENTENCE, "It was tired."], padding=True)


def box_text(fig: go.Figure, name: str) -> str:
    """Everything written in the box of step `name` and in its hover, unescaped, tags and line breaks removed."""
    parts = [a.text for a in fig.layout.annotations if a.name == name]
    assert parts, f"no box for {name}"
    parts += [
        h for t in fig.data if t.customdata is not None for c, h in zip(t.customdata, t.hovertext) if c[0] == name
    ]
    text = re.sub(r"<br>", "\n", "\n".join(parts))
    return html.unescape(re.sub(r"<[^>]+>", "", text)).replace("\u00a0", " ")


def squeeze(text: str) -> str:
    return "".join(text.split())


def rect(fig: go.Figure, name: str):
    (shape,) = [s for s in fig.layout.shapes if s.name == name and s.type == "rect"]
    return shape


def test_each_box_shows_the_real_numbers_of_this_input(minilm, trace16):
    nine = trace_of(minilm, NINE)
    assert nine.L == 9
    assert "1 × 12 × 16 × 16" in box_text(shape_flow(trace16), "scores")
    assert "1 × 12 × 9 × 9" in box_text(shape_flow(nine), "scores")
    assert "1 × 12 × 16 × 16" not in box_text(shape_flow(nine), "scores")
    fig = shape_flow(trace16)
    for step in trace16.steps:
        text = box_text(fig, step.name)
        assert step.title in text and squeeze(step.op) in squeeze(text)
        if step.shape is not None:
            assert f"[{', '.join(step.dims)}]" in text and " × ".join(map(str, step.shape)) in text
    assert "[B, H, L, S]" in box_text(fig, "probs") and "[B, L, H·d]" in box_text(fig, "q_proj")
    assert "1 × 16 × 12 × 32" in box_text(fig, "q_view") and "1 × 12 × 16 × 32" in box_text(fig, "v_heads")


def test_each_box_hovers_its_code_and_whole_path_lineno_in_monospace(trace16):
    fig = shape_flow(trace16)
    lines = (ROOT / "attention" / "dot_product.py").read_text(encoding="utf-8").splitlines()
    matmul = next(i for i, line in enumerate(lines, 1) if "torch.matmul(q, k.transpose" in line)
    assert f"attention/dot_product.py:{matmul}" in box_text(fig, "scores")
    assert "torch.matmul(q, k.transpose(-2, -1), out=reused)" in squeeze(box_text(fig, "scores")).replace(",", ", ")
    for step in trace16.steps:
        text = box_text(fig, step.name)
        assert squeeze(step.code) in squeeze(text), step.name  # wrapped lines, same code
        assert step.where in text
    (hits,) = [t for t in fig.data if t.customdata is not None]
    assert "monospace" in hits.hoverlabel.font.family
    assert not [a for a in fig.layout.annotations if "matmul" in a.text]  # the code is never wrapped into a box


def test_the_figure_is_drawn_from_the_trace_and_escapes_its_text(trace16):
    step = dataclasses.replace(
        trace16.step("scores"),
        title="<i>mine</i>",
        op="a -> b < c",
        code='x = f("<b>")  # -> y',
        path="elsewhere.py",
        lineno=7,
        linenos=(7,),
    )
    trace = Trace(trace16.layer, [step if s.name == "scores" else s for s in trace16.steps])
    fig = shape_flow(trace)
    text = box_text(fig, "scores")
    assert "<i>mine</i>" in text and "a -> b < c" in text and 'x = f("<b>")' in text
    assert "elsewhere.py:7" in text and "torch.matmul" not in text
    (hits,) = [t for t in fig.data if t.customdata is not None]
    raw = " ".join(a.text for a in fig.layout.annotations if a.name == "scores") + " ".join(hits.hovertext)
    assert "&lt;i&gt;mine" in raw and "&lt;b&gt;" in raw and "-&gt; b &lt; c" in raw and "<i>" not in raw


def test_every_step_has_exactly_one_invisible_click_area_covering_its_box(trace16, padded):
    for trace in (trace16, padded):
        fig = shape_flow(trace)
        (hits,) = [t for t in fig.data if t.customdata is not None]
        names = [c[0] for c in hits.customdata]
        assert sorted(names) == sorted(trace.names) and len(set(names)) == len(names)
        assert hits.marker.color == "rgba(0,0,0,0)"
        for name, y, length, base, thickness in zip(names, hits.y, hits.x, hits.base, hits.width):
            box = rect(fig, name)  # the clickable bar is the box: click anywhere inside it
            assert (base, base + length) == pytest.approx((box.x0, box.x1))
            assert (y - thickness / 2, y + thickness / 2) == pytest.approx((box.y0, box.y1))


def test_the_selected_box_is_highlighted(trace16):
    fig = shape_flow(trace16, selected="probs")
    assert rect(fig, "probs").line.color == HIGHLIGHT
    assert all(s.line.color != HIGHLIGHT for s in fig.layout.shapes if s.name != "probs")
    assert all(s.line.color != HIGHLIGHT for s in shape_flow(trace16).layout.shapes)


def test_no_mask_says_nothing_is_dropped_and_a_padded_batch_shows_its_mask(trace16, padded):
    fig = shape_flow(trace16)
    assert "no mask: nothing dropped" in box_text(fig, "mask") and "S = 16" in box_text(fig, "mask")
    assert rect(fig, "mask").line.dash == "dash"
    assert not [a for a in fig.layout.annotations if a.name == "masked_scores"]
    fig = shape_flow(padded)
    mask = " ".join(box_text(fig, "mask").split())  # however the lines wrap
    assert "[B, 1, 1, S]" in mask and "2 × 1 × 1 × 16" in mask and "16, 6 of S = 16" in mask
    assert "2 × 12 × 16 × 16" in box_text(fig, "masked_scores")
    assert "B = 2" in box_text(fig, "legend") and "S = 16" in box_text(fig, "legend")
    m, t = rect(fig, "mask"), rect(fig, "masked_scores")  # an arrow from the mask into the masked scores
    assert any(
        a.showarrow and a.ax == pytest.approx(m.x1) and a.x == pytest.approx(t.x0) for a in fig.layout.annotations
    )


def test_a_sentence_pair_is_named_in_the_legend(minilm):
    pair = trace_of(minilm, "The cat sat on the mat.", text_pair="It was warm.")
    assert "sentence pair: 9 + 5 tokens" in box_text(shape_flow(pair), "legend")


def test_the_figure_is_fixed_and_text_scales_with_font_size(trace16):
    small, large = shape_flow(trace16), shape_flow(trace16, font_size=22)
    for fig in (small, large):
        assert fig.layout.xaxis.fixedrange and fig.layout.yaxis.fixedrange
        assert not fig.layout.xaxis.visible and not fig.layout.yaxis.visible
        assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # top to bottom
    header = [a for a in large.layout.annotations if a.name == "probs" and "softmax" in a.text][0]
    assert header.font.size == 22
    assert large.layout.height > small.layout.height
    assert rect(small, "input").y1 < rect(small, "q_proj").y0 < rect(small, "scores").y0 < rect(small, "output").y0


def test_grouped_query_attention_draws_the_shared_heads():
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
    model.layers[1].attention = MultiHeadAttention(32, 4, num_kv_heads=2).eval()
    fig = shape_flow(trace_layer(model, torch.randint(5, 99, (1, 7)), layer=1))
    assert "[B, G, S, d]" in box_text(fig, "k_heads") and "1 × 2 × 7 × 8" in box_text(fig, "k_heads")
    assert "1 × 4 × 7 × 8" in box_text(fig, "v_shared") and "G = 2" in box_text(fig, "legend")


# ---- tensor_heatmap --------------------------------------------------------------------------


def test_tensor_heatmap_shows_the_matrix_with_dropped_cells_empty(padded, minilm):
    matrix, rows, cols = head_matrix(padded, "masked_scores", 3, batch=1)
    tokens = minilm[1]([SENTENCE, "It was tired."], padding=True).tokens(1)
    fig = tensor_heatmap(matrix, tokens, tokens, title="masked scores")
    heat = fig.data[0]
    expected = np.where(np.isneginf(matrix), np.nan, matrix)
    np.testing.assert_array_equal(np.asarray(heat.z, dtype=float), expected)
    assert np.isnan(np.asarray(heat.z, dtype=float)[:, 6:]).all()
    assert heat.customdata is None and heat.text is None  # nothing per cell but the value
    assert (heat.y[0], heat.x[10]) == ("[CLS]·0", "[PAD]·10")  # each row and column its own category
    assert heat.hovertemplate == "%{y} · %{x}: %{z:.3f}<extra></extra>" and heat.hoverongaps is False
    assert np.asarray(heat.z).dtype == np.float32
    assert heat.zmid == 0 and heat.zmin == -heat.zmax
    assert "−∞" in heat.colorbar.title.text


def test_tensor_heatmap_of_probabilities_uses_a_zero_to_one_scale(trace16, minilm):
    matrix, _, _ = head_matrix(trace16, "probs", 0)
    tokens = minilm[1](SENTENCE).tokens()
    heat = tensor_heatmap(matrix, tokens, tokens, kind="probs").data[0]
    np.testing.assert_array_equal(np.asarray(heat.z, dtype=float), matrix)
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    with pytest.raises(ValueError, match="kind"):
        tensor_heatmap(matrix, kind="logits")


def test_tensor_heatmap_labels_positions_so_repeated_tokens_keep_their_row(trace16, minilm):
    tokens = minilm[1](SENTENCE).tokens()
    assert tokens.count("the") == 2
    fig = tensor_heatmap(head_matrix(trace16, "q_heads", 0)[0], tokens, None, width=400)
    assert list(fig.layout.yaxis.tickvals) == [f"{t}·{i}" for i, t in enumerate(tokens)]
    assert list(fig.layout.yaxis.ticktext) == tokens
    assert len(set(fig.data[0].y)) == 16  # both "the" rows kept
    assert list(fig.layout.xaxis.ticktext)[:3] == ["0", "5", "10"]  # d = 32 indexes, thinned
    wide = tensor_heatmap(head_matrix(trace16, "input", 0)[0], tokens, None)
    ticks = [int(v.split("·")[1]) for v in wide.layout.xaxis.tickvals]
    assert 3 <= len(ticks) <= 20 and ticks[0] == 0 and len(set(np.diff(ticks))) == 1
    assert list(wide.layout.xaxis.ticktext) == [str(t) for t in ticks]


def test_tensor_heatmap_escapes_labels():
    fig = tensor_heatmap(np.zeros((2, 2)), ["<b>x</b>", "a"], ["b", "c"])
    assert fig.layout.yaxis.ticktext[0] == "&lt;b&gt;x&lt;/b&gt;"
    assert "<b>x" not in fig.to_json()


# ---- nothing spills: text in its box, the diagram in its column --------------------------------------

GLYPH = {"sans": 0.5, "bold": 0.56, "mono": 0.61}  # average glyph widths in font sizes, as the figure assumes


def line_widths(annotation) -> list[float]:
    """Estimated drawn width (px) of each line of an annotation: bold, plain or monospace glyphs."""
    mono = "monospace" in (annotation.font.family or "")
    widths = []
    for line in annotation.text.split("<br>"):
        width = 0.0
        for bold, part in enumerate(re.split(r"</?b>", line)):  # odd parts are inside <b>…</b>
            plain = html.unescape(re.sub(r"<[^>]+>", "", part))
            kind = "mono" if mono else "bold" if bold % 2 else "sans"
            width += len(plain) * GLYPH[kind] * annotation.font.size
        widths.append(width)
    return widths


@pytest.mark.parametrize("tokens", [41, 128])
@pytest.mark.parametrize("width, font_size", [(478, 14), (800, 14), (619, 22), (1040, 22)])
def test_every_line_of_text_fits_its_box_and_the_diagram_its_width(minilm, tokens, width, font_size):
    model, tok = minilm
    ids = torch.tensor([[101] + [1996] * (tokens - 2) + [102]])
    trace = trace_layer(model, ids, torch.ones_like(ids), torch.zeros_like(ids), layer=0)
    fig = shape_flow(trace, font_size=font_size, width=width)
    assert fig.layout.width <= width
    for step in trace.names:
        box = rect(fig, step)
        inner = box.x1 - box.x0 - 1.3 * font_size  # the text's left and right padding
        for note in [a for a in fig.layout.annotations if a.name == step]:
            assert note.x >= box.x0 and max(line_widths(note)) <= inner + 0.5, (step, note.text)
    legend = next(a for a in fig.layout.annotations if a.name == "legend")
    assert max(line_widths(legend)) <= fig.layout.width


def test_the_whole_path_is_in_the_hover_never_cut(trace16):
    fig = shape_flow(trace16, font_size=22, width=619)
    (hits,) = [t for t in fig.data if t.customdata is not None]
    for step, hover in zip(hits.customdata, hits.hovertext):
        assert trace16.step(step[0]).where in html.unescape(hover)
    assert not any("…" in a.text for a in fig.layout.annotations)


def test_the_diagram_narrows_only_to_its_readable_width():
    from viz.shapeflow import design_width, min_width

    assert min_width(14) <= 466 < design_width(14) and min_width(18) <= 606  # the page's columns


@pytest.mark.parametrize("n", [41, 80, 128])
@pytest.mark.parametrize("width, font_size", [(314, 14), (800, 14), (1040, 22)])
def test_tensor_heatmap_fits_its_width_and_keeps_column_labels_apart(n, width, font_size):
    tokens = [f"word{i}" for i in range(n)]
    fig = tensor_heatmap(
        np.zeros((n, n)), tokens, tokens, title="softmax", font_size=font_size, kind="probs", width=width
    )
    assert fig.layout.width == width
    plot = width - fig.layout.margin.l - fig.layout.margin.r
    ticks = [list(fig.data[0].x).index(v) for v in fig.layout.xaxis.tickvals]  # the labelled positions
    spacing = plot / n * (ticks[1] - ticks[0])
    assert fig.layout.xaxis.tickangle == -45 and 1.2 * font_size <= spacing * 0.71  # tilted, never touching


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


@pytest.mark.parametrize("font_size, width", [(14, 466), (18, 606)])
def test_every_box_speaks_at_least_14_px_and_18_in_a_presentation(trace16, font_size, width):
    fig = shape_flow(trace16, font_size=font_size, width=width, height=640)
    boxes = {s.name for s in fig.layout.shapes if s.type == "rect"}
    texts = [a for a in fig.layout.annotations if a.name in boxes | {"legend"}]
    assert texts and all(a.font.size >= font_size for a in texts)
    labels = [a for a in fig.layout.annotations if a.text and a.name is None]  # the arrows' Q, Kᵀ, V
    assert all(a.font.size >= font_size for a in labels)


def test_a_stage_holds_the_selected_step_and_names_the_head(trace16):
    from viz.shapeflow import flow_stages

    stages = flow_stages(trace16, 18, 606, 608)
    assert len(stages) > 1  # a layer's steps do not fit one presentation screen at once
    fig = shape_flow(trace16, selected="k_view", font_size=18, width=606, height=608, head=5)
    assert fig.layout.meta["stage"] == next(i for i, s in enumerate(stages) if "k_view" in s)
    assert rect(fig, "k_view").line.color == HIGHLIGHT
    assert "head 5" in box_text(fig, "legend") and f"stage {fig.layout.meta['stage'] + 1} of" in box_text(fig, "legend")
    assert "of head 5" in box_text(fig, "k_view")  # the hover: the tensor shown is this head's


def test_the_boxes_hold_no_code_and_the_whole_path_is_in_the_hover(trace16):
    fig = shape_flow(trace16, font_size=18, width=606, height=608, stage=0)
    for note in fig.layout.annotations:
        assert "mha.py" not in note.text and "record(" not in note.text


def test_a_cross_attention_layer_reads_q_from_the_decoder_and_k_v_from_the_encoder(tmp_path):
    from families import make_seq2seq

    from attention import load_model
    from viz.shapeflow import cross_attention_flow

    model, tokenizer = load_model(make_seq2seq(tmp_path / "bart", "bart"))
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt")["input_ids"]
    decoder = torch.tensor([[model.config.decoder_start_token_id, 5, 6]])
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
    from attention.trace import trace_cross_attention

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


def test_a_heads_map_made_clickable_has_a_point_on_each_cell_hovering_as_the_cell(trace16):
    from viz import head_heatmap
    from viz.tensor_map import clickable_cells

    probs, _, _ = head_matrix(trace16, "probs", 3)
    tokens = [f"t{i}" for i in range(16)]
    fig = clickable_cells(head_heatmap(probs, tokens, font_size=14, width=300))
    heatmap, cells = fig.data
    assert heatmap.hoverinfo == "skip" and cells.marker.opacity == 0  # the points hover for the cells, unseen
    assert len(cells.x) == 16 * 16 and (cells.y[17], cells.x[17]) == (heatmap.y[1], heatmap.x[1])
    assert cells.customdata[17][2] == pytest.approx(float(probs[1, 1]))
    assert "%{customdata[0]} → %{customdata[1]}" in cells.hovertemplate
    assert list(fig.layout.xaxis.range) == [-0.5, 15.5] and list(fig.layout.yaxis.range) == [15.5, -0.5]


def test_the_heads_map_in_a_narrow_column_lays_its_colour_bar_under_the_cells(trace16):
    from viz import head_heatmap
    from viz.tensor_map import bar_under

    probs, _, _ = head_matrix(trace16, "probs", 3)
    tokens = [f"t{i}" for i in range(16)]
    beside = head_heatmap(probs, tokens, font_size=14, width=309, height=640)
    under = bar_under(head_heatmap(probs, tokens, font_size=14, width=309, height=640), tokens, tokens, 14, width=309)
    assert under.data[0].colorbar.orientation == "h" and under.layout.width <= 309
    cells = [fig.layout.width - fig.layout.margin.l - fig.layout.margin.r for fig in (beside, under)]
    assert cells[1] >= 1.5 * cells[0]  # the cells take the bar's width


def test_a_short_tensors_colour_bar_keeps_its_tick_labels_apart(trace16):
    from viz.shapeflow import tensor_heatmap as draw

    q, _, _ = head_matrix(trace16, "q_proj", 3)
    short, tall = draw(q, font_size=14, width=380, height=154), draw(q, font_size=14, width=380)
    cells = short.layout.height - short.layout.margin.t - short.layout.margin.b
    assert short.data[0].colorbar.nticks <= cells / 21 + 1 < tall.data[0].colorbar.nticks
