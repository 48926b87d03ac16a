"""Token strip, mask figures, the HTML report, and what a browser shows of them."""

import re
import time

import numpy as np
import plotly.graph_objects as go
import pytest

import viz
from viz._style import KEEP, PADDING, SEGMENT_A, SEGMENT_B, SPECIAL
from viz.tokens import COMPACT_ABOVE, POSITION_EVERY, ROW_PX

# A sentence pair as the tokenizer gives it: pieces, ids, token types, special flags.
PAIR = ["[CLS]", "the", "cat", "is", "play", "##ing", "[SEP]", "it", "<b>", "naps", "[SEP]"]
IDS = [101, 1996, 4937, 2003, 2377, 2075, 102, 2009, 1026, 18996, 102]
SEGMENTS = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
SPECIAL_FLAGS = [t in ("[CLS]", "[SEP]") for t in PAIR]


def strip_pair(**kwargs) -> go.Figure:
    return viz.token_strip(PAIR, IDS, SEGMENTS, SPECIAL_FLAGS, **kwargs)


def named(fig: go.Figure, name: str):
    (trace,) = [t for t in fig.data if t.name == name and t.mode == "text"]
    return trace


def boxes(fig: go.Figure) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(fill colour, (left, right, top, bottom)) of every drawn box."""
    found = []
    for trace in fig.data:
        if trace.fill != "toself":
            continue
        x = np.asarray(trace.x, dtype=float).reshape(-1, 6)  # 5 corners and a gap per box
        y = np.asarray(trace.y, dtype=float).reshape(-1, 6)
        assert np.isnan(x[:, 5]).all()
        for xs, ys in zip(x[:, :5], y[:, :5]):
            found.append((trace.fillcolor, (xs.min(), xs.max(), ys.min(), ys.max())))
    return found


def legend_colours(fig: go.Figure) -> dict[str, str]:
    """Legend entry name -> the colour of its swatch."""
    return {
        t.name: t.marker.color
        for t in fig.data
        if isinstance(t, go.Scatter) and t.mode == "markers" and t.showlegend is not False
    }


def box_of(fig: go.Figure, i: int):
    """The box drawn around piece i (the one containing the piece's text)."""
    pieces = named(fig, "piece")
    x, y = pieces.x[i], pieces.y[i]
    (hit,) = [b for b in boxes(fig) if b[1][0] < x < b[1][1] and b[1][2] < y < b[1][3]]
    return hit


# ---- token_strip -------------------------------------------------------------


def test_token_strip_colours_boxes_by_segment_and_marks_special_tokens():
    fig = strip_pair()
    expected = {0: SEGMENT_A[0], 1: SEGMENT_B[0]}
    for i, (segment, special) in enumerate(zip(SEGMENTS, SPECIAL_FLAGS)):
        colour, _ = box_of(fig, i)
        assert colour == (SPECIAL[0] if special else expected[segment]), PAIR[i]
    assert len({SEGMENT_A[0], SEGMENT_B[0], SPECIAL[0]}) == 3
    key = next(a.text for a in fig.layout.annotations if "■" in a.text)
    assert dict((name, colour) for colour, name in re.findall(r'color:(#\w+)">■</span> ([^<]+?)(?:   |$)', key)) == {
        "segment A": SEGMENT_A[1],
        "segment B": SEGMENT_B[1],
        "[CLS] / [SEP]": SPECIAL[1],
    }
    assert not fig.layout.showlegend
    assert len(boxes(fig)) == len(PAIR)


def test_a_strip_of_one_text_names_its_colour_the_text_not_segment_a():
    n = 4
    fig = viz.token_strip(PAIR[:n], IDS[:n], [0] * n, SPECIAL_FLAGS[:n])
    key = next(a.text for a in fig.layout.annotations if "■" in a.text)
    names = [name for _, name in re.findall(r'color:(#\w+)">■</span> ([^<]+?)(?:   |$)', key)]
    assert names == ["the text", "[CLS]"], key


def test_token_strip_shows_piece_id_below_and_position_above_escaped():
    fig = strip_pair()
    pieces, ids, positions = named(fig, "piece"), named(fig, "id"), named(fig, "position")
    assert list(ids.text) == [str(i) for i in IDS]
    assert list(positions.text) == [str(i) for i in range(len(PAIR))]
    assert pieces.text[8] == "&lt;b&gt;" and pieces.text[2] == "cat"
    assert "<b>" not in fig.to_json()
    for i in range(len(PAIR)):  # y grows downwards: position, then piece, then id
        assert positions.y[i] < pieces.y[i] < ids.y[i]
        assert positions.x[i] == pieces.x[i] == ids.x[i]
    assert ids.textfont.size < pieces.textfont.size


def test_token_strip_hover_names_position_piece_id_and_segment():
    pieces = named(strip_pair(), "piece")
    assert pieces.hovertemplate == "%{hovertext}<extra></extra>"
    assert pieces.hovertext[2] == "position 2: cat (id 4937, segment A)"
    assert pieces.hovertext[9] == "position 9: naps (id 18996, segment B)"
    assert pieces.hovertext[8] == "position 8: &lt;b&gt; (id 1026, segment B)"
    assert pieces.hovertext[0] == "position 0: [CLS] (id 101, segment A, special)"


def test_token_strip_attaches_continuation_pieces():
    fig = strip_pair()
    edges = [box_of(fig, i)[1] for i in range(len(PAIR))]
    assert edges[5][0] == edges[4][1]  # "##ing" touches "play"
    assert edges[5][2] == edges[4][2]  # on the same row
    for i in (1, 2, 3, 4, 7):  # other pieces keep a gap
        assert edges[i][0] > edges[i - 1][1]
    assert named(fig, "piece").text[5].endswith("</span>ing")  # "##" drawn lighter


def test_token_strip_wraps_long_input_and_grows_in_height():
    words = [("walk", 1), ("##ing", 2), ("dogs", 3), ("un", 4), ("##believ", 5), ("##ably", 6)] * 40
    tokens, ids = [w for w, _ in words], [i for _, i in words]
    flags = [False] * len(tokens)
    short = viz.token_strip(tokens[:6], ids[:6], [0] * 6, flags[:6])
    long = viz.token_strip(tokens, ids, [0] * len(tokens), flags)
    long_edges = [b[1] for b in boxes(long)]
    rows = sorted({top for _, _, top, _ in long_edges})
    assert len(rows) > 3 and long.layout.height > short.layout.height + 3 * 40
    assert max(right for _, right, _, _ in long_edges) <= ROW_PX
    pieces = named(long, "piece")
    for i, token in enumerate(tokens):  # a word never wraps inside when it fits in a row
        if token.startswith("##"):
            assert pieces.y[i] == pieces.y[i - 1]
    per_row = viz.token_strip(tokens[:12], ids[:12], [0] * 12, flags[:12], per_row=5)
    ys = list(named(per_row, "piece").y)
    assert [ys.count(y) for y in sorted(set(ys))] == [5, 5, 2]


def test_token_strip_at_512_tokens_is_light_and_fast():
    n = 512
    tokens = ["[CLS]"] + [("##ing" if i % 3 == 2 else f"word{i % 70}") for i in range(n - 2)] + ["[SEP]"]
    start = time.perf_counter()
    fig = viz.token_strip(tokens, list(range(n)), [0] * 300 + [1] * (n - 300), [i in (0, n - 1) for i in range(n)])
    size = len(fig.to_json())
    elapsed = time.perf_counter() - start
    print(f"token_strip, {n} tokens: {size / 1e3:.0f} kB of JSON in {elapsed:.2f} s")
    assert size < 400_000 and elapsed < 1.5
    assert len(fig.data) <= 9  # one trace per colour, legend and text kind, not per token
    assert len(named(fig, "piece").text) == n


def test_a_long_inputs_strip_is_compact_ids_in_the_hover_every_tenth_position():
    n = COMPACT_ABOVE + 72
    tokens = ["[CLS]"] + [f"w{i % 50}" for i in range(n - 2)] + ["[SEP]"]
    ids = list(range(1000, 1000 + n))
    full = viz.token_strip(tokens, ids, [0] * n, [i in (0, n - 1) for i in range(n)], compact=False)
    fig = viz.token_strip(tokens, ids, [0] * n, [i in (0, n - 1) for i in range(n)])  # compact by length
    assert [t.name for t in fig.data if t.mode == "text"] == ["piece", "position"]  # no id line
    assert list(named(fig, "position").text) == [str(i) for i in range(0, n, POSITION_EVERY)]
    assert list(named(full, "position").text) == [str(i) for i in range(n)]
    assert len(named(fig, "piece").text) == n
    assert named(fig, "piece").hovertext[7] == f"position 7: {tokens[7]} (id 1007, segment A)"  # id kept
    assert fig.layout.height < 0.85 * full.layout.height  # no id line in any box
    assert any(f"every {POSITION_EVERY}th box" in a.text for a in fig.layout.annotations)
    short = strip_pair()
    assert [t.name for t in short.data if t.mode == "text"] == ["piece", "id", "position"]


def test_token_strip_wraps_within_the_width_it_is_given():
    words = [("walk", 1), ("##ing", 2), ("dogs", 3), ("un", 4), ("##believ", 5), ("##ably", 6)] * 40
    tokens, ids = [w for w, _ in words], [i for _, i in words]
    for width in (500, 766):
        fig = viz.token_strip(tokens, ids, [0] * len(tokens), [False] * len(tokens), width=width)
        assert fig.layout.width <= width  # never shrunk to fit its column, so boxes keep their text's size
        assert max(right for _, (_, right, _, _) in boxes(fig)) <= fig.layout.xaxis.range[1]
    wide = viz.token_strip(tokens, ids, [0] * len(tokens), [False] * len(tokens))
    assert wide.layout.width > 766  # by default rows wrap at ROW_PX


def test_token_strip_font_size_and_checks():
    assert strip_pair(font_size=22).layout.font.size == 22
    assert named(strip_pair(font_size=22), "piece").textfont.size == 22
    with pytest.raises(ValueError, match="ids"):
        viz.token_strip(PAIR, IDS[:-1], SEGMENTS, SPECIAL_FLAGS)


# ---- padding_mask_figure -----------------------------------------------------

BATCH = [["[CLS]", "the", "cat", "[SEP]"], ["[CLS]", "<i>", "[SEP]"], ["[CLS]", "[SEP]"]]
MASK = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]])


def test_padding_mask_draws_kept_and_padding_cells_in_two_colours():
    fig = viz.padding_mask_figure(MASK, ["first", "second", "<b>3</b>"], BATCH)
    token, padding = [t for t in fig.data if isinstance(t, go.Heatmap)]
    np.testing.assert_array_equal(~np.isnan(np.asarray(token.z, dtype=float)), MASK == 1)
    np.testing.assert_array_equal(~np.isnan(np.asarray(padding.z, dtype=float)), MASK == 0)
    assert {c for _, c in token.colorscale} == {KEEP}
    assert {c for _, c in padding.colorscale} == {PADDING} and KEEP != PADDING
    assert legend_colours(fig) == {"token": KEEP, "padding": PADDING}
    assert list(fig.layout.yaxis.ticktext) == ["first", "second", "&lt;b&gt;3&lt;/b&gt;"]
    assert list(fig.layout.xaxis.ticktext) == ["0", "1", "2", "3"]
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # first item on top


def test_padding_mask_hover_and_cells_name_each_rows_token():
    fig = viz.padding_mask_figure(MASK, ["first", "second", "third"], BATCH)
    token, padding = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert token.hovertemplate == "%{hovertext}<extra></extra>"
    assert token.hovertext[0][2] == "first · position 2: cat"
    assert token.hovertext[1][1] == "second · position 1: &lt;i&gt;"
    assert padding.hovertext[1][3] == "second · position 3: [PAD]"
    assert padding.hovertext[2][2] == "third · position 2: [PAD]"
    assert token.text[0][2] == "cat" and token.text[1][3] == ""  # each trace writes its own cells
    assert padding.text[1][3] == "[PAD]" and padding.text[0][2] == ""
    assert "<i>" not in fig.to_json()
    # a token given at a padded position is still shown as padding
    padded = viz.padding_mask_figure(np.array([[1, 0]]), ["x"], [["[CLS]", "stray"]])
    assert padded.data[1].hovertext[0][1] == "x · position 1: [PAD]"


def test_padding_mask_checks_shapes():
    with pytest.raises(ValueError, match="labels"):
        viz.padding_mask_figure(MASK, ["a", "b"], BATCH)
    with pytest.raises(ValueError, match="more tokens"):
        viz.padding_mask_figure(MASK[:, :2], ["a", "b", "c"], BATCH)


# ---- causal_mask_figure ------------------------------------------------------

CAUSAL_TOKENS = ["[CLS]", "the", "cat", "the", "[SEP]"]


def causal_cells(fig: go.Figure) -> tuple[set, set]:
    """(query, key) index pairs drawn by the "may attend" and the "masked" traces."""
    allowed, masked = [t for t in fig.data if isinstance(t, go.Heatmap)]
    drawn_allowed = {(i, j) for i, row in enumerate(allowed.z) for j in range(len(row))}
    assert masked.transpose  # its rows are key columns
    drawn_masked = {(i, j) for j, column in enumerate(masked.z) for i in range(len(column))}
    return drawn_allowed, drawn_masked


def test_causal_mask_lets_each_query_see_itself_and_the_past_only():
    L = len(CAUSAL_TOKENS)
    fig = viz.causal_mask_figure(L, CAUSAL_TOKENS)
    allowed, masked = causal_cells(fig)
    every = {(i, j) for i in range(L) for j in range(L)}
    assert allowed == {(i, j) for i, j in every if j <= i}
    assert masked == every - allowed
    allowed_trace, masked_trace = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert {c for _, c in allowed_trace.colorscale} == {KEEP}
    assert {c for _, c in masked_trace.colorscale} == {PADDING}
    assert legend_colours(fig) == {"may attend": KEEP, "masked (future)": PADDING}


def test_causal_mask_hover_and_axes_name_tokens_like_the_heatmap():
    fig = viz.causal_mask_figure(5, CAUSAL_TOKENS, title="What-if: causal mask")
    allowed, masked = [t for t in fig.data if isinstance(t, go.Heatmap)]
    labels = ["[CLS]·0", "the·1", "cat·2", "the·3", "[SEP]·4"]
    for trace in (allowed, masked):
        assert list(trace.x) == list(trace.y) == labels
    assert allowed.hovertemplate.replace("%{y}", labels[3]).replace("%{x}", labels[1]) == (
        "the·3 → the·1: may attend<extra></extra>"
    )
    assert masked.hovertemplate.replace("%{y}", labels[1]).replace("%{x}", labels[3]) == (
        "the·1 → the·3: masked (future)<extra></extra>"
    )
    assert list(fig.layout.xaxis.ticktext) == CAUSAL_TOKENS
    assert fig.layout.title.text == "What-if: causal mask"
    assert fig.layout.yaxis.autorange == "reversed"
    with pytest.raises(ValueError, match="tokens"):
        viz.causal_mask_figure(4, CAUSAL_TOKENS)


def test_causal_mask_at_512_tokens_stays_light():
    tokens = [f"t{i % 30}" for i in range(512)]
    size = len(viz.causal_mask_figure(512, tokens).to_json())
    print(f"causal_mask_figure, 512 tokens: {size / 1e3:.0f} kB of JSON")
    assert size < 800_000


def test_what_if_titles_reach_the_head_heatmap():
    fig = viz.head_heatmap(np.eye(3), ["a", "b", "c"], title="What-if: causal, L0 H1")
    assert fig.layout.title.text == "What-if: causal, L0 H1"
