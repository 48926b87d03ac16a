"""viz.html_report's tables, lines of text and link: what a page shows besides its figures, escaped."""

from __future__ import annotations

import html
import re
from datetime import datetime

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import viz

XSS = "<img src=x onerror=alert(1)>"


def report(parts, link=None) -> str:
    return viz.html_report("A <b>cat</b>.", None, "model", parts, generated=datetime(2025, 1, 2, 3, 4), link=link)


def main_of(page: str) -> str:
    return page[page.index("<main>") : page.index("</main>")]


def test_a_table_is_an_html_table_with_every_cell_escaped():
    frame = pd.DataFrame(
        {
            "head": ["L0 H1", XSS],
            f"to {XSS}": [0.123456, np.float32(0.5)],
            "n": [np.int64(3), 4],
            "right": [True, np.bool_(False)],
            "gap": [float("nan"), 1e-7],
        }
    )
    page = report([("Heads <ranked>", frame)])
    body = main_of(page)
    assert XSS not in page and "<img" not in body
    assert "<figcaption>Heads &lt;ranked&gt;</figcaption>" in body
    assert re.findall(r"<th>(.*?)</th>", body) == ["head", f"to {html.escape(XSS)}", "n", "right", "gap"]
    rows = re.findall(r"<tr>(.*?)</tr>", body)[1:]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert cells == [["L0 H1", "0.1235", "3", "yes", "—"], [html.escape(XSS), "0.5", "4", "no", "1e-07"]]
    assert body.count('class="num"') == 6  # numbers to the right; text, yes/no and the empty cell not


def test_parts_keep_the_page_order_and_text_is_a_paragraph():
    fig = go.Figure(go.Bar(y=[1, 2]))
    page = report([("first", fig), ("", f"Step 7 of 11 & {XSS}"), ("table", pd.DataFrame({"a": [1]}))])
    body = main_of(page)
    assert body.index("Plotly.newPlot(") < body.index('<p class="note">') < body.index("<table>")
    assert f'<p class="note">Step 7 of 11 &amp; {html.escape(XSS)}</p>' in body
    with pytest.raises(TypeError, match="not list"):
        report([("rows", [1, 2])])


def test_the_link_is_in_the_header_and_only_a_web_address_is_a_link():
    address = "http://localhost:8501/?view=stats&layer=3&s=a+%3Cb%3E"
    page = report([], link=address)
    escaped = html.escape(address)
    assert f'<dt>Link</dt><dd><a href="{escaped}">{escaped}</a></dd>' in page
    page = report([], link='javascript:alert("x")')
    assert "<dt>Link</dt><dd>javascript:alert(&quot;x&quot;)</dd>" in page
    assert "<a " not in page[page.index("<header>") : page.index("</header>")]
    assert "<dt>Link</dt>" not in report([])
