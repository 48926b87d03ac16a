"""In Chromium, SmolLM2 writing one token at a time on the Next token view: on the ordinary page at 1280 × 800 the
bars stay wholly on the first screen as the text grows."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_present import address
from test_browser_state import clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
PROMPT = "The cat sat on the"
LAPTOP = {"width": 1280, "height": 800}
BARS = """() => {
    const chart = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')]
        .find((c) => (c.querySelector('.gtitle')?.textContent || '').includes('the next token'));
    if (!chart) return null;
    const box = chart.getBoundingClientRect();
    return {top: box.top, bottom: box.bottom, left: box.left, right: box.right, scrollY: window.scrollY,
            written: document.querySelector('.writing')?.textContent || ''};
}"""
IDLE = """() => document.querySelector('[data-testid="stApp"]')?.dataset.testScriptState === 'notRunning'
    && !document.querySelector('[data-testid="stStatusWidget"]')"""


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        yield chromium, url


def wait_idle(page) -> None:
    """Until the script run has ended, and again a moment later (a widget's change may start a second run)."""
    for _ in range(3):
        page.wait_for_function(IDLE, timeout=90_000)
        time.sleep(0.4)


def written_n(page) -> int:
    found = re.search(r"[?&]n=(\d+)", address(page))
    return int(found.group(1)) if found and "cont=1" in address(page) else 0


def write(page, n: int) -> None:
    """Click Write one token until the link says `n` tokens are written, the page drawn each time."""
    for k in range(written_n(page) + 1, n + 1):
        page.get_by_role("button", name="Write one token").click()
        deadline = time.time() + 90
        while written_n(page) != k and time.time() < deadline:
            time.sleep(0.2)
        wait_idle(page)
        wait_drawn(page)
        clean(page)
    assert written_n(page) == n


def test_on_a_laptop_screen_the_bars_stay_on_the_first_screen_as_tokens_are_written(browser):
    chromium, url = browser
    page = chromium.new_page(viewport=LAPTOP)
    page.goto(f"{url}/?model=smollm2&view=next&s={quote(PROMPT)}")
    wait_drawn(page)
    clean(page)
    write(page, 3)
    page.wait_for_selector(".writing .newest", timeout=60_000)
    time.sleep(0.5)
    bars = page.evaluate(BARS)
    assert bars is not None and len(bars["written"]) > len(PROMPT), bars
    assert bars["scrollY"] == 0, bars
    assert 0 <= bars["top"] and bars["bottom"] <= LAPTOP["height"], bars  # the whole figure, unscrolled
    assert 0 <= bars["left"] and bars["right"] <= LAPTOP["width"], bars
    page.close()
