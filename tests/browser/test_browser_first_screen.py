"""In Chromium, in ordinary mode: a link to a main view (no head in it, so the page also says which head it
opened) shows at least half of the view's main figure without scrolling on a 1280 × 800 laptop, and all of it
at 1920 × 1080, for the bundled BERT model, GPT-2 and a Llama-style model; the sentence, the view buttons,
the layer and the head stay on that first screen."""

from __future__ import annotations

import contextlib
import os
import urllib.parse

import pytest
from browser import CHROMIUM, served_chromium
from families import make_family
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser_state import clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The animal didn't cross the street because it was too tired."  # an example: coreference is set
LONG = (  # 43 tokens for the bundled model: its head map is too dense for the column beside the controls
    "When the committee finally released its long awaited report on the state of the city's public transport "
    "network last Tuesday, the mayor said that it would take five more years and a lot of money to fix."
)
SCREENS = {(1280, 800): 0.5, (1920, 1080): 1.0}  # the share of the main figure that must be on the first screen
MODELS = ["bert", "gpt2", "llama"]  # bert: the bundled model
VIEWS = [
    "head",
    "overview",
    "shapeflow",
    "coref",
]
# the view's main figure: the first chart of the main column (the token strip is in the sidebar)
SHOWN = """() => {
    const chart = document.querySelector('[data-testid="stMain"] [data-testid="stPlotlyChart"]');
    const b = chart.getBoundingClientRect();
    const w = window.innerWidth, h = window.innerHeight;
    const seen = Math.max(0, Math.min(b.bottom, h) - Math.max(b.top, 0))
        * Math.max(0, Math.min(b.right, w) - Math.max(b.left, 0));
    const scrolled = [...document.querySelectorAll('*')].some(el => el.scrollTop > 0);
    return {share: seen / (b.width * b.height), box: [b.left, b.top, b.right, b.bottom], scrolled};
}"""
ON_SCREEN = """(names) => names.every(name => {
    const main = document.querySelector('[data-testid="stMain"]');
    const el = [...main.querySelectorAll('label, button')].find(e => e.innerText.trim() === name);
    if (!el) return false;
    const b = el.getBoundingClientRect();
    return b.top >= 0 && b.bottom <= window.innerHeight;
})"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    folders = {"bert": ""}  # the bundled model
    for family in MODELS[1:]:
        folders[family] = str(make_family(tmp_path_factory.mktemp(family), family))
    with served_chromium() as (chromium, url):
        yield chromium, url, folders


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("model", MODELS)
def test_a_link_shows_the_views_figure_on_the_first_screen(browser, model, view):
    check_first_screen(browser, model, view, SENTENCE)


def test_a_long_sentences_head_map_is_on_the_first_screen_too(browser):
    page = check_first_screen(browser, "bert", "head", LONG, keep=True)
    assert "[CLS]" in page.inner_text('[data-testid="stMain"] [data-testid="stPlotlyChart"]')  # the map's labels
    assert len(page.evaluate(TICKS)) >= 22  # the map keeps its width: half its columns labelled or more
    page.close()


TICKS = """() => [...document.querySelector('[data-testid="stMain"] [data-testid="stPlotlyChart"]')
    .querySelectorAll('.xtick text')].map(t => t.textContent)"""


def check_first_screen(browser, model: str, view: str, sentence: str, keep: bool = False):
    """The view's main figure and the controls on the first screen of each size in SCREENS: the link opened on the
    first, the window then made the next size (the server draws the same page whatever the window; the browser
    lays it out again, as for a link opened there). The page is closed unless ``keep``."""
    chromium, url, folders = browser
    (width, height), *others = SCREENS
    page = chromium.new_page(viewport={"width": width, "height": height})
    params = {"view": view, "s": sentence} | ({"model": folders[model]} if folders[model] else {})
    page.goto(f"{url}/?{urllib.parse.urlencode(params)}")
    wait_drawn(page)
    clean(page)
    page.wait_for_selector('[data-testid="stMain"] [data-testid="stPlotlyChart"] .main-svg', timeout=60_000)
    if model != "bert":
        assert f"— {model}" in page.inner_text("section[data-testid=stSidebar]")
    for screen in SCREENS:
        if screen != (width, height):
            page.set_viewport_size({"width": screen[0], "height": screen[1]})
            with contextlib.suppress(PlaywrightTimeout):  # laid out again within a few frames; else the assert says
                page.wait_for_function(f"() => ({SHOWN})().share >= {SCREENS[screen] - 0.001}", timeout=10_000)
        shown = page.evaluate(SHOWN)
        assert not shown["scrolled"]
        assert shown["share"] >= SCREENS[screen] - 0.001, (view, model, screen, shown)
        # what to change stays in sight: the sentence, Run, the view buttons, the layer and the head
        assert page.evaluate(ON_SCREEN, ["Sentence", "Run", "Head", "Overview", "Coreference", "Layer"]), screen
    if not keep:
        page.close()
    return page
