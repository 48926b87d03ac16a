"""Figures of the analysis views: what a person sees is the data that went in."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from plotly.colors import sample_colorscale

from attention import BertConfig, BertModel
from attention.analysis.query_key import QueryKey, query_key
from attention.analysis.stats import head_stats, pattern_labels, punctuation_mask
from attention.tracing.trace import trace_layer
from viz.ablation import ablation_figure
from viz.query_key import query_key_figure
from viz.rollout import attention_pair
from viz.stats import LAYER_SCALE, LAYER_SCALE_END, head_scatter, stats_frame

TOKENS = ["[CLS]", "the", "<b>x</b>", "saw", "the", "a&b", "[SEP]"]
ESCAPED = ["[CLS]", "the", "&lt;b&gt;x&lt;/b&gt;", "saw", "the", "a&amp;b", "[SEP]"]
LABELS = [f"{t}·{i}" for i, t in enumerate(ESCAPED)]


def random_maps(*shape, seed=0):
    weights = np.random.default_rng(seed).random(shape)
    return weights / weights.sum(axis=-1, keepdims=True)


def trace_named(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def axis_of(fig, trace, letter):
    """The layout axis a trace is drawn on, e.g. layout.yaxis2 for yaxis "y2"."""
    ref = getattr(trace, f"{letter}axis")
    return fig.layout[f"{letter}axis{ref[1:]}"]


def no_markup_from_tokens(fig):
    text = json.dumps(json.loads(fig.to_json()), ensure_ascii=False)  # to_json writes "<" as \u003c
    assert "<b>x" not in text and "&lt;b&gt;x&lt;/b&gt;" in text


# ---- query_key_figure ---------------------------------------------------------


@pytest.fixture(scope="module")
def qk():
    rng = np.random.default_rng(1)
    S, d = len(TOKENS), 8
    q, k = rng.normal(size=d).astype(np.float32), rng.normal(size=(S, d)).astype(np.float32)
    product = q * k
    scores = product.sum(-1) * d**-0.5
    probs = np.exp(scores) / np.exp(scores).sum()
    return QueryKey(3, 5, 2, q, k, product, scores, probs, d**-0.5)


def test_query_key_figure_shows_the_vectors_products_scores_and_probs(qk):
    fig = query_key_figure(qk, TOKENS)
    np.testing.assert_array_equal(trace_named(fig, "k").z, qk.k)
    np.testing.assert_array_equal(trace_named(fig, "q × k").z, qk.product)
    np.testing.assert_array_equal(np.asarray(trace_named(fig, "q").z), qk.q[None, :])
    np.testing.assert_allclose(trace_named(fig, "score").x, qk.scores)
    np.testing.assert_allclose(trace_named(fig, "probability").x, qk.probs)
    for name in ("k", "q × k", "score", "probability"):  # one row per key token, in order
        assert list(trace_named(fig, name).y) == LABELS
    assert list(trace_named(fig, "q").y) == [LABELS[2]]
    assert list(trace_named(fig, "q").x) == list(range(8)) == list(trace_named(fig, "q × k").x)


def test_query_key_figure_rows_are_shared_and_labelled_with_the_tokens(qk):
    fig = query_key_figure(qk, TOKENS)
    k = trace_named(fig, "k")
    rows = axis_of(fig, k, "y")
    assert list(rows.ticktext) == ESCAPED and list(rows.tickvals) == LABELS
    assert rows.autorange == "reversed" and rows.type == "category"  # first token on top
    for name in ("q × k", "score", "probability"):
        assert axis_of(fig, trace_named(fig, name), "y").matches == k.yaxis
    strip, products = trace_named(fig, "q"), trace_named(fig, "q × k")
    assert axis_of(fig, strip, "x").matches == products.xaxis  # q's dims above q × k's
    assert axis_of(fig, strip, "y").domain[0] > axis_of(fig, products, "y").domain[1]  # the strip on top


def test_query_key_figure_names_the_head_and_query_and_hovers_values(qk):
    fig = query_key_figure(qk, TOKENS, font_size=18)
    title = fig.layout.title.text
    assert "Layer 3" in title and "head 5" in title and "“&lt;b&gt;x&lt;/b&gt;” (position 2)" in title
    assert fig.layout.title.font.size == round(18 * 1.2) and fig.layout.font.size == 18
    for trace in fig.data:
        assert "%{z:" in trace.hovertemplate or "%{x:" in trace.hovertemplate
    assert "0.3536" in trace_named(fig, "score").hovertemplate  # the scaling, 8 ** -0.5
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax  # symmetric about 0
    assert fig.layout.coloraxis.cmax == pytest.approx(max(np.abs(qk.q).max(), np.abs(qk.k).max()))
    assert fig.layout.coloraxis2.cmax == pytest.approx(np.abs(qk.product).max())
    no_markup_from_tokens(fig)


@pytest.mark.parametrize("font_size, width", [(14, 700), (14, 1200), (22, 900), (22, 1240)])
def test_the_panels_titles_under_the_bars_stay_apart_however_narrow_the_bars(qk, font_size, width):
    """Side by side, the score's and the probability's titles ran together ("…scalingprobability") once the bars
    gave way to a narrow figure: each line, at 0.62 em a glyph, keeps within reach of its neighbour's."""
    fig = query_key_figure(qk, TOKENS, font_size=font_size, width=width)
    plot_w = fig.layout.width - fig.layout.margin.l - fig.layout.margin.r
    bottom = [fig.layout[f"xaxis{n}"] for n in range(2, 6)]  # the four panels of the key rows (k, q × k, score, p)
    spans = []
    for axis in bottom:
        centre = (axis.domain[0] + axis.domain[1]) / 2 * plot_w
        widest = max(len(line) for line in axis.title.text.split("<br>")) * 0.62 * font_size
        spans.append((centre - widest / 2, centre + widest / 2))
    for (_, right), (left, _) in zip(spans, spans[1:]):
        assert right <= left, (font_size, width, [a.title.text for a in bottom], spans)


def test_query_key_figure_refuses_tokens_that_do_not_match_the_keys(qk):
    with pytest.raises(ValueError, match="6 tokens given for 7 keys"):
        query_key_figure(qk, TOKENS[:-1])


def test_query_key_figure_from_a_recorded_forward_pass():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    trace = trace_layer(BertModel(config).eval(), torch.randint(5, 99, (1, 5)), layer=1)
    qk = query_key(trace, 2, 0)
    fig = query_key_figure(qk, list("abcde"))
    np.testing.assert_array_equal(trace_named(fig, "k").z, trace.step("k_heads").tensor[0, 2].numpy())
    np.testing.assert_array_equal(trace_named(fig, "probability").x, trace.step("probs").tensor[0, 2, 0].numpy())


def test_many_tokens_keep_the_figure_bounded_and_label_every_kth_row():
    S = 300
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=4), rng.normal(size=(S, 4))
    qk = QueryKey(0, 0, 0, q, k, q * k, (q * k).sum(-1) / 2, np.full(S, 1 / S), 0.5)
    fig = query_key_figure(qk, [f"t{i}" for i in range(S)])
    rows = axis_of(fig, trace_named(fig, "k"), "y")
    assert fig.layout.height < 1400 and 1 < len(rows.ticktext) < S
    assert len(trace_named(fig, "k").y) == S  # every row still drawn and hoverable


# ---- attention_pair -----------------------------------------------------------


def test_attention_pair_shows_both_maps_on_the_same_token_axes():
    raw, derived = random_maps(7, 7, seed=1), random_maps(7, 7, seed=2) * 0.5
    fig = attention_pair(raw, derived, TOKENS, "Rollout to layer 3")
    left, right = fig.data
    np.testing.assert_allclose(left.z, raw, rtol=1e-6)
    np.testing.assert_allclose(right.z, derived, rtol=1e-6)
    for trace in (left, right):
        assert list(trace.x) == list(trace.y) == LABELS  # "the·1" and "the·4" stay apart
        assert list(axis_of(fig, trace, "x").ticktext) == ESCAPED
        assert trace.coloraxis == "coloraxis"  # one colour scale for both
    assert list(fig.layout.yaxis.ticktext) == ESCAPED and fig.layout.yaxis.autorange == "reversed"
    assert fig.layout.yaxis2.matches == "y"
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == pytest.approx(max(raw.max(), derived.max()))
    assert "both" in fig.layout.coloraxis.colorbar.title.text
    assert [a.text for a in fig.layout.annotations] == ["Attention, mean over heads", "Rollout to layer 3"]
    assert "%{z:.3f}" in left.hovertemplate and "%{z:.3f}" in right.hovertemplate
    no_markup_from_tokens(fig)


def test_attention_pair_refuses_maps_that_do_not_match_the_labels():
    with pytest.raises(ValueError, match=r"\(7, 7\)"):
        attention_pair(np.eye(7), np.eye(6), TOKENS, "Flow")


# ---- head_scatter -------------------------------------------------------------


def test_head_scatter_puts_each_head_at_its_coordinates_with_layer_and_head_attached():
    n_layers, H = 3, 4
    layers, heads = np.repeat(np.arange(n_layers), H), np.tile(np.arange(H), n_layers)
    coords = np.random.default_rng(0).normal(size=(n_layers * H, 2))
    fig = head_scatter(coords, layers, heads)
    [trace] = fig.data
    assert list(trace.marker.color) == layers.tolist() and (trace.marker.cmin, trace.marker.cmax) == (0, n_layers - 1)
    points = {}
    for trace in fig.data:
        for x, y, (layer, head), hover in zip(trace.x, trace.y, trace.customdata, trace.hovertext):
            points[layer, head] = (x, y)
            assert hover == f"L{layer} H{head}"
    assert sorted(points) == sorted(zip(layers.tolist(), heads.tolist()))
    for i, (layer, head) in enumerate(zip(layers, heads)):
        assert points[layer, head] == tuple(coords[i])
    assert fig.layout.clickmode == "event+select" and fig.layout.yaxis.scaleanchor == "x"


def test_head_scatter_colours_thirty_layers_on_one_colour_bar_not_thirty_legend_rows():
    n_layers, H = 30, 9  # SmolLM2's 270 heads
    layers, heads = np.repeat(np.arange(n_layers), H), np.tile(np.arange(H), n_layers)
    fig = head_scatter(np.random.default_rng(0).normal(size=(n_layers * H, 2)), layers, heads)
    assert len(fig.data) == 1 and fig.data[0].showlegend is False
    marker = fig.data[0].marker
    assert marker.colorbar.title.text == "layer" and marker.showscale is not False
    scale = [colour for _, colour in marker.colorscale]
    assert scale[0] == sample_colorscale(LAYER_SCALE, [0])[0]  # layer 0 dark
    assert scale[-1] == sample_colorscale(LAYER_SCALE, [LAYER_SCALE_END])[0]  # the last layer light, not pale yellow


def test_head_scatter_shows_escaped_pattern_labels_on_hover():
    labels = ["vertical", "<b>x</b>", "broad", "diagonal"]
    fig = head_scatter(np.eye(4, 2), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), labels)
    hovers = [h for t in fig.data for h in t.hovertext]
    assert hovers == ["L0 H0<br>vertical", "L0 H1<br>&lt;b&gt;x&lt;/b&gt;", "L1 H0<br>broad", "L1 H1<br>diagonal"]
    no_markup_from_tokens(fig)
    with pytest.raises(ValueError, match="3 labels given for 4 heads"):
        head_scatter(np.eye(4, 2), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), labels[:3])


# ---- ablation_figure -----------------------------------------------------------


def test_ablation_figure_shows_cosines_per_layer_and_changes_per_head_with_masked_heads_crossed():
    n_layers, H = 4, 3
    cosine = np.array([1.0, 0.99, 0.97, 0.95, 0.9])
    change = np.random.default_rng(0).random((n_layers, H)) * 0.1
    masked = np.zeros((n_layers, H), dtype=bool)
    masked[1, 2] = masked[3, 0] = True
    fig = ablation_figure(cosine, change, 0.98765, masked)
    line, heatmap, crosses = fig.data
    assert list(line.x) == list(range(n_layers + 1))
    np.testing.assert_array_equal(line.y, cosine)
    assert list(axis_of(fig, line, "x").ticktext) == ["emb", "L0", "L1", "L2", "L3"]
    np.testing.assert_array_equal(heatmap.z, change)
    assert list(axis_of(fig, heatmap, "y").ticktext) == ["L0", "L1", "L2", "L3"]
    assert list(axis_of(fig, heatmap, "x").ticktext) == ["H0", "H1", "H2"]
    assert crosses.marker.symbol == "x" and crosses.xaxis == heatmap.xaxis
    assert sorted(zip(crosses.y, crosses.x)) == [(1, 2), (3, 0)]  # (layer, head) of the masked heads
    assert "0.9877" in fig.layout.title.text and "2 heads masked" in fig.layout.title.text


def test_a_deep_models_ablation_keeps_to_a_height_budget_with_lower_rows_and_fewer_labels():
    """30 layers × 9 heads (SmolLM2) at presentation's 22 px: within 560 px, each layer still a row (12 px or more),
    the labels spaced to stay apart (every third layer, every third stage of the line)."""
    change = np.random.default_rng(0).random((30, 9)) * 0.1
    fig = ablation_figure(np.ones(31), change, 0.99, np.array([[13, 8]]), font_size=22, height=560)
    line, heatmap, _ = fig.data
    assert fig.layout.height <= 560
    rows = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert rows / 30 >= 12
    y = axis_of(fig, heatmap, "y")
    assert list(y.ticktext) == [f"L{la}" for la in range(0, 30, 3)] and y.scaleratio < 1
    assert list(axis_of(fig, line, "x").ticktext) == (["emb"] + [f"L{la}" for la in range(30)])[::3]
    unbounded = ablation_figure(np.ones(31), change, 0.99, np.array([[13, 8]]), font_size=22)
    assert unbounded.layout.height > 1000  # ordinary mode: square cells, the page scrolls


def test_ablation_figure_takes_masked_heads_as_pairs_and_checks_shapes():
    change = np.zeros((2, 2))
    fig = ablation_figure(np.ones(3), change, 1.0, np.array([[1, 0]]))
    assert list(fig.data[2].x) == [0] and list(fig.data[2].y) == [1]
    assert "1 head masked" in fig.layout.title.text
    assert len(ablation_figure(np.ones(3), change, 1.0, np.zeros((0, 2), dtype=int)).data[2].x) == 0
    with pytest.raises(ValueError, match="n_layers \\+ 1"):
        ablation_figure(np.ones(2), change, 1.0, np.zeros((2, 2), dtype=bool))
    with pytest.raises(ValueError, match="outside 2 layers"):
        ablation_figure(np.ones(3), change, 1.0, np.array([[2, 0]]))


# ---- stats_frame ----------------------------------------------------------------


def test_stats_frame_has_one_row_per_head_with_its_statistics():
    n_layers, H, tokens = 3, 4, ["[CLS]", "the", "cat", ",", "sat", "[SEP]"]
    attn = random_maps(n_layers, H, 6, 6)
    special = [True, False, False, False, False, True]
    stats = head_stats(attn, special, [None, 0, 0, 0, 0, None], punctuation_mask(tokens))
    labels = pattern_labels(stats, len(tokens))
    frame = stats_frame(stats, labels)
    assert isinstance(frame, pd.DataFrame) and len(frame) == n_layers * H
    assert list(frame.columns) == ["layer", "head", "pattern", *stats]
    for row in frame.itertuples(index=False):
        layer, head = row.layer, row.head
        assert row.pattern == labels[layer, head]
        for name in stats:
            assert getattr(row, name) == pytest.approx(round(stats[name][layer, head], 3))
    assert list(frame["layer"]) == [0] * 4 + [1] * 4 + [2] * 4 and list(frame["head"]) == [0, 1, 2, 3] * 3
    assert frame.sort_values("entropy")["entropy"].is_monotonic_increasing  # numeric columns sort
    assert list(stats_frame(stats).columns) == ["layer", "head", *stats]


def test_stats_frame_refuses_statistics_of_different_shapes():
    with pytest.raises(ValueError, match="n_layers, H"):
        stats_frame({"entropy": np.zeros((2, 3)), "to_cls": np.zeros((2, 2))})


# ---- one way to name a head, on every figure's hover ----------------------------------------------


def shown_hovers(fig) -> list[str]:
    """Each point's hover as plotly writes it: %{x} and %{y} read the axis's tick label where the axis
    has one for that value (so "L%{y}" over an axis labelled "L3" shows "LL3")."""
    import re

    shown = []
    for trace in fig.data:
        template = trace.hovertemplate
        if not template or trace.hoverinfo == "skip":
            continue
        xs = np.asarray(trace.x if trace.x is not None else [], dtype=object)
        z = np.asarray(trace.z) if getattr(trace, "z", None) is not None else None
        points = (
            [(i, j) for i in range(z.shape[0]) for j in range(z.shape[1])]
            if z is not None
            else [(None, k) for k in range(len(xs))]
        )
        for i, j in points:
            x = trace.x[j] if trace.x is not None else j
            y = trace.y[i] if z is not None else trace.y[j]
            text = template.replace("<extra></extra>", "")
            for letter, value in (("x", x), ("y", y)):
                axis = fig.layout[f"{letter}axis{(getattr(trace, letter + 'axis') or letter)[1:]}"]
                labels = dict(zip(axis.tickvals, axis.ticktext)) if axis.ticktext else {}
                text = text.replace(f"%{{{letter}}}", str(labels.get(value, value)))
            hover = trace.hovertext
            if hover is not None:
                hover = np.asarray(hover, dtype=object)
                text = text.replace("%{hovertext}", str(hover[i, j] if z is not None else hover[j]))
            text = re.sub(r"%\{z[^}]*\}", "0.1", text)
            shown.append(text)
    return shown


def test_every_figure_names_a_head_l3_h1_on_hover():
    import re

    import viz

    rng = np.random.default_rng(0)
    change = rng.random((4, 3))
    figures = {
        "ablation": ablation_figure(np.ones(5), change, 1.0, np.array([[3, 1]])),
        "head scatter": head_scatter(rng.random((12, 2)), np.repeat(np.arange(4), 3), np.tile(np.arange(3), 4)),
        "overview": viz.overview_grid(random_maps(4, 3, 5, 5), list("abcde")),
        "coref grid": viz.head_grid(change, kind="margin"),
        "ranked heads": viz.ranked_heads([(3, 1, 0.9), (0, 2, 0.5)], {"first": 0.4}),
        "flip grid": viz.flip_grid(change > 0.5, change > 0.2, change > 0.3),
        "GQA grid": viz.gqa_change_grid(change, 1),
    }
    for name, fig in figures.items():
        hovers = shown_hovers(fig)
        assert any("L3 H1" in h for h in hovers), name
        for hover in hovers:
            assert not re.search(r"LL\d|HH\d|layer \d+,? head \d+", hover), f"{name}: {hover!r}"
    ablation = shown_hovers(figures["ablation"])
    assert f"L3 H1: mean |Δ attention| {change[3, 1]:.4f}" in ablation and "L3 H1: masked" in ablation


# ---- attention_pair in the width it is given ------------------------------------------------------


@pytest.mark.parametrize("n", [9, 41, 80, 128])
@pytest.mark.parametrize("width, font_size", [(800, 14), (1040, 22)])
def test_attention_pair_fits_its_width_side_by_side_or_one_above_the_other(n, width, font_size):
    from viz.heatmap import LINE_EM, MIN_TICK_PX
    from viz.rollout import pair_stacked

    tokens = [f"tok{i}" for i in range(n)]
    fig = attention_pair(
        random_maps(n, n), random_maps(n, n, seed=3), tokens, "Rollout", font_size=font_size, width=width
    )
    assert fig.layout.width <= width
    stacked = pair_stacked(tokens, font_size, width)
    assert stacked == (n >= (41 if font_size == 14 else 80))  # side by side, their cells would be slivers
    raw, derived = fig.data
    if stacked:  # the second map under the first, the same width
        assert raw.xaxis == "x" and derived.xaxis == "x2" and fig.layout.yaxis2.domain[1] < fig.layout.yaxis.domain[0]
        assert fig.layout.xaxis.domain == fig.layout.xaxis2.domain
        panel = fig.layout.width - fig.layout.margin.l - fig.layout.margin.r
    else:
        assert fig.layout.xaxis.domain[1] < fig.layout.xaxis2.domain[0]
        panel = (fig.layout.width - fig.layout.margin.l - fig.layout.margin.r - 3 * font_size) / 2
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        positions = [int(v.rsplit("·", 1)[1]) for v in axis.tickvals]
        spacing = panel / n * min(np.diff(positions))
        assert spacing >= MIN_TICK_PX - 0.5 and LINE_EM * axis.tickfont.size <= spacing
