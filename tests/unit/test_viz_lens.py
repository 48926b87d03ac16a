"""The Logit lens figure (viz/lens.py): each cell's text is the top token's start, as much of it as the cell's
width holds, so that neighbouring cells' words never run into each other."""

from __future__ import annotations

import numpy as np
import pytest

from viz.heatmap import CHAR_WIDTH, FIGURE_PX
from viz.lens import CELL_CHARS, lens_view


def _figure(L: int, piece: str = "Ġcommittee", n_layers: int = 30):
    top_tokens = [[[piece, "Ġthe"] for _ in range(L)] for _ in range(n_layers)]
    probs = np.tile(np.array([0.6, 0.1], dtype=np.float32), (n_layers, L, 1))
    return lens_view(top_tokens, np.zeros((n_layers, L, 2), dtype=np.int64), probs, [f"t{j}" for j in range(L)])


def test_a_cell_shows_what_its_width_holds():
    few, many = _figure(8), _figure(40)
    assert few.data[0].text[0][0] == " committee"[:CELL_CHARS]  # the token as text, its first characters
    for fig, L in ((few, 8), (many, 40)):
        text_px, cell_px = fig.data[0].textfont.size, (FIGURE_PX - 160) / L
        longest = max(len(cell) for row in fig.data[0].text for cell in row)
        assert longest * text_px * CHAR_WIDTH <= cell_px, (L, longest)
    assert 0 < len(many.data[0].text[0][0]) < CELL_CHARS
    assert "committee" in many.data[0].hovertext[0][0]  # the hover has it whole


def test_a_cut_cell_is_never_half_an_escaped_character():
    fig = _figure(8, piece="&&&&&&&&&&")
    assert fig.data[0].text[0][0] == "&amp;" * CELL_CHARS


def test_a_deep_model_is_drawn_every_few_layers_with_the_last_and_the_commit_marks_kept():
    from ui.page.page import figure_height
    from viz.lens import drawn_layers, readable_every

    assert readable_every(30, 500, 14) == 2 and readable_every(30, figure_height(), 22) >= 3  # SmolLM2: page, room
    assert readable_every(4, 500, 14) == 1
    assert drawn_layers(30, 3) == list(range(2, 30, 3)) and drawn_layers(30, 1, 5, 10) == list(range(5, 11))
    assert drawn_layers(30, 4, 10, 20) == [12, 16, 20]  # counted back from the last drawn
    for bad in ((30, 0), (30, 1, 6, 5), (30, 1, 0, 30)):
        with pytest.raises(ValueError):
            drawn_layers(*bad)
    n_layers, L = 30, 3
    top_ids = np.zeros((n_layers, L, 2), dtype=np.int64)
    top_ids[:7, 1, 0], top_ids[:29, 2, 0] = 1, 1  # commits: position 0 at layer 0, 1 at 7, 2 at 29
    probs = np.random.default_rng(0).random((n_layers, L, 2)).astype(np.float32)
    top_tokens = [[[f"l{i}p{j}", "x"] for j in range(L)] for i in range(n_layers)]
    layers = drawn_layers(n_layers, 3)  # 2, 5, 8, …, 29
    fig = lens_view(top_tokens, top_ids, probs, ["a", "b", "c"], layers=layers)
    grid, marks = fig.data
    assert list(grid.y) == [f"layer {i}" for i in layers]
    np.testing.assert_array_equal(np.array(grid.z), probs[layers, :, 0])
    assert grid.text[0][0] == "l2p0" and grid.hovertext[-1][2].startswith("layer 29, after")
    assert list(marks.y) == ["layer 2", "layer 8", "layer 29"]  # the first drawn layer from the commit on
    assert list(marks.customdata) == [0, 7, 29] and "layer %{customdata}" in marks.hovertemplate
    every = lens_view(top_tokens, top_ids, probs, ["a", "b", "c"])
    assert len(every.data[0].y) == n_layers and list(every.data[1].y) == ["layer 0", "layer 7", "layer 29"]
