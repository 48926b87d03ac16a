"""In Chromium at 1280 × 720 with ?present=1, on each bundled model: every view the registry offers it, the Lines
drawing and every step of the guided walk: the view's main (first) figure lies whole on the first screen, and every
figure's title is drawn as the figure sets it (each line whole, none cut short) inside its chart."""

from __future__ import annotations

import html
import os
import re

import pytest
from browser import CHROMIUM, served_chromium
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser_state import SIZE, clean, wait_drawn

from ui.page.registry import VIEWS

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
WALK_STEPS = {"bert": 11, "smollm2": 12}  # the bundled models' walks: MiniLM has no shared K/V, SmolLM2 has
MODELS = {"bert": ("", {"encoder"}), "smollm2": ("smollm2", {"causal"})}  # link value, kinds (the registry's)


def cases(kinds) -> set[str]:
    """The views V offers a model of these `kinds`, but the walk (its steps instead) and the global view (no figure
    until asked); a view for other models (an encoder-decoder's cross-attention: tests/browser/test_browser_cross.py;
    DeBERTa's terms) is not offered; then the Lines drawing."""
    return {v.key for v in VIEWS if v.applies(kinds) and v.key not in ("walk", "global")} | {"lines"}


FIGURES = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map(chart => {
    const box = (el) => { const b = el.getBoundingClientRect();
                          return {top: b.top, bottom: b.bottom, left: b.left, right: b.right}; };
    const plot = chart.querySelector('.js-plotly-plot');
    const svg = chart.querySelector('.main-svg');
    const title = chart.querySelector('.gtitle');
    const lines = title && [...title.querySelectorAll('tspan.line')].map(t => t.textContent);
    const set = plot && plot.layout && plot.layout.title;
    return {box: box(chart), svg: svg && box(svg), title: title && box(title),
            drawn: title && (lines.length ? lines : [title.textContent]),
            text: (set && (typeof set === 'string' ? set : set.text)) || null};
})"""


@pytest.fixture(scope="module")
def browser():
    with served_chromium() as (chromium, url):
        yield chromium, url


def title_lines(markup: str) -> list[str]:
    """The lines a plotly title shows: split at <br>, tags dropped, entities read."""
    return [html.unescape(re.sub(r"<[^>]+>", "", line)).strip() for line in re.split(r"<br\s*/?>", markup)]


@pytest.mark.parametrize("model", list(MODELS))
def test_the_main_figure_is_on_the_first_screen_and_every_title_is_whole(browser, model):
    """Every view in turn from V, every step of the walk from Right (a click reruns the page in its session:
    about 1 s a case, where a link per case took 3-10 s), and the Lines drawing from its link, on each bundled
    model: MiniLM's 6 × 12 heads and SmolLM2's 30 × 9."""
    chromium, url = browser
    source, kinds = MODELS[model]
    link = f"{url}/?present=1&layer=2&head=3" + (f"&model={source}" if source else "")
    page = chromium.new_page(viewport=SIZE)
    page.goto(f"{link}&view=head")
    checked = []
    while True:
        view = url_param(page, "view")
        if view == "walk":
            for step in range(WALK_STEPS[model]):
                if step:
                    page.keyboard.press("ArrowRight")
                    wait_param(page, "walk", str(step))
                check_fit(page, f"walk-{step + 1}")
            assert page.locator(".st-key-walk_next button").is_disabled()  # the last step
        elif view != "global":
            check_fit(page, view)
            checked.append(view)
        page.keyboard.press("v")
        wait_param(page, "view", None, other_than=view, what=f"V to leave {view} (after {checked})")
        if url_param(page, "view") == "head":
            break
    page.goto(f"{link}&view=head&draw=lines")
    check_fit(page, "lines")
    assert sorted(checked + ["lines"]) == sorted(cases(kinds))  # every view offered, once each
    page.close()


def url_param(page, name: str) -> str | None:
    return page.evaluate("(name) => new URLSearchParams(location.search).get(name)", name)


def wait_param(page, name: str, value: str | None, other_than: str | None = None, what: str = "") -> None:
    """Until the page's address has `name` at `value` (or at anything but `other_than`); `what` was waited for."""
    try:
        page.wait_for_function(
            """([name, value, other]) => { const got = new URLSearchParams(location.search).get(name);
                return value !== null ? got === value : got !== other; }""",
            arg=[name, value, other_than],
            timeout=180_000,  # the address changes as the run ends: SmolLM2's what-if regrouping runs 30 layers again
        )
    except PlaywrightTimeout:
        pytest.fail(f"waited 180 s for {what or f'{name}={value}'}: {page.evaluate('location.href')}")


def check_fit(page, case: str) -> None:
    """The case's main figure whole on the first screen, every figure's title drawn whole inside its chart."""
    wait_drawn(page)
    clean(page)
    # a chart's code comes as a chunk of its own and can arrive after the run has ended
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=60_000)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.js-plotly-plot')].every(p =>
        !(p.layout && p.layout.title && p.layout.title.text) || p.querySelector('.gtitle'))""",
        timeout=60_000,
    )
    assert page.evaluate("window.scrollY") == 0
    figures = page.evaluate(FIGURES)
    main = figures[0]["box"]
    assert main["top"] >= 0 and main["bottom"] <= SIZE["height"], (case, main)
    for fig in figures:
        if not fig["text"]:
            continue
        assert [line.strip() for line in fig["drawn"]] == title_lines(fig["text"]), (case, fig)
        title, svg = fig["title"], fig["svg"]
        assert title["top"] >= svg["top"] and title["bottom"] <= svg["bottom"], (case, fig)
        assert title["left"] >= svg["left"] and title["right"] <= svg["right"] + 1, (case, fig)
