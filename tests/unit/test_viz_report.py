"""The HTML report: offline, plotly.js carried once and packed, user text escaped; and what Chromium shows of it."""

import base64
import gzip
import html
import re
from datetime import datetime

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

import viz

# ---- html_report -------------------------------------------------------------

XSS = "The <script>alert(1)</script> cat & dog"


def small_figures() -> list[tuple[str, go.Figure]]:
    attn = np.full((4, 4), 0.25)
    tokens = ["[CLS]", "the", "cat", "[SEP]"]
    return [
        ("Head <1>", viz.head_heatmap(attn, tokens, title="L0 H0")),
        ("Tokens", viz.token_strip(tokens, [101, 1996, 4937, 102], [0] * 4, [True, False, False, True])),
        ("Causal", viz.causal_mask_figure(4, tokens)),
    ]


def make_report(figures=None, sentence_b="It naps.") -> str:
    return viz.html_report(
        XSS,
        sentence_b,
        "MiniLM <v2>",
        small_figures() if figures is None else figures,
        generated=datetime(2025, 3, 4, 5, 6),
    )


def packed_library(page: str) -> re.Match:
    found = re.search(r'<script type="application/gzip;base64" id="plotly-gz">([A-Za-z0-9+/=]+)</script>', page)
    assert found
    return found


def test_report_loads_nothing_from_the_network():
    page = make_report()
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
    assert not re.search(r"<link[^>]*\bhref\s*=", page, re.I)
    assert not re.search(r"""src\s*=\s*["'][^"']*cdn\.plot\.ly""", page, re.I)
    library = packed_library(page)  # the library, inline, once, packed
    assert len(re.findall("plotly-gz", page)) == 2  # the packed library and the one script that unpacks it
    assert gzip.decompress(base64.b64decode(library.group(1))).decode() == get_plotlyjs()
    rest = page[: library.start()] + page[library.end() :]
    assert not re.search(r"https?://", rest)  # plotly.js mentions URLs in its own code; nothing else does


def test_the_report_carries_plotly_js_once_and_packed():
    """4.8 MB of plotly.js was most of every report: packed, a report of three small figures is under half of it,
    and each further figure adds only its own data."""
    page, more = make_report(), make_report(small_figures() * 3)
    assert len(page.encode()) < 0.5 * len(get_plotlyjs().encode())
    added = len(more.encode()) - len(page.encode())
    assert added < 2 * sum(len(f.to_json()) for _, f in small_figures()) + 6 * 2000  # six figures' data and divs


def test_report_escapes_user_text():
    page = make_report()
    assert "<script>alert(1)</script>" not in page
    assert html.escape(XSS) in page
    assert "MiniLM &lt;v2&gt;" in page and "MiniLM <v2>" not in page
    assert "Head &lt;1&gt;" in page


def test_report_header_and_one_plot_per_figure():
    page = make_report()
    assert page.count("Plotly.newPlot(") == 3
    assert "It naps." in page and "2025-03-04 05:06" in page
    assert page.index("Head &lt;1&gt;") < page.index("<figcaption>Tokens") < page.index("<figcaption>Causal")
    one = make_report(small_figures()[:1], sentence_b=None)
    assert one.count("Plotly.newPlot(") == 1 and "Sentence B" not in one


# ---- in Chromium -------------------------------------------------------------

BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    """The report opened from a file in Chromium, with every network request refused and logged."""
    from playwright.sync_api import sync_playwright

    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(make_report(), encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.external = []

        def refuse_network(route):
            if route.request.url.startswith(("file:", "data:", "blob:")):
                return route.continue_()
            page.external.append(route.request.url)
            return route.abort()

        page.route("**/*", refuse_network)
        page.dialogs = []
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        page.goto(path.as_uri())
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 3")
        yield page
        browser.close()


def hover_text(page, plot: int, x, y) -> list[str]:
    """Hover the point (x, y), in data coordinates, of the plot-th figure; the hover labels shown."""
    page.mouse.move(1, 1)
    page.wait_for_selector(".hovertext", state="detached")
    page.eval_on_selector_all(".js-plotly-plot", "(els, i) => els[i].scrollIntoView()", plot)
    px, py = page.eval_on_selector_all(
        ".js-plotly-plot",
        """(els, [i, x, y]) => {
            const gd = els[i], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const box = gd.getBoundingClientRect();
            return [box.left + xa._offset + xa.c2p(x), box.top + ya._offset + ya.c2p(y)];
        }""",
        [plot, x, y],
    )
    page.mouse.move(px, py)
    page.wait_for_timeout(100)  # plotly throttles hover events
    page.wait_for_selector(".hovertext")
    return page.eval_on_selector_all(".hovertext", "els => els.map(e => e.textContent)")


@pytest.mark.browser
def test_report_in_browser_draws_every_figure_offline(report_page):
    assert report_page.eval_on_selector_all(".js-plotly-plot", "els => els.length") == 3
    assert report_page.external == [] and report_page.dialogs == []
    assert XSS in report_page.inner_text("header")  # shown as text, never run


@pytest.mark.browser
def test_heatmap_hover_in_browser_reads_query_arrow_key_weight(report_page):
    # head_heatmap over [CLS] the cat [SEP]: row 2 ("cat"), column 1 ("the")
    assert hover_text(report_page, 0, 1, 2) == ["cat·2 → the·1: 0.250"]
    assert hover_text(report_page, 0, 3, 0) == ["[CLS]·0 → [SEP]·3: 0.250"]


@pytest.mark.browser
def test_token_strip_and_causal_hover_in_browser(report_page):
    strip = report_page.eval_on_selector_all(
        ".js-plotly-plot",
        "els => { const d = els[1]._fullData.find(t => t.name === 'piece'); return [d.x[2], d.y[2]]; }",
    )
    assert hover_text(report_page, 1, *strip) == ["position 2: cat (id 4937, segment A)"]
    assert hover_text(report_page, 2, 1, 2) == ["cat·2 → the·1: may attend"]
    assert hover_text(report_page, 2, 2, 1) == ["the·1 → cat·2: masked (future)"]
