"""The Logit lens figure (viz/lens.py): each cell's text is the top token's start, as much of it as the cell's
width holds, so that neighbouring cells' words never run into each other."""

from __future__ import annotations

import numpy as np

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
