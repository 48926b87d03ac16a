"""In Chromium, at 1280 × 720 in presentation mode and at 1280 × 800: the Masks view's figures each fit the screen
with no axis title over a figure title; no figure title runs under the modebar or is cut inside a word; the
presentation shows no focus frame round the page after a key."""

from __future__ import annotations

import os
import time
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_state import clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The animal didn't cross the street because it was too tired."
SIZES = {"present": ((1280, 720), "present=1&"), "page": ((1280, 800), "")}
# each chart's title, its axis titles and (on hover) its modebar, as boxes on the page
BOXES = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map(c => {
    const box = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
        return r.width ? {left: r.left, right: r.right, top: r.top, bottom: r.bottom} : null; };
    return {chart: box(c), title: box(c.querySelector('.gtitle')), text: c.querySelector('.gtitle')?.textContent || '',
        axes: [...c.querySelectorAll('.xtitle, .ytitle')].map(box).filter(Boolean),
        modebar: box(c.querySelector('.modebar-container .modebar'))};
})"""


def overlap(a, b) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        yield chromium, url


def opened(browser, size: str, view: str):
    chromium, url = browser
    (width, height), query = SIZES[size]
    page = chromium.new_page(viewport={"width": width, "height": height})
    page.goto(f"{url}/?{query}view={view}&layer=2&head=3&s={quote(SENTENCE)}")
    wait_drawn(page)
    clean(page)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .gtitle', timeout=60_000)
    time.sleep(0.5)
    return page, height


@pytest.mark.parametrize("size", list(SIZES))
def test_the_masks_figures_fit_the_screen_and_no_axis_title_is_over_a_figure_title(browser, size):
    page, height = opened(browser, size, "masks")
    charts = page.evaluate(BOXES)
    assert len(charts) >= 4
    for chart in charts:
        assert chart["chart"]["bottom"] - chart["chart"]["top"] <= height, chart  # whole on one screen
        if chart["title"]:
            assert not [a for a in chart["axes"] if overlap(a, chart["title"])], chart
    page.close()


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("view", ["shapeflow", "masks"])
def test_no_title_runs_under_the_modebar_or_is_cut_inside_a_word(browser, size, view):
    page, _ = opened(browser, size, view)
    charts = page.locator('[data-testid="stPlotlyChart"]')
    # the words the page shows whole (the sentence, the diagram's boxes, the captions): a cut title's last
    # word may be one of them, and may not be the start of one ("hea…" of "head", "Q projec…")
    shown = (page.inner_text("body") + " " + SENTENCE).split()
    words = {w.strip(",.:;()“”\"'") for w in shown if not w.endswith("…")} - {""}
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        chart.hover(position={"x": 20, "y": 20})
        page.wait_for_timeout(300)
        shown = page.evaluate(BOXES)[i]
        if shown["title"] and shown["modebar"]:
            assert not overlap(shown["title"], shown["modebar"]), shown
        for part in shown["text"].split(" · "):
            if part.endswith("…"):
                last = part.removesuffix("…").split()[-1]
                assert last in words or not any(w.startswith(last) for w in words), shown["text"]
    page.close()


def test_a_key_leaves_no_focus_frame_round_the_page(browser):
    page, _ = opened(browser, "present", "shapeflow")
    page.mouse.click(740, 600)  # on the page, then a key: the page's scroll area takes the focus
    page.keyboard.press("ArrowRight")
    wait_drawn(page)
    frame = page.evaluate(
        """() => getComputedStyle(document.querySelector('[data-testid="stMain"]'), '::before').boxShadow"""
    )
    assert frame == "none", frame
    page.close()
