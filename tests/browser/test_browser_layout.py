"""At the narrowest window the page is laid out for (1280 × 720), with a 41- and a 128-token sentence:
no figure runs past the page's right edge, no text spills out of a shape-flow box, and no two tick
labels of a heatmap overlap, in the views that draw figures side by side and in presentation mode."""

from __future__ import annotations

import os
import urllib.parse

import pytest
from browser import CHROMIUM, served_chromium, wait_settled

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)

WORDS = (
    "the animal did not cross the street because it was too tired and the weather was cold so everyone "
    "stayed inside the old house near the river while the children played quietly with their small wooden "
    "toys all afternoon long and their grandmother told stories about the war the harvest the long winters "
    "and the summer when the bridge fell into the water after a storm that lasted three days and nights "
    "without any break in the rain which flooded the fields the roads and the lower rooms of every farm along "
    "the valley so that people had to carry their food their animals and their furniture up to the hills "
    "where they waited for the water to go down again before they could return"
).split()
# every word is one WordPiece: n words and "." make n + 3 tokens with [CLS] and [SEP]
SENTENCES = {41: " ".join(WORDS[:38]) + ".", 128: " ".join(WORDS[:125]) + "."}
PAGES = [  # view, tokens, presentation mode, coreference mode
    ("flow", 41, False, None),
    ("flow", 128, True, None),
    ("rollout", 41, False, None),
    ("rollout", 128, True, None),
    ("efficient", 41, False, None),
    ("masks", 41, False, None),
    ("masks", 128, True, None),
    ("coref", 41, False, "Minimal pairs"),
    ("coref", 41, True, "Minimal pairs"),
]

FIGURES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => {
    const svg = plot.querySelector('.main-svg').getBoundingClientRect();
    const ticks = [...plot.querySelectorAll('.xaxislayer-above, .yaxislayer-above')].map(layer =>
        [...layer.querySelectorAll('.xtick text, .ytick text')].filter(t => t.textContent).map(t => {
            const b = t.getBBox(), m = t.getScreenCTM();
            const at = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
            return {text: t.textContent, corners: [at(b.x, b.y), at(b.x + b.width, b.y),
                                                   at(b.x + b.width, b.y + b.height), at(b.x, b.y + b.height)]};
        }));
    return {title: (plot.querySelector('.gtitle') || {}).textContent || '', left: svg.left, right: svg.right,
            ticks};
})"""

# the shape-flow diagram (the figure with the boxes' shapes, one stage of it): each box (a rect shape) and
# every line of text that starts inside it
FLOW_BOXES = """() => {
    const plot = document.querySelector('.st-key-shapeflow_chart .js-plotly-plot');  // the diagram, on any stage
    const rects = [...plot.querySelectorAll('.shapelayer path')].map(p => p.getBoundingClientRect())
        .filter(r => r.width > 20 && r.height > 20);
    const lines = [...plot.querySelectorAll('.annotation-text tspan.line, .annotation-text')]
        .filter(t => t.textContent.trim() && !t.querySelector('tspan.line')).map(t => t.getBoundingClientRect());
    return {rects: rects.map(r => [r.left, r.top, r.right, r.bottom]),
            lines: lines.map(r => [r.left, r.top, r.right, r.bottom])};
}"""


def overlap(a: list, b: list) -> bool:
    """Whether two convex quadrilaterals (corner lists) overlap by more than half a pixel (separating axes)."""
    for poly in (a, b):
        for i in range(4):
            (x0, y0), (x1, y1) = poly[i], poly[(i + 1) % 4]
            nx, ny = y0 - y1, x1 - x0
            norm = (nx * nx + ny * ny) ** 0.5 or 1.0
            pa = [(x * nx + y * ny) / norm for x, y in a]
            pb = [(x * nx + y * ny) / norm for x, y in b]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= 0.5:
                return False
    return True


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        chromium.app_url = url
        yield chromium


def open_page(browser, view: str, n: int, present: bool, mode: str | None):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    query = {"s": SENTENCES[n], "view": view, "layer": "0", "head": "0", **({"present": "1"} if present else {})}
    page.goto(browser.app_url + "/?" + urllib.parse.urlencode(query))
    page.wait_for_selector(".js-plotly-plot", timeout=120_000)
    wait_settled(page, 120)
    if mode:
        page.get_by_role("radio", name=mode).or_(page.get_by_role("button", name=mode)).first.click()
        page.wait_for_function("() => document.body.innerText.includes('Twin sentences')", timeout=120_000)
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 4", timeout=60_000)
        wait_settled(page, 120)
    page.wait_for_timeout(500)
    return page


@pytest.mark.parametrize(
    "view, n, present, mode",
    PAGES,
    ids=[f"{v}-{n}{'-present' if p else ''}{'-pairs' if m else ''}" for v, n, p, m in PAGES],
)
def test_figures_stay_on_the_page_and_their_labels_apart(browser, view, n, present, mode):
    page = open_page(browser, view, n, present, mode)
    try:
        assert page.locator('[data-testid="stException"]').count() == 0
        page_right = page.evaluate("() => document.documentElement.clientWidth")
        main = page.evaluate(
            "() => document.querySelector('[data-testid=stMainBlockContainer]').getBoundingClientRect().right"
        )
        figures = page.evaluate(FIGURES)
        assert len(figures) >= 2
        for fig in figures:
            assert fig["right"] <= min(page_right, main) + 1, f"{fig['title']!r} runs past the right edge"
            for labels in fig["ticks"]:
                for a, b in zip(labels, labels[1:]):
                    assert not overlap(a["corners"], b["corners"]), (
                        f"{fig['title']!r}: tick labels {a['text']!r} and {b['text']!r} overlap"
                    )
        if view == "flow":
            boxes = page.evaluate(FLOW_BOXES)
            assert len(boxes["rects"]) >= 2, boxes  # a stage of several boxes (the 440 px under the controls)
            inside, filled = 0, set()
            for left, top, right, bottom in boxes["lines"]:
                box = next(
                    (r for r in boxes["rects"] if r[0] <= left + 1 and left < r[2] and r[1] <= top + 2 and top < r[3]),
                    None,
                )
                if box is not None:
                    inside += 1
                    filled.add(tuple(box))
                    assert right <= box[2] + 0.5 and bottom <= box[3] + 2, "text spills out of its box"
            assert inside >= 2 * len(boxes["rects"]) and len(filled) == len(boxes["rects"])  # every box's lines
    finally:
        page.close()
