import itertools

import numpy as np
import plotly.graph_objects as go
import pytest

import viz
from attention.runs.pooling import pool_map
from viz.lines import bin_opacity, opacity_bins
from viz.overview import tile_maps

TOKENS = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "[SEP]"]


def random_maps(*shape, seed=0):
    """Row-stochastic maps of the given shape (last axis sums to 1)."""
    weights = np.random.default_rng(seed).random(shape)
    return weights / weights.sum(axis=-1, keepdims=True)


def render_hover(template: str, query: str, key: str, weight: float) -> str:
    """What plotly shows for one cell, for the placeholders head_heatmap uses."""
    return (
        template.replace("%{y}", query)
        .replace("%{x}", key)
        .replace("%{z:.3f}", f"{weight:.3f}")
        .replace("<extra></extra>", "")
    )


def axis_index(axis_values, category: str) -> int:
    """Position of a category on a categorical axis (its index among the trace's values)."""
    return list(axis_values).index(category)


# ---- head_heatmap ------------------------------------------------------------


def test_head_heatmap_shows_the_map_with_first_query_on_top():
    attn = random_maps(len(TOKENS), len(TOKENS))
    fig = viz.head_heatmap(attn, TOKENS)
    heatmap = fig.data[0]
    assert isinstance(heatmap, go.Heatmap)
    assert isinstance(heatmap.z, np.ndarray) and heatmap.z.dtype == np.float32  # base64 in JSON
    np.testing.assert_array_equal(heatmap.z, attn.astype(np.float32))
    np.testing.assert_allclose(heatmap.z, attn, rtol=1e-6)
    assert (heatmap.zmin, heatmap.zmax) == (0.0, 1.0)
    assert fig.layout.yaxis.autorange == "reversed"
    assert list(heatmap.y)[0].startswith("[CLS]")


def test_head_heatmap_labels_every_position_even_repeated_tokens():
    fig = viz.head_heatmap(random_maps(len(TOKENS), len(TOKENS)), TOKENS)
    heatmap = fig.data[0]
    for axis, values in ((fig.layout.xaxis, heatmap.x), (fig.layout.yaxis, heatmap.y)):
        assert axis.type == "category"
        assert len(set(values)) == len(TOKENS)  # "the" at 1 and 7 keeps two rows and columns
        assert list(axis.tickvals) == list(values)
        assert list(axis.ticktext) == TOKENS  # the labels show only the tokens


def test_head_heatmap_labels_read_as_text_and_the_hover_keeps_the_raw_piece():
    """Byte-level BPE's "Ġthe" and SentencePiece's "▁the" are labelled " the"; the cell's category, which the
    hover names, stays the tokenizer's own piece."""
    tokens = ["<s>", "The", "Ġanimal", "▁was", "</s>"]
    fig = viz.head_heatmap(random_maps(len(tokens), len(tokens)), tokens)
    for axis, values in ((fig.layout.xaxis, fig.data[0].x), (fig.layout.yaxis, fig.data[0].y)):
        assert list(axis.ticktext) == ["&lt;s&gt;", "The", " animal", " was", "&lt;/s&gt;"]
        assert list(values)[2].startswith("Ġanimal") and list(values)[3].startswith("▁was")


def test_head_heatmap_hover_reads_query_arrow_key_weight():
    attn = np.zeros((len(TOKENS), len(TOKENS)))
    attn[:, 0] = 1.0
    attn[10] = 0.0
    attn[10, 2], attn[10, 0] = 0.412, 0.588  # "it" looks at "animal"
    fig = viz.head_heatmap(attn, TOKENS)
    heatmap = fig.data[0]
    assert heatmap.hovertemplate.endswith("<extra></extra>")
    query, key = heatmap.y[10], heatmap.x[2]
    hover = render_hover(heatmap.hovertemplate, query, key, heatmap.z[10][2])
    assert hover == "it·10 → animal·2: 0.412"
    # Every row and column names its own token and position, repeated tokens included.
    assert list(heatmap.y) == [f"{t}·{i}" for i, t in enumerate(TOKENS)]
    assert list(heatmap.x) == [f"{t}·{i}" for i, t in enumerate(TOKENS)]
    assert heatmap.customdata is None  # nothing per cell but the weight


def test_head_heatmap_escapes_tokens_in_labels_and_hover():
    tokens = ["[CLS]", "<b>x</b>", "a&b", "[SEP]"]
    fig = viz.head_heatmap(random_maps(4, 4), tokens)
    escaped = "&lt;b&gt;x&lt;/b&gt;"
    assert fig.layout.xaxis.ticktext[1] == escaped
    assert fig.layout.yaxis.ticktext[1] == escaped
    assert fig.layout.xaxis.ticktext[2] == "a&amp;b"
    heatmap = fig.data[0]
    hover = render_hover(heatmap.hovertemplate, heatmap.y[1], heatmap.x[2], 0.25)
    assert hover == f"{escaped}·1 → a&amp;b·2: 0.250"
    assert "<b>" not in fig.to_json()


def test_head_heatmap_at_512_tokens_keeps_every_cell_in_little_json():
    n = 512
    attn = random_maps(n, n)  # float64 in
    tokens = [f"tok{i % 40}" for i in range(n)]
    fig = viz.head_heatmap(attn, tokens)
    heatmap = fig.data[0]
    assert heatmap.z.shape == (n, n)
    np.testing.assert_allclose(heatmap.z, attn, rtol=1e-6)
    assert len(heatmap.x) == len(heatmap.y) == n
    assert render_hover(heatmap.hovertemplate, heatmap.y[500], heatmap.x[3], 0.5) == ("tok20·500 → tok3·3: 0.500")
    size = len(fig.to_json())
    print(f"head_heatmap, {n} tokens: {size / 1e6:.2f} MB of JSON")
    assert size <= 1_500_000


def test_head_heatmap_accepts_other_keys_and_colour_range():
    fig = viz.head_heatmap(random_maps(2, 3), ["a", "b"], ["x", "y", "z"], zmax=0.5, title="L0 H1")
    assert list(fig.layout.xaxis.ticktext) == ["x", "y", "z"]
    assert list(fig.layout.yaxis.ticktext) == ["a", "b"]
    assert fig.data[0].zmax == 0.5
    assert fig.layout.title.text == "L0 H1"
    heatmap = fig.data[0]
    assert list(heatmap.x) == ["x·0", "y·1", "z·2"] and list(heatmap.y) == ["a·0", "b·1"]
    with pytest.raises(ValueError, match="does not match"):
        viz.head_heatmap(random_maps(2, 3), ["a", "b"])


def test_head_heatmap_size_grows_with_tokens_within_bounds():
    small = viz.head_heatmap(random_maps(4, 4), ["a"] * 4)
    large = viz.head_heatmap(random_maps(30, 30), ["a"] * 30)
    huge = viz.head_heatmap(random_maps(400, 400), ["a"] * 400)
    assert small.layout.height < large.layout.height
    assert huge.layout.height < 1100 and huge.layout.width < 1200
    assert huge.layout.yaxis.scaleanchor == "x"  # square cells


def test_head_heatmap_thins_labels_only_when_rows_are_too_thin():
    tokens = [f"t{i}" for i in range(400)]
    fig = viz.head_heatmap(random_maps(400, 400), tokens)
    heatmap = fig.data[0]
    tickvals, ticktext = list(fig.layout.yaxis.tickvals), list(fig.layout.yaxis.ticktext)
    assert 20 < len(tickvals) < 400
    # each label still names its row and column
    assert ticktext == [tokens[axis_index(heatmap.y, v)] for v in tickvals]
    xaxis = fig.layout.xaxis
    assert list(xaxis.ticktext) == [tokens[axis_index(heatmap.x, v)] for v in xaxis.tickvals]
    short = viz.head_heatmap(random_maps(30, 30), tokens[:30])
    assert list(short.layout.yaxis.ticktext) == tokens[:30]  # rows wide enough: all labelled


def test_font_size_reaches_the_layout():
    attn = random_maps(4, 4)
    assert viz.head_heatmap(attn, list("abcd"), font_size=22).layout.font.size == 22
    assert viz.overview_grid(attn[None, None], font_size=22).layout.font.size == 22
    assert viz.lines_view(attn, list("abcd"), font_size=22).layout.font.size == 22


# ---- overview_grid ----------------------------------------------


def test_overview_tiles_are_pooled_maps_at_their_place():
    attentions = random_maps(2, 3, 12, 12)
    fig = viz.overview_grid(attentions, max_cells=4)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (2 * 5 - 1, 3 * 5 - 1)  # 4 cells + 1 NaN gap per tile
    for layer, head in itertools.product(range(2), range(3)):
        tile = z[5 * layer : 5 * layer + 4, 5 * head : 5 * head + 4]
        np.testing.assert_allclose(tile, pool_map(attentions[layer, head], 4), rtol=1e-6)
    assert np.isnan(z[4]).all() and np.isnan(z[:, 4]).all() and np.isnan(z[:, 9]).all()


def test_overview_short_maps_are_shown_unpooled():
    attentions = random_maps(1, 2, 5, 5)
    z = np.asarray(viz.overview_grid(attentions, max_cells=32).data[0].z, dtype=float)
    np.testing.assert_allclose(z[:, :5], attentions[0, 0], rtol=1e-6)
    np.testing.assert_allclose(z[:, 6:], attentions[0, 1], rtol=1e-6)


def test_tile_maps_puts_layers_down_and_heads_across():
    maps = np.arange(2 * 2 * 1 * 1, dtype=float).reshape(2, 2, 1, 1)
    np.testing.assert_array_equal(tile_maps(maps), [[0, np.nan, 1], [np.nan] * 3, [2, np.nan, 3]])


def test_overview_axes_name_layers_and_heads():
    fig = viz.overview_grid(random_maps(3, 4, 6, 6))
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1", "L2"]
    assert list(fig.layout.xaxis.ticktext) == ["H0", "H1", "H2", "H3"]


def test_overview_click_markers_cover_each_head_once_at_its_tile():
    n_layers, n_heads, cells = 3, 4, 6
    fig = viz.overview_grid(random_maps(n_layers, n_heads, cells, cells))
    markers = fig.data[1]
    assert isinstance(markers, go.Scatter)
    picked = [tuple(pair) for pair in markers.customdata]
    assert sorted(picked) == list(itertools.product(range(n_layers), range(n_heads)))
    for (layer, head), x, y in zip(picked, markers.x, markers.y):
        assert (cells + 1) * head <= x <= (cells + 1) * head + cells - 1
        assert (cells + 1) * layer <= y <= (cells + 1) * layer + cells - 1
    hover = markers.hovertext[picked.index((2, 1))]
    assert hover.startswith("L2 H1")


def test_a_deep_narrow_grid_presenting_goes_with_layers_across_and_each_tile_keeps_its_head():
    """SmolLM2's 30 layers × 9 heads in a presentation's 1040 × 608 (ui/page/layout.py main_px, figure_height):
    down, the tiles were 18 px and the grid 300 px wide; with layers across they are 30 px. Each tile is still
    its head's pooled map (queries down), its click marker names it and sits inside it, and the outline and
    the pattern label go with it."""
    n_layers, n_heads = 30, 9
    attentions = random_maps(n_layers, n_heads, 8, 8)
    assert viz.overview.layers_across(n_layers, n_heads, 1040, 608)
    assert viz.overview.tile_px_for(n_layers, n_heads, None, 1040, 608) == 30
    assert not viz.overview.layers_across(n_layers, n_heads, 1040, None)  # a page: the grid grows down
    assert not viz.overview.layers_across(32, 32, 1040, 608) and not viz.overview.layers_across(6, 12, 1040, 608)
    fig = viz.overview_grid(attentions, max_cells=8, width=1040, height=608, highlight=(3, 7))
    assert fig.layout.xaxis.ticktext[0] == "L0" and set(fig.layout.xaxis.ticktext) <= {f"L{i}" for i in range(30)}
    assert fig.layout.yaxis.ticktext == tuple(f"H{h}" for h in range(n_heads))
    assert fig.layout.width <= 1040 and fig.layout.height <= 608
    z, step = np.asarray(fig.data[0].z, dtype=float), 9
    assert z.shape == (n_heads * step - 1, n_layers * step - 1)
    for layer, head in [(0, 0), (3, 7), (29, 8), (12, 2)]:
        tile = z[step * head : step * head + 8, step * layer : step * layer + 8]
        np.testing.assert_allclose(tile, attentions[layer, head], rtol=1e-6)
    markers = fig.data[1]
    for (layer, head), x, y in zip(markers.customdata, markers.x, markers.y):
        assert step * layer <= x <= step * layer + 7 and step * head <= y <= step * head + 7
    assert (fig.layout.shapes[0].x0, fig.layout.shapes[0].y0) == (step * 3 - 1, step * 7 - 1)
    wide = viz.overview_grid(attentions, max_cells=8, width=1240, height=608, labels={(3, 7): "diagonal"})
    [label] = wide.layout.annotations  # tiles of 36 px: written on
    assert step * 3 <= label.x <= step * 3 + 7 and label.y == step * 7 - 0.5


def test_overview_hover_names_the_strongest_pair():
    attentions = np.full((1, 1, 3, 3), 0.1)
    attentions[0, 0, 2, 1] = 0.8
    fig = viz.overview_grid(attentions, tokens=["[CLS]", "<i>", "[SEP]"])
    assert fig.data[1].hovertext[0] == "L0 H0<br>max [SEP] → &lt;i&gt;: 0.800"


@pytest.mark.parametrize("font_size, width, height", [(22, 1180, 450), (14, 800, None)], ids=["present", "page"])
def test_overview_pattern_labels_stay_within_their_tiles(font_size, width, height):
    """12 heads across a presentation's 1180 px (72 px tiles) or a page's 800: "heterogeneous" in 15 px text was
    117 px wide and ran over its neighbours; it is written "hetero." and every label within its tile."""
    labels = {
        (layer, head): ("heterogeneous", "vertical", "diagonal")[(layer + head) % 3]
        for layer in range(6)
        for head in range(12)
    }
    fig = viz.overview_grid(random_maps(6, 12, 8, 8), labels=labels, font_size=font_size, width=width, height=height)
    tile_px = (fig.layout.width - 140) / 12
    notes = fig.layout.annotations
    assert {note.text for note in notes} == {"hetero.", "vertical", "diagonal"} and len(notes) == 72
    assert all(len(note.text) * note.font.size * 0.6 <= tile_px - 4 for note in notes), (tile_px, notes[0].font.size)
    assert notes[0].font.size >= 8
    assert "heterogeneous" in fig.data[1].hovertext[0]  # the hover names it whole


def test_overview_labels_and_highlight_mark_the_right_tile():
    cells = 6
    fig = viz.overview_grid(random_maps(2, 3, cells, cells), labels={(1, 2): "prev <token>"}, highlight=(1, 2))
    (note,) = fig.layout.annotations
    assert note.text == "prev &lt;token&gt;"
    assert 2 * (cells + 1) <= note.x <= 2 * (cells + 1) + cells - 1
    (outline,) = fig.layout.shapes
    left, top = 2 * (cells + 1), 1 * (cells + 1)  # first cell of tile (1, 2)
    assert outline.x0 < left and left + cells - 1 < outline.x1 < left + cells + 1
    assert outline.y0 < top and top + cells - 1 < outline.y1 < top + cells + 1
    with pytest.raises(ValueError, match="outside"):
        viz.overview_grid(random_maps(2, 3, cells, cells), highlight=(2, 0))


@pytest.mark.parametrize("n_layers, n_heads", [(6, 12), (12, 12)])
def test_overview_of_long_input_stays_light(n_layers, n_heads):
    tokens = [f"tok{i}" for i in range(252)]
    fig = viz.overview_grid(random_maps(n_layers, n_heads, 252, 252), tokens)  # float64 in
    assert np.asarray(fig.data[0].z).dtype == np.float32  # 4 bytes per value in the JSON
    size = len(fig.to_json())
    print(f"overview {n_layers}x{n_heads} heads, 252 tokens: {size / 1e6:.2f} MB of JSON")
    assert size < 2_000_000
    assert np.asarray(fig.data[0].z).shape == (n_layers * 33 - 1, n_heads * 33 - 1)


# ---- lines_view --------------------------------------------------------------

LINE_ATTN = np.array(
    [
        [0.05, 0.90, 0.05],
        [0.50, 0.50, 0.00],
        [0.00, 0.30, 0.70],
    ]
)


def segments(trace) -> list[tuple[int, int]]:
    """(query, key) of each NaN-separated segment of a line trace."""
    x = np.asarray(trace.x, dtype=float).reshape(-1, 3)
    y = np.asarray(trace.y, dtype=float).reshape(-1, 3)
    assert np.isnan(x[:, 2]).all() and np.isnan(y[:, 2]).all()
    assert (x[:, 0] == 0).all() and (x[:, 1] == 1).all()  # query left, key right
    return [(int(q), int(k)) for q, k in y[:, :2]]


def line_traces(fig):
    return [t for t in fig.data if t.mode == "lines"]


def test_opacity_bins_follow_the_weights():
    bins = opacity_bins(LINE_ATTN, threshold=0.0, n_bins=4)
    as_pairs = {b: sorted(map(tuple, pairs.tolist())) for b, pairs in bins.items()}
    assert as_pairs == {
        0: [(0, 0), (0, 2)],  # 0.05
        1: [(2, 1)],  # 0.3
        2: [(1, 0), (1, 1), (2, 2)],  # 0.5, 0.5, 0.7
        3: [(0, 1)],  # 0.9
    }


def test_lines_view_draws_one_segment_per_positive_weight_with_binned_opacity():
    fig = viz.lines_view(LINE_ATTN, ["a", "b", "c"], n_bins=4)
    drawn = {}
    for trace in line_traces(fig):
        for pair in segments(trace):
            drawn[pair] = trace.opacity
    assert sorted(drawn) == sorted(map(tuple, np.argwhere(LINE_ATTN > 0).tolist()))
    for (q, k), opacity in drawn.items():
        assert abs(opacity - LINE_ATTN[q, k]) <= 1 / 8  # half a bin
    assert sorted(t.opacity for t in line_traces(fig)) == [bin_opacity(b, 4) for b in range(4)]


def test_lines_view_skips_weights_below_threshold():
    fig = viz.lines_view(LINE_ATTN, ["a", "b", "c"], threshold=0.4)
    drawn = sorted(pair for trace in line_traces(fig) for pair in segments(trace))
    assert drawn == [(0, 1), (1, 0), (1, 1), (2, 2)]


def test_lines_view_gives_each_head_a_colour_and_one_legend_entry():
    maps = np.stack([LINE_ATTN, LINE_ATTN.T / LINE_ATTN.T.sum(1, keepdims=True)])
    fig = viz.lines_view(maps, ["a", "b", "c"], heads=["L0 H1", "L3 H2"], n_bins=4)
    lines = line_traces(fig)
    assert {t.legendgroup for t in lines} == {"L0 H1", "L3 H2"}
    colours = {g: {t.line.color for t in lines if t.legendgroup == g} for g in ("L0 H1", "L3 H2")}
    assert all(len(c) == 1 for c in colours.values())
    assert colours["L0 H1"] != colours["L3 H2"]
    assert sorted(t.name for t in lines if t.showlegend) == ["L0 H1", "L3 H2"]
    assert len(lines) <= 2 * 4
    assert fig.layout.showlegend


def test_lines_view_token_columns_show_escaped_tokens_on_hover():
    fig = viz.lines_view(LINE_ATTN, ["[CLS]", "<b>it</b>", "[SEP]"])
    columns = [t for t in fig.data if t.mode == "markers+text"]
    assert [c.x[0] for c in columns] == [0.0, 1.0]
    for column in columns:
        assert list(column.text) == ["[CLS]", "&lt;b&gt;it&lt;/b&gt;", "[SEP]"]
        assert list(column.hovertext) == list(column.text)  # the raw pieces: a WordPiece piece is its own text
        assert column.hovertemplate.startswith("%{hovertext}")
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # first token on top


def test_lines_view_rejects_mismatched_tokens():
    with pytest.raises(ValueError, match="expected maps"):
        viz.lines_view(LINE_ATTN, ["a", "b"])
    with pytest.raises(ValueError, match="head names"):
        viz.lines_view(np.stack([LINE_ATTN] * 2), ["a", "b", "c"], heads=["only one"])


# ---- heatmaps in the width they are given ---------------------------------------

PAGE_MAIN_PX, HALF_PX = 800, 390  # the main column and one of two columns at a 1280 px window


def words(n):
    return [f"word{i}" if i % 3 else f"w{i}" for i in range(n)]


def label_spacing(fig, axis: str, n: int) -> float:
    """Pixels between neighbouring labels of a token grid, from the cells the figure draws."""
    layout = fig.layout
    cell = (layout.height - layout.margin.t - layout.margin.b) / n
    positions = [int(v.rsplit("·", 1)[1]) for v in getattr(layout, axis).tickvals]
    return cell * min(np.diff(positions), default=n)


@pytest.mark.parametrize("n", [41, 80, 128])
@pytest.mark.parametrize(
    "width, font_size", [(None, 14), (HALF_PX, 14), (PAGE_MAIN_PX, 14), (None, 22), (510, 22), (1040, 22)]
)  # presentation mode: no sidebar
def test_token_grids_fit_their_width_and_keep_labels_apart(n, width, font_size):
    from viz.heatmap import CHAR_WIDTH, LINE_EM, MIN_TICK_PX

    tokens = words(n)
    for fig in (
        viz.head_heatmap(random_maps(n, n), tokens, font_size=font_size, width=width),
        viz.causal_mask_figure(n, tokens, font_size=font_size, width=width),
    ):
        assert fig.layout.width <= (width or 820)  # the page's main column at 1280 px, when not told
        for axis in ("xaxis", "yaxis"):
            spacing = label_spacing(fig, axis, n)
            size = getattr(fig.layout, axis).tickfont.size
            assert spacing >= MIN_TICK_PX - 1e-9
            if axis == "yaxis":  # stacked rows: one line each
                assert LINE_EM * size <= spacing
            assert len(getattr(fig.layout, axis).tickvals) <= n
        x = fig.layout.xaxis
        size, spacing = x.tickfont.size, label_spacing(fig, "xaxis", n)
        longest = max(len(t) for t in x.ticktext) * size * CHAR_WIDTH
        if x.tickangle == 0:
            assert longest <= spacing
        elif x.tickangle == -45:  # tilted neighbours: their gap across the text is spacing · sin 45°
            assert LINE_EM * size <= spacing * 0.71
        else:  # upright: side by side
            assert x.tickangle == -90 and LINE_EM * size <= spacing


def test_a_grid_too_dense_for_a_column_is_said_not_to_fit():
    from viz.heatmap import grid_fits

    assert grid_fits(TOKENS, 14, HALF_PX) and grid_fits(words(41), 14, PAGE_MAIN_PX)
    assert not grid_fits(words(41), 14, HALF_PX) and not grid_fits(words(128), 22, 510)
