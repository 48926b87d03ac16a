import itertools

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.coref import flip_grid, head_grid
from viz.coref_ranking import ranked_heads

BASELINES = {"nearest": 0.47, "first": 0.51}


def click_trace(fig) -> go.Scatter:
    """The one trace whose points carry [layer, head]."""
    (trace,) = [t for t in fig.data if isinstance(t, go.Scatter) and t.customdata is not None]
    return trace


def mark_traces(fig) -> list[go.Scatter]:
    return [t for t in fig.data if isinstance(t, go.Scatter) and t.customdata is None and t.x[0] is not None]


def hover_of(fig, layer: int, head: int) -> str:
    trace = click_trace(fig)
    picked = [tuple(c) for c in trace.customdata]
    return trace.hovertext[picked.index((layer, head))]


def cell_px(fig, n_heads: int) -> float:
    layout = fig.layout
    return (layout.width - layout.margin.l - layout.margin.r) / n_heads


# ---- head_grid ---------------------------------------------------------------


def test_head_grid_shows_each_value_in_its_cell_with_layer_0_on_top():
    values = np.random.default_rng(0).random((6, 12))
    values[3, 1] = 0.68
    fig = head_grid(values)
    heatmap = fig.data[0]
    assert isinstance(heatmap, go.Heatmap)
    np.testing.assert_array_equal(heatmap.z, values)
    assert list(heatmap.x) == list(range(12)) and list(heatmap.y) == list(range(6))
    assert list(fig.layout.yaxis.ticktext) == [f"L{i}" for i in range(6)]
    assert list(fig.layout.xaxis.ticktext) == [f"H{i}" for i in range(12)]
    assert list(fig.layout.yaxis.tickvals) == list(range(6))
    top, bottom = fig.layout.yaxis.range[1], fig.layout.yaxis.range[0]
    assert top < 0 < 5 < bottom  # reversed: layer 0 at the top
    assert fig.layout.yaxis.scaleanchor == "x"  # square cells


def test_head_grid_writes_values_in_the_cells():
    values = np.array([[0.68, 0.0], [1.0, 0.125]])
    heatmap = head_grid(values).data[0]
    assert heatmap.texttemplate == "%{text}"
    assert [list(row) for row in heatmap.text] == [["0.68", "0.00"], ["1.00", "0.12"]]
    margins = np.array([[0.41, -0.2], [0.0, -0.055]])
    heatmap = head_grid(margins, kind="margin").data[0]
    assert [list(row) for row in heatmap.text] == [["+0.41", "−0.20"], ["+0.00", "−0.06"]]


def test_head_grid_hover_names_layer_head_and_value():
    values = np.full((4, 2), 0.5)
    values[3, 1] = 0.68
    assert hover_of(head_grid(values), 3, 1) == "L3 H1: accuracy 0.68"
    assert hover_of(head_grid(values), 0, 0) == "L0 H0: accuracy 0.50"
    values[3, 1] = 0.41
    assert hover_of(head_grid(values, kind="margin"), 3, 1) == "L3 H1: margin +0.41"
    fig = head_grid(values)
    assert fig.data[0].hoverinfo == "skip"  # the hover comes from the cell's marker only
    assert click_trace(fig).hovertemplate == "%{hovertext}<extra></extra>"


def test_head_grid_accuracy_uses_a_sequential_scale_on_0_1():
    heatmap = head_grid(np.array([[0.2, 0.3]])).data[0]
    assert (heatmap.zmin, heatmap.zmax) == (0.0, 1.0)
    assert heatmap.zmid is None
    assert heatmap.colorbar.title.text == "accuracy"


def test_head_grid_margin_range_is_symmetric_about_zero():
    heatmap = head_grid(np.array([[0.1, -0.4], [0.25, 0.0]]), kind="margin").data[0]
    assert (heatmap.zmin, heatmap.zmid, heatmap.zmax) == (-0.4, 0.0, 0.4)
    heatmap = head_grid(np.array([[0.3, -0.1]]), kind="margin").data[0]
    assert (heatmap.zmin, heatmap.zmax) == (-0.3, 0.3)
    heatmap = head_grid(np.array([[0.01, -0.02]]), kind="margin").data[0]
    assert (heatmap.zmin, heatmap.zmax) == (-0.05, 0.05)  # never narrower than ±0.05
    assert heatmap.colorscale != head_grid(np.array([[0.5]])).data[0].colorscale  # diverging, not sequential
    assert heatmap.colorbar.title.text == "margin"


def test_head_grid_highlight_outlines_exactly_that_cell():
    fig = head_grid(np.random.default_rng(1).random((6, 12)), highlight=(3, 1))
    assert len(fig.layout.shapes) >= 1
    for shape in fig.layout.shapes:
        assert shape.type == "rect" and shape.xref == "x" and shape.yref == "y"
        assert (shape.x0, shape.x1) == (0.5, 1.5)  # head 1
        assert (shape.y0, shape.y1) == (2.5, 3.5)  # layer 3
    assert not head_grid(np.zeros((6, 12))).layout.shapes
    with pytest.raises(ValueError, match="outside"):
        head_grid(np.zeros((6, 12)), highlight=(6, 0))


def test_head_grid_marks_exactly_the_true_cells():
    marked = np.zeros((6, 12), dtype=bool)
    marked[0, 0] = marked[2, 11] = marked[5, 3] = True
    fig = head_grid(np.full((6, 12), 0.5), marked=marked)
    (marks,) = mark_traces(fig)
    cells = sorted(zip(np.rint(marks.y).astype(int).tolist(), np.rint(marks.x).astype(int).tolist()))
    assert cells == [(0, 0), (2, 11), (5, 3)]
    assert marks.hoverinfo == "skip"  # a click on a mark still selects the head below it
    assert mark_traces(head_grid(np.full((6, 12), 0.5))) == []
    with pytest.raises(ValueError, match="marked"):
        head_grid(np.zeros((6, 12)), marked=np.zeros((6, 11), dtype=bool))


@pytest.mark.parametrize("n_layers, n_heads", [(6, 12), (12, 12)])
def test_head_grid_click_markers_cover_every_head_once_at_its_cell(n_layers, n_heads):
    fig = head_grid(np.zeros((n_layers, n_heads)))
    markers = click_trace(fig)
    picked = [tuple(pair) for pair in markers.customdata]
    assert sorted(picked) == list(itertools.product(range(n_layers), range(n_heads)))
    assert [(y, x) for x, y in zip(markers.x, markers.y)] == picked
    assert markers.marker.size >= 0.8 * cell_px(fig, n_heads)  # the whole cell is a click target
    assert fig.layout.clickmode == "event+select"


def test_grid_selection_dims_nothing():
    marked = np.eye(6, 12, dtype=bool)
    for fig in (head_grid(np.zeros((6, 12)), marked=marked), flip_grid(*np.zeros((3, 6, 12), dtype=bool))):
        clicks = click_trace(fig)
        assert clicks.selected.marker.opacity == clicks.unselected.marker.opacity == 0  # stay invisible
    (marks,) = mark_traces(head_grid(np.zeros((6, 12)), marked=marked))
    assert marks.selected.marker.opacity == marks.unselected.marker.opacity == 1  # stay drawn


def test_head_grid_escapes_the_title_and_scales_with_font_size():
    fig = head_grid(np.zeros((6, 12)), title="<b>it</b> & they", font_size=22)
    assert fig.layout.title.text == "&lt;b&gt;it&lt;/b&gt; &amp; they"
    assert fig.layout.font.size == 22
    small = head_grid(np.zeros((6, 12)))
    assert cell_px(fig, 12) > cell_px(small, 12)
    assert fig.data[0].textfont.size > small.data[0].textfont.size
    with pytest.raises(ValueError, match="kind"):
        head_grid(np.zeros((6, 12)), kind="accuracies")


# ---- ranked_heads ------------------------------------------------------------

RANKED = [(3, 1, 0.93), (0, 5, 0.9), (11, 10, 0.875), (2, 2, 0.5), (4, 4, 0.25)]


def baseline_lines(fig) -> dict[float, dict]:
    return {s.x0: s for s in fig.layout.shapes if s.type == "line"}


def baseline_labels(fig) -> dict[str, go.layout.Annotation]:
    return {a.text: a for a in fig.layout.annotations if a.yref == "paper"}


def test_ranked_heads_bars_best_on_top_with_labels_values_and_heads():
    fig = ranked_heads(RANKED, BASELINES, top=4)
    (bars,) = fig.data
    assert isinstance(bars, go.Bar) and bars.orientation == "h"
    assert list(bars.y) == ["L3 H1", "L0 H5", "L11 H10", "L2 H2"]
    assert list(bars.x) == [0.93, 0.9, 0.875, 0.5]
    assert [tuple(c) for c in bars.customdata] == [(3, 1), (0, 5), (11, 10), (2, 2)]
    assert fig.layout.yaxis.autorange == "reversed"  # first category, the best, at the top
    assert tuple(fig.layout.xaxis.range) == (0, 1)


def test_ranked_heads_writes_each_value_at_its_bar_end():
    fig = ranked_heads(RANKED, BASELINES)
    values = {(a.y, a.text): a.x for a in fig.layout.annotations if a.yref == "y"}
    assert values == {
        ("L3 H1", "0.93"): 0.93,
        ("L0 H5", "0.90"): 0.9,
        ("L11 H10", "0.88"): 0.875,
        ("L2 H2", "0.50"): 0.5,
        ("L4 H4", "0.25"): 0.25,
    }


def test_ranked_heads_draws_each_baseline_as_a_labelled_dashed_line():
    fig = ranked_heads(RANKED, BASELINES)
    lines = baseline_lines(fig)
    assert sorted(lines) == [0.47, 0.51]
    for x, line in lines.items():
        assert line.x1 == x and (line.yref, line.y0, line.y1) == ("paper", 0, 1)
        assert line.line.dash not in (None, "solid")
    assert lines[0.47].line.color != lines[0.51].line.color
    assert lines[0.47].line.dash != lines[0.51].line.dash  # equal values still show both
    labels = baseline_labels(fig)
    assert sorted(labels) == ["first 0.51", "nearest 0.47"]
    assert labels["nearest 0.47"].x == 0.47 and labels["first 0.51"].x == 0.51
    assert labels["nearest 0.47"].font.color == lines[0.47].line.color


def test_ranked_heads_close_baseline_labels_go_on_separate_rows():
    close = baseline_labels(ranked_heads(RANKED, BASELINES))
    assert close["nearest 0.47"].yshift != close["first 0.51"].yshift
    same = baseline_labels(ranked_heads(RANKED, {"nearest": 0.5, "first": 0.5}, font_size=22))
    assert same["nearest 0.50"].yshift != same["first 0.50"].yshift
    far = baseline_labels(ranked_heads(RANKED, {"nearest": 0.1, "first": 0.9}))
    assert far["nearest 0.10"].yshift == far["first 0.90"].yshift  # one row when there is room


def test_ranked_heads_keeps_other_bars_undimmed_and_escapes_text():
    fig = ranked_heads(RANKED, {"<i>near</i>": 0.4}, title="<b>top</b>", font_size=22)
    bars = fig.data[0]
    assert bars.selected.marker.opacity == bars.unselected.marker.opacity == 1
    assert fig.layout.clickmode == "event+select"
    assert list(baseline_labels(fig)) == ["&lt;i&gt;near&lt;/i&gt; 0.40"]
    assert fig.layout.title.text == "&lt;b&gt;top&lt;/b&gt;"
    assert fig.layout.font.size == 22
    assert len(ranked_heads(RANKED * 4, BASELINES).data[0].y) == 15  # top defaults to 15


# ---- flip_grid ---------------------------------------------------------------


def test_flip_grid_puts_each_head_in_its_class():
    flips = np.array([[True, True, False], [True, False, False]])
    right_a = np.array([[True, False, True], [True, True, True]])
    right_b = np.array([[True, True, True], [False, True, True]])
    fig = flip_grid(flips, right_a, right_b)
    np.testing.assert_array_equal(fig.data[0].z, [[2, 1, 0], [1, 0, 0]])
    assert hover_of(fig, 0, 0) == "L0 H0: choice flips, right on both"
    assert hover_of(fig, 0, 1) == "L0 H1: choice flips"
    assert hover_of(fig, 1, 0) == "L1 H0: choice flips"  # right on one twin only
    assert hover_of(fig, 0, 2) == "L0 H2: same choice"
    assert hover_of(fig, 1, 1) == "L1 H1: same choice"


def test_flip_grid_legend_names_three_colours_matching_the_cells():
    fig = flip_grid(*np.zeros((3, 6, 12), dtype=bool))
    legend = {t.name: t.marker.color for t in fig.data if t.showlegend is not False and t.name}
    assert set(legend) == {"choice flips, right on both", "choice flips", "same choice"}
    assert len(set(legend.values())) == 3
    heatmap = fig.data[0]
    assert (heatmap.zmin, heatmap.zmax) == (0, 2) and heatmap.showscale is False
    cell_colour = dict(zip([0, 1, 2], [c for _, c in heatmap.colorscale]))
    assert cell_colour[0] == legend["same choice"]
    assert cell_colour[1] == legend["choice flips"]
    assert cell_colour[2] == legend["choice flips, right on both"]


@pytest.mark.parametrize("n_layers", [6, 12])
def test_flip_grid_click_markers_cover_every_head_once(n_layers):
    fig = flip_grid(*np.zeros((3, n_layers, 12), dtype=bool), title="<twin>")
    picked = [tuple(pair) for pair in click_trace(fig).customdata]
    assert sorted(picked) == list(itertools.product(range(n_layers), range(12)))
    assert list(fig.layout.yaxis.ticktext) == [f"L{i}" for i in range(n_layers)]
    assert fig.layout.title.text == "&lt;twin&gt;"
    with pytest.raises(ValueError, match="expected three"):
        flip_grid(np.zeros((6, 12), bool), np.zeros((6, 12), bool), np.zeros((6, 11), bool))


# ---- intervals, differences, correlations ------------------------------------------------------------


def test_ranked_heads_draws_each_heads_interval_as_an_error_bar():
    accuracy = np.array([[0.5, 0.9], [0.7, 0.2]])
    low, high = accuracy - np.array([[0.1, 0.2], [0.15, 0.05]]), np.minimum(accuracy + 0.1, 1.0)
    ranked = [(0, 1, 0.9), (1, 0, 0.7), (0, 0, 0.5)]
    fig = ranked_heads(ranked, BASELINES, intervals=(low, high))
    bars = fig.data[0]
    assert list(bars.y) == ["L0 H1", "L1 H0", "L0 H0"]
    np.testing.assert_allclose(bars.error_x.arrayminus, [0.2, 0.15, 0.1])
    np.testing.assert_allclose(bars.error_x.array, [0.1, 0.1, 0.1])
    assert not bars.error_x.symmetric
    assert list(bars.hovertext) == ["95% interval 0.70–1.00", "95% interval 0.55–0.80", "95% interval 0.40–0.60"]
    values = {a.y: a for a in fig.layout.annotations if a.yref == "y"}
    assert values["L0 H1"].text == "0.90" and values["L0 H1"].x == pytest.approx(1.0)  # past the interval
    plain = ranked_heads(ranked, BASELINES)
    assert plain.data[0].error_x.array is None and {a.y: a.x for a in plain.layout.annotations if a.yref == "y"}[
        "L0 H1"
    ] == pytest.approx(0.9)


def test_head_grid_difference_is_signed_on_a_scale_centred_at_zero():
    diff = np.array([[0.25, -0.5], [0.0, 0.1]])
    heatmap = head_grid(diff, kind="difference").data[0]
    assert [list(row) for row in heatmap.text] == [["+0.25", "−0.50"], ["+0.00", "+0.10"]]
    assert heatmap.zmid == 0 and heatmap.zmin == -0.5 and heatmap.zmax == 0.5
    assert heatmap.colorbar.title.text == "A − B"
    r = head_grid(np.array([[0.3, np.nan]]), kind="correlation").data[0]
    assert (r.zmin, r.zmax) == (-1, 1) and list(r.text[0]) == ["+0.30", "n/a"]
    with pytest.raises(ValueError, match="kind should be one of"):
        head_grid(diff, kind="ratio")


def test_a_deep_models_grid_fits_a_height_budget_with_lower_rows_and_every_other_layer_named():
    """30 layers × 9 heads (SmolLM2) in presentation: the grid keeps to the first screen's height by lowering its
    rows, not its columns; its values still read (10 px or more), and a layer label goes on every second row."""
    values = np.linspace(-0.3, 0.3, 30 * 9).reshape(30, 9)
    fig = head_grid(values, "specificity", kind="specificity", highlight=(13, 8), font_size=22, width=1020, height=560)
    layout = fig.layout
    assert layout.height <= 560
    rows = (layout.height - layout.margin.t - layout.margin.b) / 30
    columns = (layout.width - layout.margin.l - layout.margin.r - 10) / 9
    assert 14 <= rows < columns, (rows, columns)
    assert layout.yaxis.scaleratio == pytest.approx(int(rows) / columns, rel=0.02)
    assert list(layout.yaxis.ticktext) == [f"L{la}" for la in range(0, 30, 2)]
    assert fig.data[0].textfont.size >= 10
    assert head_grid(values[:6], font_size=22, width=1020, height=560).layout.yaxis.scaleratio == 1  # 6 fit square
