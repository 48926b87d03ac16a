"""In Chromium: a long text (a tiny Llama's 4 heads at about 2,600 tokens: one layer's maps past the 96 MB bound)
opens in the Head view as a block map and an exact tile, both on the first screen at 1280 × 800, and a click on
the block map opens the tile there."""

from __future__ import annotations

import os
import re
import urllib.parse

import pytest
from browser import CHROMIUM, served_chromium
from families import make_family
from test_browser_state import clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
WORDS = "the cat sat on the mat because it was tired and she read the book .".split()
TEXT = " ".join(WORDS[i % len(WORDS)] for i in range(1300))
BLOCKS = '[data-testid="stPlotlyChart"]:has-text("block means")'


def tile_title(page) -> str:
    return page.locator('[data-testid="stPlotlyChart"]', has_text="Queries").first.inner_text()


def test_a_long_texts_block_map_and_tile_fit_the_first_screen_and_a_click_opens_a_tile(tmp_path):
    folder = make_family(tmp_path / "llama", "llama", max_position_embeddings=4096)
    with served_chromium() as (browser, url):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url + "/?" + urllib.parse.urlencode({"model": str(folder), "s": TEXT, "layer": 1, "head": 2}))
        wait_drawn(page)
        clean(page)
        n_tokens = int(re.search(r"([\d,]+) tokens: each", page.inner_text("body")).group(1).replace(",", ""))
        assert n_tokens > 2508  # 4 heads · L² · 4 bytes past 96 MiB: a long run
        for chart in (BLOCKS, '[data-testid="stPlotlyChart"]:has-text("Queries 0–15 × keys 0–15")'):
            box = page.locator(chart).first.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 800, (chart, box)
        cells = page.locator(f"{BLOCKS} .nsewdrag").first.bounding_box()
        page.mouse.click(cells["x"] + cells["width"] * 0.3, cells["y"] + cells["height"] * 0.7)
        page.wait_for_function(
            """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
            .some(c => c.innerText.includes('Queries') && !c.innerText.includes('Queries 0–15'))""",
            timeout=60_000,
        )
        wait_drawn(page)
        clean(page)
        found = re.search(r"Queries (\d+)–\d+ × keys (\d+)", tile_title(page))
        assert found, tile_title(page)
        first_query, first_key = map(int, found.groups())
        # the click's block, at 70 % down and 30 % across the map, centred in a 16-token tile
        assert abs(first_query - 0.7 * n_tokens) < 0.05 * n_tokens and abs(first_key - 0.3 * n_tokens) < 0.05 * n_tokens


def test_a_txt_file_chosen_in_the_sidebar_runs_as_a_long_text(tmp_path):
    folder = make_family(tmp_path / "llama", "llama", max_position_embeddings=4096)
    (tmp_path / "story.txt").write_text(TEXT + "\n", encoding="utf-8")
    with served_chromium() as (browser, url):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url + "/?" + urllib.parse.urlencode({"model": str(folder), "layer": 1, "head": 2}))
        wait_drawn(page)
        page.locator('[data-testid="stSidebar"] input[type="file"]').set_input_files(str(tmp_path / "story.txt"))
        page.wait_for_function(
            "() => document.body.innerText.includes('“story.txt”:')", timeout=120_000
        )  # the notice, on the run that read it
        wait_drawn(page)
        clean(page)
        assert "run as the sentence" in page.inner_text("body")
        assert page.locator(BLOCKS).count() == 1  # past one layer's bound: the long run's block map
        assert page.locator("textarea").first.input_value().startswith("the cat sat on the mat")
