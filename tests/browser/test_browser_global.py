"""In Chromium (software WebGL: it runs with --disable-gpu): the Global Q·K view draws a folder's points with
Scattergl, and a click on a point opens that point's sentence in the head view at its layer and head, the clicked
token's row and column outlined."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, quote, urlparse

import pytest
from browser import CHROMIUM, served_chromium
from test_browser_state import clean, wait_drawn

from attention.analysis.qk_global import main, read_folder

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
GAP = "data/gap-development.jsonl"
CHART = ".st-key-gqk_chart .js-plotly-plot"
# the point farthest from every other point of the chart's traces (a click there can hit no other), in page
# coordinates, with its customdata [text, position, layer, head]
LONELY_POINT = """(selector) => {
    const el = document.querySelector(selector);
    const r = el.getBoundingClientRect(), xa = el._fullLayout.xaxis, ya = el._fullLayout.yaxis;
    const points = [];
    el._fullData.forEach(t => t.x.forEach((x, i) => points.push({
        x: r.left + xa._offset + xa.l2p(xa.d2l(x)), y: r.top + ya._offset + ya.l2p(ya.d2l(t.y[i])),
        data: Array.from(t.customdata[i]), type: t.type})));
    let best = null, far = -1;
    for (const p of points) {
        let near = Infinity;
        for (const q of points) if (q !== p) near = Math.min(near, Math.hypot(p.x - q.x, p.y - q.y));
        if (near > far) { far = near; best = p; }
    }
    return {...best, apart: far, on_chart: el.contains(document.elementFromPoint(best.x, best.y))};
}"""

# the head map's outlines as plotly drew them: a drawn shape's name and the row (query) or column (key) it spans
MARKED = """() => {
    const found = {};
    document.querySelectorAll('.js-plotly-plot').forEach(el => (el._fullLayout.shapes || []).forEach(s => {
        if (el.querySelector('.shapelayer path') && s.name)
            found[s.name] = s.name === 'marked query' ? [s.y0, s.y1] : [s.x0, s.x1];
    }));
    return found;
}"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("points")
    assert main([GAP, "--layer", "1", "--head", "4", "--out", str(out), "--tokens", "300", "--method", "pca"]) == 0
    return out


def test_a_click_on_a_point_opens_its_sentence_in_the_head_view(folder):
    _, texts = read_folder(folder)
    with served_chromium() as (chromium, url):
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}/?view=global&layer=1&head=4&corpus=folder&folder={quote(str(folder))}")
        wait_drawn(page)
        clean(page)
        page.wait_for_selector(CHART, timeout=60_000)
        page.locator(CHART).scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        point = page.evaluate(LONELY_POINT, CHART)
        assert point["type"] == "scattergl" and point["on_chart"] and point["apart"] > 4, point
        text, position, layer, head = point["data"]
        page.mouse.click(point["x"], point["y"])
        page.wait_for_function("() => document.body.innerText.includes('Layer 1, head 4')", timeout=60_000)
        wait_drawn(page)
        clean(page)
        query = parse_qs(urlparse(page.url).query)
        assert (layer, head) == (1, 4)
        assert query["view"] == ["head"] and query["layer"] == ["1"] and query["head"] == ["4"]
        assert query["s"] == [texts[text]]
        assert page.locator('[data-testid="stTextArea"] textarea').first.input_value() == texts[text]
        assert query["mark"] == [str(position)]
        # the clicked token's row and column outlined on the head map, as drawn
        outlined = page.evaluate(MARKED)
        assert outlined == {
            "marked query": [position - 0.5, position + 0.5],
            "marked key": [position - 0.5, position + 0.5],
        }
