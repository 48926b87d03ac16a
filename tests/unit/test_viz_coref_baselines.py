"""The suite's bar chart drawn for its column: the baseline labels placed apart at the width they are shown."""

from __future__ import annotations

from itertools import pairwise

import pytest

from viz.coref_ranking import ranked_heads

RANKED = [(3, 1, 0.7), (0, 5, 0.65), (2, 2, 0.5)]
GLYPH = 0.6  # px per px of font size, about what the labels' font draws


def label_boxes(fig, font_size: int) -> list[tuple[float, float, float]]:
    """(row shift, left px, right px) of each baseline label, as drawn in the plot area."""
    plot = fig.layout.width - fig.layout.margin.l - fig.layout.margin.r
    boxes = []
    for a in fig.layout.annotations:
        if a.yref != "paper":
            continue
        centre = a.x * plot + a.xshift
        half = len(a.text) * GLYPH * font_size / 2
        boxes.append((a.yshift, centre - half, centre + half))
    return boxes


@pytest.mark.parametrize("width", [None, 700, 440, 300])
@pytest.mark.parametrize("font_size", [14, 22])
def test_baseline_labels_on_one_row_never_touch(width, font_size):
    fig = ranked_heads(RANKED, {"nearest": 0.62, "first": 0.44}, font_size=font_size, width=width)
    boxes = sorted(label_boxes(fig, font_size))
    for (row_a, _, right_a), (row_b, left_b, _) in pairwise(boxes):
        assert row_a != row_b or left_b - right_a >= font_size / 4


def test_the_figure_takes_the_width_of_its_column():
    assert ranked_heads(RANKED, {"nearest": 0.62, "first": 0.44}, width=440).layout.width == 440
    narrow = ranked_heads(RANKED, {"nearest": 0.62, "first": 0.44}, width=440)
    labels = {a.text: a.yshift for a in narrow.layout.annotations if a.yref == "paper"}
    assert labels["nearest 0.62"] != labels["first 0.44"]  # 0.18 apart is 50 px there: two rows
    wide = ranked_heads(RANKED, {"nearest": 0.7, "first": 0.3})
    labels = {a.text: a.yshift for a in wide.layout.annotations if a.yref == "paper"}
    assert labels["nearest 0.70"] == labels["first 0.30"]  # 220 px apart at the default width: one row
