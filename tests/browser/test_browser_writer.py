"""In Chromium, SmolLM2 writing one token at a time on the Next token view: on the ordinary page at 1280 × 800 the
bars stay wholly on the first screen as the text grows; at 1280 × 720 in presentation mode another candidate is
picked in the box under the bars (nothing in it cut) and the page comes back to the bars of the text rewritten; a
click on a bar writes its token in place of the one written.
LECTURE_SHOTS (a folder) keeps the screens as PNGs."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_lecture import shoot
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
    shoot(page, "writer-800-3-written.png")
    page.close()


PRESENT = {"width": 1280, "height": 720}
# the box that offers another candidate, its list when open, and the writing line: any text cut
OFFER = """() => {
    const cut = (el) => el.scrollWidth > el.clientWidth + 1;
    const box = document.querySelector('.st-key-next_pick');
    const options = [...document.querySelectorAll('[role="option"]')];
    return {label: box.querySelector('label')?.textContent || '', labelCut: cut(box.querySelector('label')),
            options: options.map((o) => o.textContent),
            optionsCut: options.filter((o) => cut(o) || o.getBoundingClientRect().right > window.innerWidth
                || o.getBoundingClientRect().left < 0).map((o) => o.textContent)};
}"""


def written_three(chromium, url: str, viewport: dict, more: str = ""):
    """A page of the Next token view with three tokens of PROMPT's continuation written, the first of them chosen,
    drawn and settled."""
    page = chromium.new_page(viewport=viewport)
    page.goto(f"{url}/?model=smollm2{more}&view=next&s={quote(PROMPT)}&cont=1&n=3&pos=4")
    wait_drawn(page)
    wait_idle(page)
    clean(page)
    return page


def picked(page) -> str | None:
    found = re.search(r"[?&]pick=([^&]+)", address(page))
    return found.group(1) if found else None


def test_in_presentation_another_candidate_is_picked_and_the_bars_come_back_on_the_first_screen(browser):
    page = written_three(*browser, PRESENT, "&present=1")
    before = page.evaluate(BARS)["written"]
    box = page.locator(".st-key-next_pick")
    box.scroll_into_view_if_needed()
    box.locator('[role="combobox"]').click()
    page.wait_for_selector('[role="option"]', timeout=30_000)
    offer = page.evaluate(OFFER)
    shoot(page, "writer-present-720-offer.png")
    assert len(offer["options"]) >= 9 and not offer["labelCut"] and not offer["optionsCut"], offer
    choice = offer["options"][1]
    page.locator('[role="option"]').nth(1).click()
    deadline = time.time() + 90
    while picked(page) is None and time.time() < deadline:
        time.sleep(0.2)
    wait_idle(page)
    wait_drawn(page)
    clean(page)
    assert picked(page) is not None and picked(page).startswith("0."), address(page)  # the first written token's
    time.sleep(0.5)
    bars = page.evaluate(BARS)
    line = page.locator(".writing .picked").first.text_content() or ""
    assert line.strip() == choice.strip().replace("␣", " ").strip(), (line, choice)  # the candidate in its place
    assert bars["written"] != before, bars
    assert bars["scrollY"] == 0 and 0 <= bars["top"] and bars["bottom"] <= PRESENT["height"], bars  # back on top
    shoot(page, "writer-present-720-picked.png")
    page.close()


def test_a_click_on_a_bar_writes_its_token_in_place_of_the_one_written(browser):
    page = written_three(*browser, LAPTOP)
    chart = page.locator('[data-testid="stMain"] .js-plotly-plot').first
    bar = chart.locator(".barlayer .trace").first.locator(".point").nth(1).bounding_box()  # the second candidate's
    assert bar is not None
    middle = bar["y"] + bar["height"] / 2
    ticks = [(t.bounding_box(), t.text_content() or "") for t in chart.locator(".yaxislayer-above .ytick text").all()]
    label = min(ticks, key=lambda tick: abs(tick[0]["y"] + tick[0]["height"] / 2 - middle))[1]  # the bar's row
    page.mouse.click(bar["x"] + bar["width"] / 2, bar["y"] + bar["height"] / 2)
    deadline = time.time() + 90
    while picked(page) is None and time.time() < deadline:
        time.sleep(0.2)
    wait_idle(page)
    wait_drawn(page)
    clean(page)
    assert picked(page) is not None and picked(page).startswith("0."), address(page)  # the first written token's
    line = page.locator(".writing .picked").first.text_content() or ""
    assert line == label.replace("␣", " "), (line, label)  # the bar's token in its place
    shoot(page, "writer-800-bar-clicked.png")
    page.close()


LONG = "When the committee finally released its long awaited report on the state of the city's public transport last"
LINE = """() => {
    const line = document.querySelector('.writing'), next = line?.querySelector('.next');
    const title = [...document.querySelectorAll('.gtitle')].map((t) => t.textContent)
        .find((t) => t.includes('the next token')) || '';
    if (!line || !next) return {line: line?.textContent || null, title};
    const spans = [...line.querySelectorAll('span')], before = spans.slice(0, spans.indexOf(next));
    const box = line.getBoundingClientRect(), mark = next.getBoundingClientRect();
    return {line: line.textContent, next: next.textContent, before: before.map((s) => s.textContent).join(''), title,
            within: mark.left >= box.left - 1 && mark.right <= box.right + 1};
}"""


def test_in_presentation_the_line_shows_the_prompt_and_follows_the_bars_position_on_the_arrow_keys(browser):
    """1280 × 720, a prompt longer than the line holds: the prompt is shown before a token is written; each ← moves
    the bars back a position and the line marks the token after it (what its red bar is), in view, not cut off."""
    chromium, url = browser
    page = chromium.new_page(viewport=PRESENT)
    page.goto(f"{url}/?model=smollm2&present=1&view=next&s={quote(LONG)}")
    wait_drawn(page)
    wait_idle(page)
    clean(page)
    line = page.evaluate(LINE)
    assert line["line"] and line["line"].endswith("transport last") and "next" not in line, line  # the prompt
    for _ in range(8):
        title = line["title"]
        page.keyboard.press("ArrowLeft")
        deadline = time.time() + 60
        while page.evaluate(LINE)["title"] == title and time.time() < deadline:
            time.sleep(0.2)
        wait_idle(page)
        line = page.evaluate(LINE)
        read = re.search(r"After position \d+ \((.*)\): the next token", line["title"]).group(1)
        assert line.get("next") and line["within"], line  # the token that came next, marked, on the screen
        assert line["before"].rstrip().endswith(read), line  # the text up to the bars' position, then the mark
    shoot(page, "writer-present-720-stepped.png")
    page.close()
