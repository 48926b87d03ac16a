"""In Chromium at 1280 × 720 with ?model=smollm2&present=1: the W key writes one token at a time, the text
above the figure grows by that token, and the bars that chose it are wholly on the first screen."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_present import address, wait_idle
from test_browser_state import SIZE, clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
PROMPT = "The cat sat on the"
SHOTS = os.environ.get("LECTURE_SHOTS")  # a folder: the screens of the flow are saved there as PNGs
STATE = """() => {
    const line = document.querySelector('.writing');
    const chart = document.querySelector('[data-testid="stPlotlyChart"]').getBoundingClientRect();
    const parts = line ? [...line.querySelectorAll('.written, .picked, .newest')] : [];
    return {written: line ? parts.map((span) => span.textContent).join('') : null,
            newest: line ? line.querySelector('.newest').textContent : null,
            lineBottom: line ? line.getBoundingClientRect().bottom : null,
            top: chart.top, bottom: chart.bottom, scrollY: window.scrollY};
}"""


def written_n(page) -> int:
    found = re.search(r"[?&]n=(\d+)", address(page))
    return int(found.group(1)) if found and "cont=1" in address(page) else 0


def shoot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / name))


def test_w_writes_one_token_at_a_time_and_the_figure_stays_on_the_first_screen():
    with served_chromium() as (chromium, url):
        page = chromium.new_page(viewport=SIZE)
        page.goto(f"{url}/?model=smollm2&present=1&view=next&s={quote(PROMPT)}")
        wait_drawn(page)
        clean(page)
        shoot(page, "present-720-0-prompt.png")
        texts = []
        for n in (1, 2, 3):
            page.evaluate("document.activeElement && document.activeElement.blur()")  # the focus on the page
            page.keyboard.press("w")
            deadline = time.time() + 90
            while written_n(page) != n and time.time() < deadline:
                time.sleep(0.2)
            wait_idle(page)
            wait_drawn(page)
            clean(page)
            page.wait_for_selector(".writing .newest", timeout=60_000)
            state = page.evaluate(STATE)
            assert written_n(page) == n
            assert state["scrollY"] == 0 and state["top"] >= state["lineBottom"] > 0, state  # the text above it
            assert state["bottom"] <= SIZE["height"], state  # the bars wholly on the first screen
            assert state["written"] == (texts[-1] if texts else "") + state["newest"]  # one token more
            texts.append(state["written"])
            shoot(page, f"present-720-{n}-written.png")
        assert len(texts[0]) < len(texts[1]) < len(texts[2])
        page.close()
