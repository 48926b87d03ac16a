"""One standalone HTML page of what a view shows: its figures, tables and text, readable offline.

plotly.js is written once, inline and gzipped (1.9 MB in base64 rather than 4.8 MB); each figure is a div
and one ``Plotly.newPlot`` call, each table an HTML table. The figures' calls wait in a queue until the
browser has unpacked plotly.js (DecompressionStream: browsers from 2023 on; an older one says so on the
page). Nothing is fetched from the network, and the user's text (sentences, model name, captions, table
cells, the page's link) is escaped.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import urlsplit

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

if TYPE_CHECKING:  # a table is a DataFrame: pandas is imported by whatever made one
    import pandas as pd

Part: TypeAlias = "go.Figure | pd.DataFrame | str"  # a figure, a table, or a line of text

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #1a1a1a; margin: 2rem auto; max-width: 1400px; padding: 0 1rem; }
header { border-bottom: 1px solid #ddd; margin-bottom: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 0.8rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.3rem 1rem; margin: 0 0 1rem; }
dt { color: #666; }
dd { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
figure { margin: 0 0 2.5rem; overflow-x: auto; }
figcaption { font-weight: 600; font-size: 1.1rem; margin-bottom: 0.5rem; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { padding: 0.2rem 0.7rem; border-bottom: 1px solid #e4e4e4; text-align: left; white-space: nowrap; }
th { border-bottom: 1px solid #999; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note { color: #444; max-width: 60rem; }
"""
# before the figures: Plotly.newPlot queues each figure's call until plotly.js is unpacked
QUEUE = """window.Plotly = {queued: [], newPlot(...args) {
  return new Promise((done) => this.queued.push([args, done]));
}};"""
# after them: unpack plotly.js (it sets window.Plotly), then draw the queued figures
UNPACK = """(async () => {
  const queued = window.Plotly.queued;
  if (typeof DecompressionStream === "undefined") {
    document.getElementById("unpack-note").hidden = false;
    return;
  }
  const packed = document.getElementById("plotly-gz").textContent.trim();
  const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const library = document.createElement("script");
  library.text = await new Response(stream).text();
  document.head.appendChild(library);
  const plotly = window.Plotly;
  for (const [args, done] of queued) done(plotly.newPlot(...args));
})();"""
UNPACK_NOTE = (
    "This browser cannot unpack the report's charts (it lacks DecompressionStream): open the file in a "
    "browser from 2023 or later. The tables and text are all here."
)


def html_report(
    sentence: str,
    sentence_b: str | None,
    model_name: str,
    parts: Sequence[tuple[str, Part]],
    *,
    details: Sequence[tuple[str, str]] = (),
    generated: datetime | None = None,
    link: str | None = None,
) -> str:
    """A complete HTML page: a header (sentence(s), model, ``details``, date, link), then each part.

    ``parts`` is a list of (caption, part), shown in order: a plotly figure, a
    table (a DataFrame, written as an HTML table) or a line of text (whose
    caption is not shown). ``details`` are (name, value) rows for the header,
    such as the view, layer, head and options the page was drawn with;
    ``link`` is the page's address (a link where it is http or https). The page
    works from a file with no network: plotly.js is inlined once, gzipped, and
    MathJax is off. ``generated`` is the date shown (default: now).
    """
    generated = generated or datetime.now()
    facts = [("Sentence", sentence)]
    if sentence_b:
        facts.append(("Sentence B", sentence_b))
    facts += [("Model", model_name), *details, ("Date", generated.strftime("%Y-%m-%d %H:%M"))]
    rows = [f"<dt>{html.escape(name)}</dt><dd>{html.escape(str(value))}</dd>" for name, value in facts]
    if link:
        rows.append(f"<dt>Link</dt><dd>{_link_html(link)}</dd>")
    header = "\n".join(rows)
    body = "\n".join(_part_html(caption, part) for caption, part in parts)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Attention report: {html.escape(sentence[:80])}</title>
<style>{STYLE}</style>
<script>{QUEUE}</script>
</head>
<body>
<header>
<h1>Attention report</h1>
<dl>
{header}
</dl>
</header>
<p class="note" id="unpack-note" hidden>{UNPACK_NOTE}</p>
<main>
{body}
</main>
<script type="application/gzip;base64" id="plotly-gz">{packed_plotlyjs()}</script>
<script>{UNPACK}</script>
</body>
</html>
"""


@functools.cache
def packed_plotlyjs() -> str:
    """plotly.js gzipped and in base64: 1.9 MB in the page instead of 4.8 (its letters are only base64's)."""
    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode("ascii")


def _part_html(caption: str, part: Part) -> str:
    if isinstance(part, go.Figure):
        return _figure_html(caption, part)
    if isinstance(part, str):
        return f'<p class="note">{html.escape(part)}</p>'
    import pandas as pd  # a table's: pandas is imported already, by what made it

    if isinstance(part, pd.DataFrame):
        return _table_html(caption, part)
    raise TypeError(f"a report part is a plotly Figure, a DataFrame or a str, not {type(part).__name__}")


def _link_html(link: str) -> str:
    """The page's address: a link where it is a web address, else only its text."""
    text = html.escape(link)
    return f'<a href="{text}">{text}</a>' if urlsplit(link).scheme in ("http", "https") else text


def _table_html(caption: str, frame: pd.DataFrame) -> str:
    """A table as the page shows it: its columns' names, then one row per row, every cell escaped."""
    head = "".join(f"<th>{html.escape(str(name))}</th>" for name in frame.columns)
    body = "\n".join(
        "<tr>" + "".join(_cell_html(v) for v in row) + "</tr>" for row in frame.itertuples(index=False, name=None)
    )
    return (
        f"<figure>\n<figcaption>{html.escape(caption)}</figcaption>\n"
        f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n</figure>"
    )


def _cell_html(value) -> str:
    if isinstance(value, bool | np.bool_):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float | np.floating):
        return f'<td class="num">{"—" if math.isnan(value) else f"{value:.4g}"}</td>'
    if isinstance(value, int | np.integer):
        return f'<td class="num">{int(value)}</td>'
    return "<td>—</td>" if value is None else f"<td>{html.escape(str(value))}</td>"


def _figure_html(caption: str, fig: go.Figure) -> str:
    """One figure as a div and its newPlot call, relying on the page's plotly.js."""
    div = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        config={"displaylogo": False},
    )
    return f"<figure>\n<figcaption>{html.escape(caption)}</figcaption>\n{div}\n</figure>"
