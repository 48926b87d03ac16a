"""In Chromium at 1280 × 720 with ?present=1: each view's main figure lies wholly on the first screen,
at least half the window wide, with tick labels of 18 px or more, and the head key steps the head."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_state import SIZE, clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The animal didn't cross the street because it was too tired."  # 16 tokens
LONG = (
    "The trophy did not fit into the brown suitcase because it was far too large, so the traveller had to "
    "leave it behind at the hotel and buy a new bag before the long flight home."
)  # 41 tokens
FIRST_FIGURE = """() => {
    const chart = document.querySelector('[data-testid="stPlotlyChart"]');
    const box = chart.getBoundingClientRect();
    const sizes = [...chart.querySelectorAll('.xtick text, .ytick text')]
        .map(t => parseFloat(getComputedStyle(t).fontSize));
    return {top: box.top, bottom: box.bottom, width: box.width, ticks: sizes.length, smallest: Math.min(...sizes)};
}"""


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        yield chromium, url


def address(page) -> str:
    return page.evaluate("location.href")  # page.url lags behind the app's replaceState


def head_in(page) -> int:
    return int(re.search(r"[?&]head=(\d+)", address(page)).group(1))


@pytest.mark.parametrize("view", ["head", "overview", "coref"])  # the shape flow: test_browser_shapeflow.py
@pytest.mark.parametrize("text", [SENTENCE, LONG], ids=["16-tokens", "41-tokens"])
def test_the_figure_fills_the_first_screen_and_the_keys_step_the_head(browser, view, text):
    chromium, url = browser
    page = chromium.new_page(viewport=SIZE)
    coref = "&pronoun=10&candidates=1,8&answer=1" if view == "coref" and text == LONG else ""
    page.goto(f"{url}/?present=1&view={view}&layer=2&head=3&s={quote(text)}{coref}")
    wait_drawn(page)
    clean(page)
    # a page's chart code comes as a chunk of its own, which can arrive after the run has ended
    page.wait_for_selector('[data-testid="stPlotlyChart"] .xtick text', timeout=60_000)
    assert page.evaluate("window.scrollY") == 0
    fig = page.evaluate(FIRST_FIGURE)
    assert fig["top"] >= 0 and fig["bottom"] <= SIZE["height"], fig
    assert fig["width"] >= SIZE["width"] / 2, fig
    assert fig["ticks"] > 0 and fig["smallest"] >= 18, fig
    assert head_in(page) == 3
    page.keyboard.press("Shift+ArrowRight")
    deadline = time.time() + 60
    while head_in(page) != 4 and time.time() < deadline:
        time.sleep(0.2)
    assert head_in(page) == 4
    wait_idle(page)
    page.keyboard.press("Shift+ArrowDown")
    while "layer=3" not in address(page) and time.time() < deadline:
        time.sleep(0.2)
    assert "layer=3" in address(page)
    page.close()


def test_copy_link_copies_this_views_address_in_one_click_and_shows_it(browser):
    chromium, url = browser
    page = chromium.new_page(viewport=SIZE)
    page.goto(f"{url}/?present=1&view=head&layer=2&head=3&s={quote(SENTENCE)}")
    wait_drawn(page)
    page.wait_for_function(KEYS_READY, timeout=60_000)  # a key pressed before the page hears keys is lost
    page.keyboard.press("Shift+ArrowRight")
    deadline = time.time() + 60
    while head_in(page) != 4 and time.time() < deadline:
        time.sleep(0.2)
    assert head_in(page) == 4
    wait_idle(page)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy link to this view").click()  # one click copies
    page.get_by_text("Copied: the link is on the clipboard").wait_for(timeout=10_000)
    assert page.evaluate("navigator.clipboard.readText()") == address(page)
    code = page.locator('[data-testid="stCode"]').first
    code.wait_for(timeout=30_000)
    shown = code.inner_text().strip()
    assert shown.startswith(f"{url}/?") and "head=4" in shown and "layer=2" in shown, shown
    assert shown.split("?", 1)[1] == address(page).split("?", 1)[1]  # the address bar's own query
    page.close()


KEYS_READY = """() => window.presentKeys === true
    && !!document.querySelector('.st-key-present_next_head button:not([disabled])')"""
IDLE = """() => document.querySelector('[data-testid="stApp"]')?.dataset.testScriptState === 'notRunning'
    && !document.querySelector('[data-testid="stStatusWidget"]')
    && !!document.querySelector('.st-key-present_next_head button:not([disabled])')"""


def wait_idle(page) -> None:
    """Until the page's script run has ended (Streamlit's app root says so, and again a moment later: a
    widget's change may start a second run) and the key's button is there to be clicked."""
    for _ in range(2):
        page.wait_for_function(IDLE, timeout=60_000)
        time.sleep(0.4)
    page.wait_for_function(IDLE, timeout=60_000)


def settle_on(page, pattern: str) -> None:
    """Until the address shows ``pattern`` (the app writes it as its run draws the page) and that run has ended."""
    deadline = time.time() + 60
    while not re.search(pattern, address(page)) and time.time() < deadline:
        time.sleep(0.2)
    assert re.search(pattern, address(page)), address(page)
    wait_idle(page)


def pick(page, key: str, option: str) -> None:
    """Open the select box of this widget key and click an option with the mouse (a second time if the
    first click came as the box was still moving into place and opened nothing)."""
    box, choice = (
        page.locator(f".st-key-{key} [data-testid=stSelectbox]"),
        page.get_by_role("option", name=option, exact=True),
    )
    box.wait_for(state="visible", timeout=30_000)
    for attempt in range(3):
        box.click()
        try:
            choice.wait_for(state="visible", timeout=5_000)
            break
        except Exception:
            if attempt == 2:
                raise
    choice.click()


def pick_example(page) -> None:
    page.get_by_text("Sentence and examples").click()
    page.locator(".st-key-preset").wait_for(state="visible", timeout=30_000)
    time.sleep(0.5)  # the expander opens with an animation
    pick(page, "preset", "Coreference: it → trophy (big)")


# each use with the mouse, and what the address shows once the run it started has drawn the page
MOUSE_USES = {
    "hide-checkbox": (lambda page: page.get_by_text("Hide [CLS]/[SEP]").click(), r"[?&]hide="),
    "head-dropdown": (lambda page: pick(page, "head", "Head 5"), r"[?&]head=5(&|$)"),
    "example": (pick_example, r"trophy"),
    "lines-radio": (lambda page: page.get_by_text("Lines", exact=True).click(), r"[?&]draw=lines"),
}


@pytest.mark.parametrize("use", list(MOUSE_USES))
def test_the_keys_work_after_a_control_was_used_with_the_mouse(browser, use):
    chromium, url = browser
    page = chromium.new_page(viewport=SIZE)
    page.goto(f"{url}/?present=1&view=head&layer=2&head=3&s={quote(SENTENCE)}")
    wait_drawn(page)
    wait_idle(page)
    use_with_mouse, shown = MOUSE_USES[use]
    use_with_mouse(page)
    settle_on(page, shown)  # a key pressed while the use's run is still drawing could be lost with it
    before = head_in(page)
    page.keyboard.press("Shift+ArrowRight")
    settle_on(page, rf"[?&]head={before + 1}(&|$)")
    if use == "lines-radio":  # the key steps the head; it does not move the radio
        assert "draw=lines" in address(page)
        assert page.get_by_role("radio", name="Lines").is_checked()
    page.keyboard.press("v")
    settle_on(page, r"[?&]view=overview")
    clean(page)
    page.close()
