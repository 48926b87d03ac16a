"""In Chromium at 1280 × 720 with ?present=1, a tiny BART's Cross-attention view: the head's map (decoder tokens
over encoder tokens) is the first figure and lies whole on the first screen."""

from __future__ import annotations

import os
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from families import make_seq2seq
from test_browser_fit import FIGURES
from test_browser_state import SIZE, clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The animal didn't cross the street because it was too tired."


def test_the_cross_attention_map_is_whole_on_the_first_screen(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    with served_chromium() as (chromium, url):
        page = chromium.new_page(viewport=SIZE)
        page.goto(f"{url}/?present=1&view=cross&layer=1&head=1&model={quote(str(folder))}&s={quote(SENTENCE)}")
        wait_drawn(page)
        clean(page)
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=60_000)
        assert page.evaluate("window.scrollY") == 0
        main = page.evaluate(FIGURES)[0]
        assert "Cross-attention" in (main["text"] or ""), main
        assert main["box"]["top"] >= 0 and main["box"]["bottom"] <= SIZE["height"], main["box"]
        assert main["box"]["right"] <= SIZE["width"], main["box"]
