"""How wide the page's columns are, for the figures that size themselves to fit them.

Streamlit does not tell the server how wide the window is, so the page is laid out for the
narrowest window the app supports, PAGE_PX, as Chromium draws it: in wide mode the main column
keeps 5 rem of padding on each side, beside a 300 px sidebar; presentation mode hides the sidebar
and sets the root font to 22 px. Columns are separated by 1 rem. A wider window leaves room to spare.
"""

from __future__ import annotations

import streamlit as st

PAGE_PX = 1280
SIDEBAR_PX = 300
SIDEBAR_INSET_PX = 30  # the sidebar's content keeps this much room on each side
PADDING_REM = 5
SCROLLBAR_PX = 20  # a classic scroll bar, on systems that draw one
ROUNDING_PX = 4  # columns come out a pixel or two off their share
# the tallest a view's main figure is drawn in ordinary mode: whole on a 1920 × 1080 screen under the sentence
# and the view's buttons (about 300 px), and more than half of it on a 1280 × 800 one
FIGURE_MAX_PX = 740


def rem_px(present: bool) -> int:
    """The root font's size: larger in presentation mode (`present`)."""
    return 22 if present else 16


def main_px(present: bool) -> int:
    """Width of the main column, where a figure drawn across the page goes (no sidebar beside it in
    presentation mode, `present`)."""
    sidebar = 0 if present else SIDEBAR_PX
    return PAGE_PX - sidebar - 2 * PADDING_REM * rem_px(present) - SCROLLBAR_PX


def sidebar_px() -> int:
    """Width of the sidebar's content."""
    return SIDEBAR_PX - 2 * SIDEBAR_INSET_PX


def expander_px(present: bool) -> int:
    """Width inside an expander across the main column: 1 rem of padding and a 1 px border each side."""
    return main_px(present) - 2 * (rem_px(present) + 1)


def column_px(present: bool, spec: int | list[int], index: int = 0) -> int:
    """Width of column ``index`` of ``st.columns(spec)`` in the main column."""
    weights = [1] * spec if isinstance(spec, int) else list(spec)
    room = main_px(present) - rem_px(present) * (len(weights) - 1)
    return int(room * weights[index] / sum(weights)) - ROUNDING_PX


def slots(beside: bool, n: int = 2) -> list:
    """``n`` columns side by side, or ``n`` containers one under the other, each across the page."""
    return list(st.columns(n)) if beside else [st.container() for _ in range(n)]
