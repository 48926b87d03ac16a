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
from attention.tracing.trace import Trace, head_matrix, trace_layer
from viz._style import HIGHLIGHT
from viz.shapeflow import shape_flow, tensor_heatmap

ROOT = Path(__file__).resolve().parents[2]
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
    lines = (ROOT / "attention" / "core" / "dot_product.py").read_text(encoding="utf-8").splitlines()
    matmul = next(i for i, line in enumerate(lines, 1) if "torch.matmul(q, k.transpose" in line)
    assert f"attention/core/dot_product.py:{matmul}" in box_text(fig, "scores")
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


@pytest.mark.parametrize("min_label", [None, 12], ids=["page", "presentation"])
def test_byte_level_pieces_read_as_text_and_half_a_character_as_its_bytes_the_raw_piece_in_the_hover(min_label):
    """Byte-level BPE's pieces (transformers' GPT-2 alphabet) on both axes of a tensor and of a head's map, on a
    page and in a presentation (whose rows were once labelled with the raw pieces, "Ġanimal")."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    from viz import head_heatmap

    alphabet = bytes_to_unicode()
    raw = [b" the", b" \xf0\x9f", b"\x98\x80", b" animal"]  # an emoji cut across two pieces
    pieces = ["".join(alphabet[b] for b in r) for r in raw]
    shown = [" the", " &lt;0xF0 0x9F&gt;", "&lt;0x98 0x80&gt;", " animal"]
    for fig in (
        tensor_heatmap(np.eye(4), pieces, pieces, min_label=min_label, byte_level=True),
        head_heatmap(np.eye(4), pieces, min_label=min_label, byte_level=True),
    ):
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            labelled = dict(zip(axis.tickvals, axis.ticktext))
            assert labelled == {f"{piece}·{i}": shown[i] for i, piece in enumerate(pieces)}, labelled
    tensor = tensor_heatmap(np.eye(4), pieces, pieces, min_label=min_label, byte_level=True)
    assert tensor.layout.margin.l >= len(" <0xF0 0x9F>") * 0.62 * 14  # the rows' room: their text as shown, not raw
    word_piece = tensor_heatmap(np.eye(2), ["café", "é"], None, min_label=min_label)  # WordPiece: its own letters
    assert list(word_piece.layout.yaxis.ticktext) == ["café", "é"]


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
