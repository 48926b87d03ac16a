"""In Chromium, what the page writes reads whole: at 1280 × 720 presenting SmolLM2 the key buttons' words beside their
keys ("Head  Shift + ←", once "← …  Shift + ←"), and at 1280 × 720 presenting and at 1280 × 800 the guided walk's
tensor titles with their whole shapes (once "L3 H1 · Q… · The…") and the Overview's pattern labels each within its
tile (once "heterogeneous" ran over its neighbours) beside a checkbox whose label is whole."""

from __future__ import annotations

import os
import re
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_state import clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The animal didn't cross the street because it was too tired."
SCREENS = {"present": ({"width": 1280, "height": 720}, "&present=1"), "page": ({"width": 1280, "height": 800}, "")}
CUT = "(el) => el.scrollWidth > el.clientWidth + 1"
BUTTONS = f"""() => [...document.querySelectorAll('[class*="st-key-present_"] button')]
    .filter((b) => b.getBoundingClientRect().width > 0)
    .map((b) => {{ const label = b.querySelector('[data-testid="stMarkdownContainer"]');
                   return {{text: b.textContent, cut: ({CUT})(label)}}; }})"""
TITLES = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].map((plot) => {
    const title = plot.querySelector('.gtitle'), box = plot.getBoundingClientRect();
    if (!title) return null;
    const lines = [...title.querySelectorAll('tspan.line')].map((t) => t.textContent);
    return {lines: lines.length ? lines : [title.textContent], over: title.getBoundingClientRect().right > box.right};
}).filter(Boolean)"""
LABELS = f"""() => {{
    const plot = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
    const notes = [...plot.querySelectorAll('.annotation')].map((a) => {{
        const b = a.querySelector('.annotation-text').getBoundingClientRect();
        return {{text: a.textContent, left: b.left, right: b.right, top: Math.round(b.top)}}; }});
    const box = document.querySelector('.st-key-overview_patterns [data-testid="stMarkdownContainer"]');
    return {{notes, boxCut: ({CUT})(box), box: box.textContent}};
}}"""


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        yield chromium, url


def opened(browser, screen: str, query: str):
    chromium, url = browser
    size, present = SCREENS[screen]
    page = chromium.new_page(viewport=size)
    page.goto(f"{url}/?s={quote(SENTENCE)}{present}{query}")
    wait_drawn(page)
    clean(page)
    page.wait_for_selector('[data-testid="stMain"] .js-plotly-plot', timeout=60_000)
    return page


def test_the_key_buttons_read_their_words_beside_their_keys(browser):
    page = opened(browser, "present", "&model=smollm2&view=head")
    buttons = page.evaluate(BUTTONS)
    assert len(buttons) == 6 and not [b for b in buttons if b["cut"]], buttons
    assert [b["text"] for b in buttons] == [
        "HeadShift + ←",
        "HeadShift + →",
        "LayerShift + ↑",
        "LayerShift + ↓",
        "ViewV",
        "WriteW",
    ], buttons
    page.close()


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("step", ["2", "3"], ids=["QKV", "heads"])  # three tensors across, then two
def test_the_walks_tensor_titles_keep_their_shapes_whole(browser, screen, step):
    page = opened(browser, screen, f"&model=smollm2&view=walk&walk={step}")
    titles = page.evaluate(TITLES)
    shapes = [line for title in titles for line in title["lines"] if "[" in line]
    assert len(shapes) >= 2, titles  # every tensor's title names its shape …
    assert all(re.search(r"\[1( ?× ?\d+)+\]", line) for line in shapes), titles  # … whole
    assert not [t for t in titles if t["over"]], titles
    page.close()


@pytest.mark.parametrize("screen", SCREENS)
def test_the_overviews_pattern_labels_stay_within_their_tiles(browser, screen):
    page = opened(browser, screen, "&view=overview&patterns=1")
    page.wait_for_selector('[data-testid="stMain"] .annotation', timeout=60_000)
    found = page.evaluate(LABELS)
    notes = sorted(found["notes"], key=lambda n: (n["top"], n["left"]))
    touching = [(a, b) for a, b in zip(notes, notes[1:]) if a["top"] == b["top"] and a["right"] > b["left"] - 2]
    assert len(notes) >= 36 and not touching, touching  # labels in a row: each within its own tile, a gap between
    assert any(n["text"] == "hetero." for n in notes), notes  # "heterogeneous", shortened
    assert found["box"] == "Label each head with its pattern" and not found["boxCut"], found
    page.close()
