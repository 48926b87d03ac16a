"""In Debian's Chromium: an upload with bad lines lists them and scores its good lines from the button; a suite
being scored says the time left and no longer shows the previous suite's results under its bar."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from browser import CHROMIUM, served_chromium, wait_settled
from test_browser import SUITE_UPLOAD, fresh, pick

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not __import__("os").path.exists(CHROMIUM),
    reason="Debian's chromium is not installed (apt-get install -y chromium)",
)

GOOD = {
    "text": "The cat chased the dog because it was angry.",
    "pronoun": "it",
    "candidates": ["cat", "dog"],
    "answer": "cat",
}


@pytest.fixture(scope="module")
def page():
    with served_chromium() as (browser, url):
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.app_url = url
        yield page


def body_has(page, text: str, timeout: float = 60_000) -> None:
    page.wait_for_function("(t) => document.body.innerText.includes(t)", arg=text, timeout=timeout)


def test_bad_lines_are_listed_and_the_good_ones_scored_from_the_button(page, tmp_path):
    fresh(page, "?view=coref&coref=suite")
    body_has(page, "examples from the built-in suite", 120_000)
    pick(page, "Examples to score", "Upload")
    file = tmp_path / "half.jsonl"
    file.write_text("\n".join([json.dumps(GOOD), "{oops", json.dumps({**GOOD, "answer": "cow"}), json.dumps(GOOD)]))
    page.locator(SUITE_UPLOAD).set_input_files(str(file))
    body_has(page, "half.jsonl has 2 bad lines:")
    text = page.inner_text("body")
    assert "line 2: not valid JSON" in text and "line 3: answer 'cow' is not one of the candidates" in text
    page.get_by_role("button", name="Score the 2 valid examples").click()
    body_has(page, "2 examples from half.jsonl")
    wait_settled(page)
    assert "bad lines" not in page.inner_text("body")
    assert page.get_by_text("half.jsonl", exact=True).count() >= 1  # the file box still names the file
    assert page.locator('[data-testid="stException"]').count() == 0


def test_a_suite_being_scored_says_the_time_left_and_hides_the_previous_results(page):
    fresh(page, "?view=coref&coref=suite")
    body_has(page, "examples from the built-in suite", 120_000)
    pick_now(page, "Examples to score", "GAP development")
    page.wait_for_function(
        "() => /Scoring this model: [0-9]+ of 2000 examples, about .+ left/.test(document.body.innerText)",
        timeout=120_000,
    )
    text = page.inner_text("body")
    assert "examples from the built-in suite" not in text and "Best head" not in text
    assert re.search(r"about (\d+ s|\d+ min( \d+ s)?) left", text)
    page.get_by_role("button", name="Stop scoring").click()
    body_has(page, "was stopped")
    assert page.locator('[data-testid="stException"]').count() == 0


def pick_now(page, label: str, option: str) -> None:
    """pick() without waiting for the run to end."""
    page.locator('[data-testid="stSelectbox"]').filter(has_text=label).locator("input").first.click()
    page.keyboard.type(option)
    page.get_by_role("option", name=option, exact=True).click()
