"""In Chromium: the Shape flow view's diagram lies wholly on a 1280 × 720 presentation screen with box text of
18 px or more, its stages and heads step on keys; at 1280 × 800 the diagram and the head's map share a screen;
a click on a box shows its tensor beside the diagram; every stage of BERT's, GPT-2's and a Llama-style
diagram is whole on the presentation screen."""

from __future__ import annotations

import os
import re
import time
from urllib.parse import quote

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_state import clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The animal didn't cross the street because it was too tired."  # 16 tokens
DIAGRAM, MAP = ".st-key-shapeflow_chart", ".st-key-shapeflow_map"
PLACE = """(selector) => {
    const el = document.querySelector(selector + ' [data-testid="stPlotlyChart"]');
    if (!el) return null;
    const r = el.getBoundingClientRect();
    const seen = Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0));
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, seen: seen / r.height};
}"""
BOX_FONTS = """() => [...document.querySelectorAll('.st-key-shapeflow_chart .annotation-text')]
    .filter(t => t.textContent.trim()).map(t => parseFloat(getComputedStyle(t).fontSize))"""
LEGEND = """() => [...document.querySelectorAll('.st-key-shapeflow_chart .annotation-text')]
    .map(t => t.textContent).find(t => t.startsWith('layer')) || ''"""


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        yield chromium, url


def opened(browser, size: tuple[int, int], query: str):
    chromium, url = browser
    page = chromium.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(f"{url}/?{query}view=shapeflow&layer=2&head=3&s={quote(SENTENCE)}")
    wait_drawn(page)
    clean(page)
    page.wait_for_selector(f"{DIAGRAM} .annotation-text", timeout=60_000)
    page.wait_for_selector(f"{MAP} .xtick text", timeout=60_000)
    return page


def until(page, check, what: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not check() and time.time() < deadline:
        time.sleep(0.2)
    assert check(), what


def test_the_presentation_shows_the_whole_diagram_and_keys_step_its_stages_and_head(browser):
    page = opened(browser, (1280, 720), "present=1&")
    assert page.evaluate("window.scrollY") == 0
    box = page.evaluate(PLACE, DIAGRAM)
    assert box["top"] >= 0 and box["bottom"] <= 720 and box["left"] >= 0 and box["right"] <= 1280, box
    assert min(page.evaluate(BOX_FONTS)) >= 18
    legend = page.evaluate(LEGEND)
    assert "head 3" in legend and (stage := re.search(r"stage (\d) of (\d)", legend)), legend
    assert stage.group(1) == "1"  # it opens on the first stage
    assert page.locator(".st-key-shapeflow_prev_stage button").is_disabled()  # ← stops there: no wrap
    page.keyboard.press("ArrowRight")
    until(page, lambda: "stage 2 of" in page.evaluate(LEGEND), "the stage did not step")
    until(page, lambda: "stage=2" in page.evaluate("location.href"), "the link does not keep the stage")
    box = page.evaluate(PLACE, DIAGRAM)
    assert box["top"] >= 0 and box["bottom"] <= 720, box  # each stage whole on the screen
    assert "← / → stage" in page.inner_text(".present-keys")  # the key table names them
    page.locator(".st-key-shapeflow_padded input").focus()  # where Streamlit's own shortcuts are not heard
    page.keyboard.press("ArrowLeft")
    until(page, lambda: "stage 1 of" in page.evaluate(LEGEND), "the stage did not step from a checkbox")
    assert not page.locator(".st-key-shapeflow_padded input").is_checked()
    page.keyboard.press("Shift+ArrowRight")
    until(page, lambda: "head 4" in page.evaluate(LEGEND), "the head key did not move the diagram's head")
    clean(page)
    page.close()


def test_the_diagram_and_the_heads_map_share_an_ordinary_screen_and_a_click_shows_a_tensor(browser):
    page = opened(browser, (1280, 800), "")
    page.evaluate(f"document.querySelector('{DIAGRAM}').scrollIntoView({{block: 'start'}})")
    time.sleep(0.5)
    diagram, head_map = page.evaluate(PLACE, DIAGRAM), page.evaluate(PLACE, MAP)
    assert diagram["seen"] >= 0.5 and head_map["seen"] >= 0.5, (diagram, head_map)
    assert head_map["left"] >= diagram["right"] - 1  # beside it
    assert min(page.evaluate(BOX_FONTS)) >= 14
    title = page.locator(f"{DIAGRAM} .annotation-text", has_text="probs · V").first
    for _ in range(6):  # it opens on the first stage: step on to the one that holds probs · V
        if title.count():
            break
        page.locator(".st-key-shapeflow_next_stage button").click()
        wait_drawn(page)
    title.wait_for(timeout=60_000)
    spot = title.bounding_box()
    assert spot is not None
    page.mouse.click(spot["x"] + spot["width"] / 2, spot["y"] + spot["height"] / 2)  # on the box's invisible bar
    tensor = page.locator('[data-testid="stPlotlyChart"]', has_text="probs · V, head 3")
    tensor.wait_for(timeout=60_000)
    wait_drawn(page)
    r = tensor.bounding_box()
    assert r is not None and 0 <= r["y"] and r["y"] + r["height"] / 2 <= 800, r  # on screen, not below
    assert r["x"] >= page.evaluate(PLACE, DIAGRAM)["right"] - 1  # beside the diagram
    assert "step=heads" in page.evaluate("location.href")
    clean(page)
    page.close()


# the box outlined in the highlight colour (crimson), as the text written in it
HIGHLIGHTED = """() => {
    const chart = document.querySelector('.st-key-shapeflow_chart');
    const boxes = [...chart.querySelectorAll('.shapelayer path')]
        .filter(p => getComputedStyle(p).stroke === 'rgb(220, 20, 60)').map(p => p.getBoundingClientRect());
    return [...chart.querySelectorAll('.annotation-text')].filter(t => {
        const r = t.getBoundingClientRect(), x = r.left + r.width / 2, y = r.top + r.height / 2;
        return boxes.some(b => b.left <= x && x <= b.right && b.top <= y && y <= b.bottom);
    }).map(t => t.textContent);
}"""


def test_a_click_on_the_heads_map_beside_the_diagram_selects_the_softmax(browser):
    page = opened(browser, (1280, 800), "step=heads&")
    assert any(t.startswith("probs · V") for t in page.evaluate(HIGHLIGHTED))
    assert page.locator('[data-testid="stPlotlyChart"]', has_text="probs · V, head 3").count() == 1
    page.evaluate(f"document.querySelector('{MAP}').scrollIntoView({{block: 'center'}})")
    time.sleep(0.5)
    cells = page.locator(f"{MAP} .nsewdrag").first.bounding_box()
    assert cells is not None
    page.mouse.click(cells["x"] + cells["width"] * 0.3, cells["y"] + cells["height"] * 0.6)  # on a cell
    # the softmax is the view's first step, which the link leaves out
    until(page, lambda: "step=" not in page.evaluate("location.href"), "the map's click did not select its step")
    wait_drawn(page)
    page.wait_for_selector(f"{DIAGRAM} .annotation-text", timeout=60_000)
    assert [t for t in page.evaluate(HIGHLIGHTED) if t.strip()][0].startswith("softmax")
    assert page.locator('[data-testid="stPlotlyChart"]', has_text="probs · V, head 3").count() == 0
    head_map = page.evaluate(PLACE, MAP)  # the softmax's tensor is the map itself, shown once, beside the diagram
    assert head_map["left"] >= page.evaluate(PLACE, DIAGRAM)["right"] - 1 and head_map["seen"] >= 0.5, head_map
    assert "Layer 2, head 3: softmax" in page.inner_text(MAP)
    clean(page)
    page.close()


@pytest.mark.parametrize("step, title", [("q_proj", "Q projection, head 3"), ("heads", "probs · V, head 3")])
def test_a_selected_tensor_and_the_heads_map_are_both_on_the_first_ordinary_screen(browser, step, title):
    """At 1280 × 800 the tensor of a step other than the softmax and the head's map lie wholly on the first
    screen beside the diagram, whose current stage ends on it too."""
    page = opened(browser, (1280, 800), f"step={step}&")
    tensor = page.locator('[data-testid="stPlotlyChart"]', has_text=title)  # the Q box's tensor, or probs · V's
    tensor.wait_for(timeout=60_000)
    assert page.evaluate("window.scrollY") == 0
    diagram, head_map = page.evaluate(PLACE, DIAGRAM), page.evaluate(PLACE, MAP)
    r = tensor.bounding_box()
    assert r is not None and r["y"] >= 0 and r["y"] + r["height"] <= 800, r  # wholly on the screen
    assert head_map["top"] >= r["y"] + r["height"] - 1 and head_map["bottom"] <= 800, (r, head_map)
    assert r["x"] >= diagram["right"] - 1 and head_map["left"] >= diagram["right"] - 1  # beside the diagram
    assert diagram["top"] >= 0 and diagram["bottom"] <= 800, diagram  # the diagram's stage too
    clean(page)
    page.close()


MAP_LABELS = """() => [...document.querySelectorAll('.st-key-shapeflow_map :is(.xtick, .ytick) text')]
    .map(t => parseFloat(getComputedStyle(t).fontSize))"""


def test_the_heads_map_beside_the_diagram_labels_every_token_at_1280(browser):
    page = opened(browser, (1280, 800), "")
    sizes = page.evaluate(MAP_LABELS)
    assert len(sizes) == 2 * 16 and min(sizes) >= 12, sizes  # each of the 16 tokens, both axes
    head_map = page.evaluate(PLACE, MAP)
    assert head_map["seen"] == 1 and head_map["left"] >= page.evaluate(PLACE, DIAGRAM)["right"] - 1, head_map
    clean(page)
    page.close()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from families import make_family

    return {"bert": ""} | {
        family: str(make_family(tmp_path_factory.mktemp(family), family)) for family in ("gpt2", "llama")
    }


@pytest.mark.parametrize("model", ["bert", "gpt2", "llama"])
def test_every_stage_of_each_familys_diagram_is_whole_on_the_presentation_screen(browser, folders, model):
    chromium, url = browser
    page = chromium.new_page(viewport={"width": 1280, "height": 720})
    source = f"&model={quote(folders[model])}" if folders[model] else ""
    page.goto(f"{url}/?present=1&view=shapeflow&layer=1&head=1{source}&s={quote(SENTENCE)}")
    wait_drawn(page)
    clean(page)
    page.wait_for_selector(f"{DIAGRAM} .annotation-text", timeout=60_000)
    stage = re.search(r"stage (\d) of (\d)", page.evaluate(LEGEND))
    assert stage, page.evaluate(LEGEND)
    seen, texts = set(), []
    for _ in range(int(stage.group(2))):
        legend = page.evaluate(LEGEND)
        now = re.search(r"stage (\d) of", legend)
        assert now, legend
        seen.add(now.group(1))
        texts.append(page.inner_text(DIAGRAM))
        box = page.evaluate(PLACE, DIAGRAM)
        assert box["top"] >= 0 and box["bottom"] <= 720 and box["left"] >= 0 and box["right"] <= 1280, (model, box)
        assert min(page.evaluate(BOX_FONTS)) >= 18
        assert page.evaluate("window.scrollY") == 0
        following = int(now.group(1)) + 1
        if following <= int(stage.group(2)):  # the last stage is the last: → does not wrap to the first
            page.keyboard.press("ArrowRight")
            until(page, lambda n=following: f"stage {n} of" in page.evaluate(LEGEND), f"{model}: did not step")
    assert len(seen) == int(stage.group(2))  # every stage was shown and checked
    steps = " ".join(texts)  # the family's own steps were among them
    assert ("fused QKV" in steps) == (model == "gpt2"), steps
    assert ("rotated by" in steps) == ("K/V heads" in steps) == (model == "llama"), steps
    page.close()
