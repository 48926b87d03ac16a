"""In Chromium at 1280 × 800 and at 1280 × 720 in presentation mode: the Coreference view's table of ranked
heads shows all its columns, none cut at the right (it lies under the grid, at the page's width), and so do the
Suite mode's tables, its list of each example for one head among them."""

from __future__ import annotations

import os

import pytest
from browser import CHROMIUM, served_chromium, wait_settled

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)

TABLES = """() => [...document.querySelectorAll('[data-testid=stDataFrame]')].map(table => {
    const scroller = table.querySelector('.dvn-scroller');
    return {content: scroller.scrollWidth, shown: scroller.clientWidth};
})"""


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        chromium.app_url = url
        yield chromium


@pytest.mark.parametrize("height, query", [(800, ""), (720, "&present=1")], ids=["page", "present"])
def test_the_ranked_heads_table_is_not_cut(browser, height, query):
    page = browser.new_page(viewport={"width": 1280, "height": height})
    try:
        page.goto(browser.app_url + "/?view=coref" + query)
        page.wait_for_selector('[data-testid="stDataFrame"] .dvn-scroller', timeout=120_000)
        wait_settled(page, 120)
        page.wait_for_timeout(1000)
        [table] = page.evaluate(TABLES)
        assert table["content"] <= table["shown"], table
    finally:
        page.close()


@pytest.mark.parametrize("height, query", [(800, ""), (720, "&present=1")], ids=["page", "present"])
def test_the_suites_tables_are_not_cut(browser, height, query):
    page = browser.new_page(viewport={"width": 1280, "height": height})
    try:
        page.goto(browser.app_url + "/?view=coref&coref=suite" + query)
        page.wait_for_function(
            "document.querySelectorAll('[data-testid=stDataFrame] .dvn-scroller').length >= 2", timeout=120_000
        )
        wait_settled(page, 120)
        page.wait_for_timeout(1000)
        tables = page.evaluate(TABLES)
        assert len(tables) >= 2 and all(t["content"] <= t["shown"] for t in tables), tables
    finally:
        page.close()
