"""In Chromium at 1280 × 720, a tiny Llama-shaped checkpoint of 32 layers × 32 heads (8 K/V heads): the
overview fits the page with its head labels thinned rather than piled, the Layer and Head pickers reach
layer 31 and head 31 and write them to the URL, and the GQA view draws the model's own grouping."""

from __future__ import annotations

import os
import urllib.parse

import pytest
from browser import CHROMIUM, served_chromium, wait_settled
from families import make_family
from test_browser_layout import FIGURES, overlap
from test_browser_state import SIZE, clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The cat sat on the mat."
WIDE = dict(num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=64, intermediate_size=64)


@pytest.fixture(scope="module")
def wide_page(tmp_path_factory):
    folder = make_family(tmp_path_factory.mktemp("wide") / "llama", "llama", **WIDE)
    with served_chromium() as (browser, url):
        page = browser.new_page(viewport=SIZE)
        page.open_view = lambda view, **more: open_view(page, url, folder, view, **more)
        yield page


def open_view(page, url: str, folder, view: str, **more) -> None:
    query = {"model": str(folder), "s": SENTENCE, "view": view, "layer": "0", "head": "0", **more}
    page.goto(url + "/?" + urllib.parse.urlencode(query))
    wait_drawn(page)
    clean(page)


def figures_fit(page) -> list[dict]:
    """Every figure within the main column, no two tick labels overlapping; the figures."""
    main = page.evaluate(
        "() => document.querySelector('[data-testid=stMainBlockContainer]').getBoundingClientRect().right"
    )
    assert page.evaluate("() => document.documentElement.scrollWidth") <= SIZE["width"]
    figures = page.evaluate(FIGURES)
    for fig in figures:
        assert fig["right"] <= main + 1, f"{fig['title']!r} runs past the right edge"
        for labels in fig["ticks"]:
            for a, b in zip(labels, labels[1:]):
                assert not overlap(a["corners"], b["corners"]), f"{fig['title']!r}: {a['text']!r}, {b['text']!r}"
    return figures


def pick(page, label: str, value: str) -> None:
    """Choose `value` in the select box labelled `label` by typing it, as a person would with 32 options."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first
    right = box.bounding_box()
    assert right["x"] + right["width"] <= SIZE["width"], f"the {label} picker runs past the window"
    box.locator("input").click()
    page.keyboard.type(value)
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    wait_settled(page)


def test_overview_of_32_by_32_heads_fits_and_the_pickers_reach_the_last(wide_page):
    page = wide_page
    page.open_view("overview")
    figures = figures_fit(page)
    overview = next(f for f in figures if f["ticks"] and f["ticks"][0] and f["ticks"][0][0]["text"] == "H0")
    heads = [t["text"] for t in overview["ticks"][0]]
    layers = [t["text"] for t in overview["ticks"][1]]
    assert 8 <= len(heads) < 32 and heads[-1] != "H0"  # thinned, not piled, yet spread across
    assert layers[0] == "L0" and len(layers) >= 8
    pick(page, "Layer", "31")
    page.wait_for_function("() => location.search.includes('layer=31')", timeout=60_000)
    pick(page, "Head", "31")
    page.wait_for_function("() => location.search.includes('head=31')", timeout=60_000)
    clean(page)
    figures_fit(page)


def test_gqa_view_draws_the_models_own_grouping(wide_page):
    page = wide_page
    page.open_view("efficient", layer="31")
    # the script has ended, but a busy browser may still be drawing the charts it sent
    page.wait_for_function(
        "() => [...document.querySelectorAll('.gtitle')].some(t => t.textContent.startsWith('Layer 31: how far'))",
        timeout=120_000,
    )
    figures = figures_fit(page)
    titles = [f["title"] for f in figures]
    assert any(t.startswith("Layer 31: query heads by the key/value head they share") for t in titles), titles
    assert any(t.startswith("Layer 31: how far apart every two heads") for t in titles), titles
    assert "own grouping" in page.inner_text("body")
