"""In Chromium: a corpus run's folder opened in Head stats from a link shows its whole layer × head grid on the
first screen, at 1280 × 800 in ordinary mode (under the sentence, the view buttons and the first-visit notice)
and at 1280 × 720 in presentation mode, with the table of every head under it."""

from __future__ import annotations

import os
import urllib.parse

import pytest
from browser import CHROMIUM, app_server, launch
from test_browser_state import clean, wait_drawn
from test_corpus_results import tiny_run

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
GRID = """() => {
    const chart = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')]
        .find(c => c.innerText.includes('each head is diagonal'));
    if (!chart) return null;
    const b = chart.querySelector('.main-svg').getBoundingClientRect();
    const scrolled = [...document.querySelectorAll('*')].some(el => el.scrollTop > 0);
    return {box: [b.left, b.top, b.right, b.bottom], scrolled,
            tables: document.querySelectorAll('[data-testid="stDataFrame"]').length};
}"""


@pytest.mark.parametrize(("width", "height", "present"), [(1280, 800, "0"), (1280, 720, "1")], ids=["800", "present"])
def test_the_grid_of_a_corpus_run_is_whole_on_the_first_screen(tmp_path, width, height, present):
    from playwright.sync_api import sync_playwright

    out, _ = tiny_run(tmp_path)  # under the test session's folder: in ATTENTION_FILE_DIRS (conftest.py)
    query = urllib.parse.urlencode({"view": "stats", "over": "corpus", "run": str(out), "measure": "diagonal"})
    with app_server() as url, sync_playwright() as pw:
        chromium = launch(pw)
        page = chromium.new_page(viewport={"width": width, "height": height})
        page.goto(f"{url}/?{query}&present={present}")
        wait_drawn(page)
        clean(page)
        found = page.evaluate(GRID)
        chromium.close()
    assert found is not None, "no grid of the run on the page"
    left, top, right, bottom = found["box"]
    assert not found["scrolled"] and found["tables"] >= 1, found
    assert 0 <= left and right <= width and 0 <= top and bottom <= height, found
