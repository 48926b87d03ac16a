"""In Chromium at 1280 × 800: the token strip in the sidebar shows its colour key and its caption whole, each
line inside the figure, for a short sentence, for a sentence pair (a third key entry, segment B) and for a
decoder's continuation (its written tokens' entry)."""

from __future__ import annotations

import os
import urllib.parse

import pytest
from browser import CHROMIUM, served_chromium, wait_settled
from families import make_family

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)

# the strip's figure (the one whose caption names the vocabulary id): its box, each text line's box and text
STRIP = """() => {
    const plot = [...document.querySelectorAll('.js-plotly-plot')].find(p => p.textContent.includes('vocabulary id'));
    const svg = plot.querySelector('.main-svg').getBoundingClientRect();
    const lines = [...plot.querySelectorAll('.annotation-text tspan.line, .annotation-text')]
        .filter(t => t.textContent.trim() && !t.querySelector('tspan.line'))
        .map(t => {
            const r = t.getBoundingClientRect();
            return {text: t.textContent, box: [r.left, r.top, r.right, r.bottom]};
        });
    return {svg: [svg.left, svg.top, svg.right, svg.bottom], lines};
}"""
CASES = {
    "short": "The cat sat on the mat.",
    "pair": "The animal didn't cross the street because it was too tired.",
    "written": "The cat sat on the mat.",
}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    gpt2 = make_family(tmp_path_factory.mktemp("gpt2"), "gpt2")  # a decoder: its written tokens get a key entry
    with served_chromium() as (chromium, url):
        chromium.app_url, chromium.gpt2 = url, str(gpt2)
        yield chromium


@pytest.mark.parametrize("case", list(CASES))
def test_the_strips_key_and_caption_lie_whole_inside_its_figure(browser, case):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    query = {"s": CASES[case], **({"s2": "It was tired."} if case == "pair" else {})}
    if case == "written":  # the decoder continues the sentence: its tokens are marked and named in the key
        query.update(model=browser.gpt2, cont="1", n="4")
    try:
        page.goto(browser.app_url + "/?" + urllib.parse.urlencode(query))
        page.wait_for_selector(".js-plotly-plot", timeout=120_000)
        wait_settled(page, 120)
        page.wait_for_timeout(500)
        strip = page.evaluate(STRIP)
        left, top, right, bottom = strip["svg"]
        shown = " ".join(line["text"] for line in strip["lines"])
        expected = ["above each box: position", "vocabulary id"]
        expected += ["written by the model"] if case == "written" else ["[CLS] / [SEP]"]
        expected += ["segment A"] if case == "pair" else ["the text"]  # one text has no segment to tell apart
        for words in expected + (["segment B"] if case == "pair" else []):
            assert words in shown, shown
        for line in strip["lines"]:
            x0, y0, x1, y1 = line["box"]
            assert left - 0.5 <= x0 and x1 <= right + 0.5 and top - 0.5 <= y0 and y1 <= bottom + 0.5, (line, strip)
    finally:
        page.close()
