"""In Chromium: a mid-length sentence's head map names every token, none over another, at 1280 × 800 (across
the page, at least half of it on the first screen as every view's main figure) and at 1280 × 720 presentation
(whole on the first screen, up to the 18 tokens its 18 px labels leave room for); a presentation's
Cross-attention map names every source token across the screen's width."""

from __future__ import annotations

import html
import os
import urllib.parse

import pytest
from browser import CHROMIUM, served_chromium
from families import make_seq2seq
from test_app import SENTENCE
from test_browser_state import clean, wait_drawn
from test_label_room import MID, PRESENT_ALL

from viz._text import readable_all

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
# the main figure's tick labels as drawn: each axis's texts and their boxes, and the figure's box
LABELS = """() => {
    const chart = document.querySelector('[data-testid="stMain"] [data-testid="stPlotlyChart"]');
    const box = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
    const axis = (name) => [...chart.querySelectorAll('.' + name + 'tick text')].map(t => [t.textContent, box(t)]);
    return {x: axis('x'), y: axis('y'), box: box(chart), tokens: chart.querySelector('.js-plotly-plot').data[0].x};
}"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    bart = make_seq2seq(tmp_path_factory.mktemp("bart"), "bart")
    with served_chromium() as (chromium, url):
        yield chromium, url, str(bart)


def drawn(browser, screen: tuple[int, int], **params) -> dict:
    chromium, url, _ = browser
    page = chromium.new_page(viewport={"width": screen[0], "height": screen[1]})
    page.goto(f"{url}/?{urllib.parse.urlencode(params)}")
    wait_drawn(page)
    clean(page)
    page.wait_for_selector('[data-testid="stMain"] [data-testid="stPlotlyChart"] .xtick text', timeout=60_000)
    found = page.evaluate(LABELS)
    assert page.evaluate("window.scrollY") == 0
    page.close()
    return found


def apart(labels: list, along: int) -> bool:
    """No label's box over the next one's (``along`` 0: side by side, 1: stacked), to a pixel."""
    edges = sorted((b[along], b[along + 2]) for _, b in labels)
    return all(start >= end - 1 for (_, end), (start, _) in zip(edges, edges[1:]))


def check(found: dict, axes: str = "xy") -> list[str]:
    tokens = readable_all(html.unescape(t.rsplit("·", 1)[0]) for t in found["tokens"])  # as drawn: pieces as text
    for axis in axes:
        assert [text for text, _ in found[axis]] == tokens, axis  # every token named, in order
        assert apart(found[axis], 0 if axis == "x" else 1), axis
    return tokens


@pytest.mark.parametrize("sentence", MID, ids=lambda s: f"{len(s.split())}words")
def test_a_mid_length_head_map_names_every_token_at_1280x800(browser, sentence):
    found = drawn(browser, (1280, 800), view="head", s=sentence)
    assert 26 <= len(check(found)) <= 28
    left, top, right, bottom = found["box"]
    assert 0 <= top and right <= 1280 and (min(bottom, 800) - top) / (bottom - top) >= 0.5


def test_a_presentations_head_map_names_every_token_on_the_first_screen(browser):
    found = drawn(browser, (1280, 720), view="head", s=PRESENT_ALL, present="1")
    assert len(check(found)) == 18
    left, top, right, bottom = found["box"]
    assert 0 <= top and bottom <= 720 and right <= 1280


def test_a_presentations_cross_attention_names_every_source_token_across_the_screen(browser):
    found = drawn(browser, (1280, 720), view="cross", s=SENTENCE, present="1", model=browser[2])
    assert len(check(found, "x")) == 28
    left, top, right, bottom = found["box"]
    assert 0 <= top and bottom <= 720 and right <= 1280 and right - left >= 900  # the screen's width, not 260 px
