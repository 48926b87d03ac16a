"""One standalone HTML page of the figures a view shows, readable offline.

plotly.js is written once, inline, in the page head; each figure is a div
and one ``Plotly.newPlot`` call. Nothing is fetched from the network, and
the user's text (sentences, model name, captions) is escaped.
"""

import html
from collections.abc import Sequence
from datetime import datetime

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

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
"""


def html_report(
    sentence: str,
    sentence_b: str | None,
    model_name: str,
    figures: Sequence[tuple[str, go.Figure]],
    *,
    details: Sequence[tuple[str, str]] = (),
    generated: datetime | None = None,
) -> str:
    """A complete HTML page: a header (sentence(s), model, ``details``, date), then each figure.

    ``figures`` is a list of (caption, figure), shown in order; ``details``
    are (name, value) rows for the header, such as the view, layer, head
    and options the figures were drawn with. The page works from a file
    with no network: plotly.js is inlined once and MathJax is off.
    ``generated`` is the date shown (default: now).
    """
    generated = generated or datetime.now()
    facts = [("Sentence", sentence)]
    if sentence_b:
        facts.append(("Sentence B", sentence_b))
    facts += [("Model", model_name), *details, ("Date", generated.strftime("%Y-%m-%d %H:%M"))]
    header = "\n".join(
        f"<dt>{html.escape(name)}</dt><dd>{html.escape(str(value))}</dd>" for name, value in facts
    )
    body = "\n".join(_figure_html(caption, fig) for caption, fig in figures)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Attention report: {html.escape(sentence[:80])}</title>
<style>{STYLE}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head>
<body>
<header>
<h1>Attention report</h1>
<dl>
{header}
</dl>
</header>
<main>
{body}
</main>
</body>
</html>
"""


def _figure_html(caption: str, fig: go.Figure) -> str:
    """One figure as a div and its newPlot call, relying on the page's plotly.js."""
    div = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        config={"displaylogo": False},
    )
    return f"<figure>\n<figcaption>{html.escape(caption)}</figcaption>\n{div}\n</figure>"
