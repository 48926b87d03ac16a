"""The Next token view's bars (viz/next_token.py): each panel on its own scale, the panels far enough apart that their
tick labels never run together, as a presentation draws them (1180 px wide, 22 px text)."""

from __future__ import annotations

import numpy as np
import pytest

from viz.next_token import CHAR_WIDTH, next_token_figure, softmax

CANDIDATES = ["Ġwas", "Ġhad", "'s", "Ġwasn", "Ġdidn"]


@pytest.mark.parametrize("width, font_size", [(1180, 22), (800, 14), (None, 14)], ids=["presentation", "page", "auto"])
def test_each_panel_has_its_own_scale_and_two_panels_tick_labels_never_touch(width, font_size):
    logits = np.array([3.0, 1.3, 0.9, 0.9, 0.7])
    probs, tempered = softmax(logits) * 0.7, softmax(logits, 2.0) * 0.1  # the rest of the vocabulary elsewhere
    fig = next_token_figure(CANDIDATES, probs, tempered, 2.0, width=width, font_size=font_size)
    first, second = fig.layout.xaxis, fig.layout.xaxis2
    assert first.range[1] == pytest.approx(probs.max() * 1.25)  # at T = 2 the bars of a few per cent fill their panel
    assert second.range[1] == pytest.approx(tempered.max() * 1.25) and second.range[1] < first.range[1] / 4
    assert second.tickformat == ".1%"  # "0.5%", not "0%" five times over
    plot_px = (width or 800) - fig.layout.margin.l - fig.layout.margin.r
    gap_px = (second.domain[0] - first.domain[1]) * plot_px
    # the first panel's last label sits on its right edge, the second's first on its left: half of each in the gap
    widest = max(len(f"{v:.1%}") for v in (first.range[1], second.range[1])) * font_size * CHAR_WIDTH
    assert gap_px >= widest, (gap_px, widest)  # "60%0%" was 0.04 of the plot apart: 46 px at 1180
