"""Token strip, mask figures, the HTML report, and what a browser shows of them."""

import base64
import gzip
import html
import re
import time
from datetime import datetime

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

import viz
from viz._style import KEEP, PADDING, SEGMENT_A, SEGMENT_B, SPECIAL
from viz.tokens import COMPACT_ABOVE, POSITION_EVERY, ROW_PX

# A sentence pair as the tokenizer gives it: pieces, ids, token types, special flags.
PAIR = ["[CLS]", "the", "cat", "is", "play", "##ing", "[SEP]", "it", "<b>", "naps", "[SEP]"]
IDS = [101, 1996, 4937, 2003, 2377, 2075, 102, 2009, 1026, 18996, 102]
SEGMENTS = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
SPECIAL_FLAGS = [t in ("[CLS]", "[SEP]") for t in PAIR]


def strip_pair(**kwargs) -> go.Figure:
    return viz.token_strip(PAIR, IDS, SEGMENTS, SPECIAL_FLAGS, **kwargs)


def named(fig: go.Figure, name: str):
    (trace,) = [t for t in fig.data if t.name == name and t.mode == "text"]
    return trace


def boxes(fig: go.Figure) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(fill colour, (left, right, top, bottom)) of every drawn box."""
    found = []
    for trace in fig.data:
        if trace.fill != "toself":
            continue
        x = np.asarray(trace.x, dtype=float).reshape(-1, 6)  # 5 corners and a gap per box
        y = np.asarray(trace.y, dtype=float).reshape(-1, 6)
        assert np.isnan(x[:, 5]).all()
        for xs, ys in zip(x[:, :5], y[:, :5]):
            found.append((trace.fillcolor, (xs.min(), xs.max(), ys.min(), ys.max())))
    return found


def legend_colours(fig: go.Figure) -> dict[str, str]:
    """Legend entry name -> the colour of its swatch."""
    return {
        t.name: t.marker.color
        for t in fig.data
        if isinstance(t, go.Scatter) and t.mode == "markers" and t.showlegend is not False
    }


def box_of(fig: go.Figure, i: int):
    """The box drawn around piece i (the one containing the piece's text)."""
    pieces = named(fig, "piece")
    x, y = pieces.x[i], pieces.y[i]
    (hit,) = [b for b in boxes(fig) if b[1][0] < x < b[1][1] and b[1][2] < y < b[1][3]]
    return hit


# ---- token_strip -------------------------------------------------------------


def test_token_strip_colours_boxes_by_segment_and_marks_special_tokens():
    fig = strip_pair()
    expected = {0: SEGMENT_A[0], 1: SEGMENT_B[0]}
    for i, (segment, special) in enumerate(zip(SEGMENTS, SPECIAL_FLAGS)):
        colour, _ = box_of(fig, i)
        assert colour == (SPECIAL[0] if special else expected[segment]), PAIR[i]
    assert len({SEGMENT_A[0], SEGMENT_B[0], SPECIAL[0]}) == 3
    key = next(a.text for a in fig.layout.annotations if "■" in a.text)
    assert dict((name, colour) for colour, name in re.findall(r'color:(#\w+)">■</span> ([^<]+?)(?:   |$)', key)) == {
        "segment A": SEGMENT_A[1],
        "segment B": SEGMENT_B[1],
        "[CLS] / [SEP]": SPECIAL[1],
    }
    assert not fig.layout.showlegend
    assert len(boxes(fig)) == len(PAIR)


def test_token_strip_shows_piece_id_below_and_position_above_escaped():
    fig = strip_pair()
    pieces, ids, positions = named(fig, "piece"), named(fig, "id"), named(fig, "position")
    assert list(ids.text) == [str(i) for i in IDS]
    assert list(positions.text) == [str(i) for i in range(len(PAIR))]
    assert pieces.text[8] == "&lt;b&gt;" and pieces.text[2] == "cat"
    assert "<b>" not in fig.to_json()
    for i in range(len(PAIR)):  # y grows downwards: position, then piece, then id
        assert positions.y[i] < pieces.y[i] < ids.y[i]
        assert positions.x[i] == pieces.x[i] == ids.x[i]
    assert ids.textfont.size < pieces.textfont.size


def test_token_strip_hover_names_position_piece_id_and_segment():
    pieces = named(strip_pair(), "piece")
    assert pieces.hovertemplate == "%{hovertext}<extra></extra>"
    assert pieces.hovertext[2] == "position 2: cat (id 4937, segment A)"
    assert pieces.hovertext[9] == "position 9: naps (id 18996, segment B)"
    assert pieces.hovertext[8] == "position 8: &lt;b&gt; (id 1026, segment B)"
    assert pieces.hovertext[0] == "position 0: [CLS] (id 101, segment A, special)"


def test_token_strip_attaches_continuation_pieces():
    fig = strip_pair()
    edges = [box_of(fig, i)[1] for i in range(len(PAIR))]
    assert edges[5][0] == edges[4][1]  # "##ing" touches "play"
    assert edges[5][2] == edges[4][2]  # on the same row
    for i in (1, 2, 3, 4, 7):  # other pieces keep a gap
        assert edges[i][0] > edges[i - 1][1]
    assert named(fig, "piece").text[5].endswith("</span>ing")  # "##" drawn lighter


def test_token_strip_wraps_long_input_and_grows_in_height():
    words = [("walk", 1), ("##ing", 2), ("dogs", 3), ("un", 4), ("##believ", 5), ("##ably", 6)] * 40
    tokens, ids = [w for w, _ in words], [i for _, i in words]
    flags = [False] * len(tokens)
    short = viz.token_strip(tokens[:6], ids[:6], [0] * 6, flags[:6])
    long = viz.token_strip(tokens, ids, [0] * len(tokens), flags)
    long_edges = [b[1] for b in boxes(long)]
    rows = sorted({top for _, _, top, _ in long_edges})
    assert len(rows) > 3 and long.layout.height > short.layout.height + 3 * 40
    assert max(right for _, right, _, _ in long_edges) <= ROW_PX
    pieces = named(long, "piece")
    for i, token in enumerate(tokens):  # a word never wraps inside when it fits in a row
        if token.startswith("##"):
            assert pieces.y[i] == pieces.y[i - 1]
    per_row = viz.token_strip(tokens[:12], ids[:12], [0] * 12, flags[:12], per_row=5)
    ys = list(named(per_row, "piece").y)
    assert [ys.count(y) for y in sorted(set(ys))] == [5, 5, 2]


def test_token_strip_at_512_tokens_is_light_and_fast():
    n = 512
    tokens = ["[CLS]"] + [("##ing" if i % 3 == 2 else f"word{i % 70}") for i in range(n - 2)] + ["[SEP]"]
    start = time.perf_counter()
    fig = viz.token_strip(tokens, list(range(n)), [0] * 300 + [1] * (n - 300), [i in (0, n - 1) for i in range(n)])
    size = len(fig.to_json())
    elapsed = time.perf_counter() - start
    print(f"token_strip, {n} tokens: {size / 1e3:.0f} kB of JSON in {elapsed:.2f} s")
    assert size < 400_000 and elapsed < 1.5
    assert len(fig.data) <= 9  # one trace per colour, legend and text kind, not per token
    assert len(named(fig, "piece").text) == n


def test_a_long_inputs_strip_is_compact_ids_in_the_hover_every_tenth_position():
    n = COMPACT_ABOVE + 72
    tokens = ["[CLS]"] + [f"w{i % 50}" for i in range(n - 2)] + ["[SEP]"]
    ids = list(range(1000, 1000 + n))
    full = viz.token_strip(tokens, ids, [0] * n, [i in (0, n - 1) for i in range(n)], compact=False)
    fig = viz.token_strip(tokens, ids, [0] * n, [i in (0, n - 1) for i in range(n)])  # compact by length
    assert [t.name for t in fig.data if t.mode == "text"] == ["piece", "position"]  # no id line
    assert list(named(fig, "position").text) == [str(i) for i in range(0, n, POSITION_EVERY)]
    assert list(named(full, "position").text) == [str(i) for i in range(n)]
    assert len(named(fig, "piece").text) == n
    assert named(fig, "piece").hovertext[7] == f"position 7: {tokens[7]} (id 1007, segment A)"  # id kept
    assert fig.layout.height < 0.85 * full.layout.height  # no id line in any box
    assert any(f"every {POSITION_EVERY}th box" in a.text for a in fig.layout.annotations)
    short = strip_pair()
    assert [t.name for t in short.data if t.mode == "text"] == ["piece", "id", "position"]


def test_token_strip_wraps_within_the_width_it_is_given():
    words = [("walk", 1), ("##ing", 2), ("dogs", 3), ("un", 4), ("##believ", 5), ("##ably", 6)] * 40
    tokens, ids = [w for w, _ in words], [i for _, i in words]
    for width in (500, 766):
        fig = viz.token_strip(tokens, ids, [0] * len(tokens), [False] * len(tokens), width=width)
        assert fig.layout.width <= width  # never shrunk to fit its column, so boxes keep their text's size
        assert max(right for _, (_, right, _, _) in boxes(fig)) <= fig.layout.xaxis.range[1]
    wide = viz.token_strip(tokens, ids, [0] * len(tokens), [False] * len(tokens))
    assert wide.layout.width > 766  # by default rows wrap at ROW_PX


def test_token_strip_font_size_and_checks():
    assert strip_pair(font_size=22).layout.font.size == 22
    assert named(strip_pair(font_size=22), "piece").textfont.size == 22
    with pytest.raises(ValueError, match="ids"):
        viz.token_strip(PAIR, IDS[:-1], SEGMENTS, SPECIAL_FLAGS)


# ---- padding_mask_figure -----------------------------------------------------

BATCH = [["[CLS]", "the", "cat", "[SEP]"], ["[CLS]", "<i>", "[SEP]"], ["[CLS]", "[SEP]"]]
MASK = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]])


def test_padding_mask_draws_kept_and_padding_cells_in_two_colours():
    fig = viz.padding_mask_figure(MASK, ["first", "second", "<b>3</b>"], BATCH)
    token, padding = [t for t in fig.data if isinstance(t, go.Heatmap)]
    np.testing.assert_array_equal(~np.isnan(np.asarray(token.z, dtype=float)), MASK == 1)
    np.testing.assert_array_equal(~np.isnan(np.asarray(padding.z, dtype=float)), MASK == 0)
    assert {c for _, c in token.colorscale} == {KEEP}
    assert {c for _, c in padding.colorscale} == {PADDING} and KEEP != PADDING
    assert legend_colours(fig) == {"token": KEEP, "padding": PADDING}
    assert list(fig.layout.yaxis.ticktext) == ["first", "second", "&lt;b&gt;3&lt;/b&gt;"]
    assert list(fig.layout.xaxis.ticktext) == ["0", "1", "2", "3"]
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # first item on top


def test_padding_mask_hover_and_cells_name_each_rows_token():
    fig = viz.padding_mask_figure(MASK, ["first", "second", "third"], BATCH)
    token, padding = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert token.hovertemplate == "%{hovertext}<extra></extra>"
    assert token.hovertext[0][2] == "first · position 2: cat"
    assert token.hovertext[1][1] == "second · position 1: &lt;i&gt;"
    assert padding.hovertext[1][3] == "second · position 3: [PAD]"
    assert padding.hovertext[2][2] == "third · position 2: [PAD]"
    assert token.text[0][2] == "cat" and token.text[1][3] == ""  # each trace writes its own cells
    assert padding.text[1][3] == "[PAD]" and padding.text[0][2] == ""
    assert "<i>" not in fig.to_json()
    # a token given at a padded position is still shown as padding
    padded = viz.padding_mask_figure(np.array([[1, 0]]), ["x"], [["[CLS]", "stray"]])
    assert padded.data[1].hovertext[0][1] == "x · position 1: [PAD]"


def test_padding_mask_checks_shapes():
    with pytest.raises(ValueError, match="labels"):
        viz.padding_mask_figure(MASK, ["a", "b"], BATCH)
    with pytest.raises(ValueError, match="more tokens"):
        viz.padding_mask_figure(MASK[:, :2], ["a", "b", "c"], BATCH)


# ---- causal_mask_figure ------------------------------------------------------

CAUSAL_TOKENS = ["[CLS]", "the", "cat", "the", "[SEP]"]


def causal_cells(fig: go.Figure) -> tuple[set, set]:
    """(query, key) index pairs drawn by the "may attend" and the "masked" traces."""
    allowed, masked = [t for t in fig.data if isinstance(t, go.Heatmap)]
    drawn_allowed = {(i, j) for i, row in enumerate(allowed.z) for j in range(len(row))}
    assert masked.transpose  # its rows are key columns
    drawn_masked = {(i, j) for j, column in enumerate(masked.z) for i in range(len(column))}
    return drawn_allowed, drawn_masked


def test_causal_mask_lets_each_query_see_itself_and_the_past_only():
    L = len(CAUSAL_TOKENS)
    fig = viz.causal_mask_figure(L, CAUSAL_TOKENS)
    allowed, masked = causal_cells(fig)
    every = {(i, j) for i in range(L) for j in range(L)}
    assert allowed == {(i, j) for i, j in every if j <= i}
    assert masked == every - allowed
    allowed_trace, masked_trace = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert {c for _, c in allowed_trace.colorscale} == {KEEP}
    assert {c for _, c in masked_trace.colorscale} == {PADDING}
    assert legend_colours(fig) == {"may attend": KEEP, "masked (future)": PADDING}


def test_causal_mask_hover_and_axes_name_tokens_like_the_heatmap():
    fig = viz.causal_mask_figure(5, CAUSAL_TOKENS, title="What-if: causal mask")
    allowed, masked = [t for t in fig.data if isinstance(t, go.Heatmap)]
    labels = ["[CLS]·0", "the·1", "cat·2", "the·3", "[SEP]·4"]
    for trace in (allowed, masked):
        assert list(trace.x) == list(trace.y) == labels
    assert allowed.hovertemplate.replace("%{y}", labels[3]).replace("%{x}", labels[1]) == (
        "the·3 → the·1: may attend<extra></extra>"
    )
    assert masked.hovertemplate.replace("%{y}", labels[1]).replace("%{x}", labels[3]) == (
        "the·1 → the·3: masked (future)<extra></extra>"
    )
    assert list(fig.layout.xaxis.ticktext) == CAUSAL_TOKENS
    assert fig.layout.title.text == "What-if: causal mask"
    assert fig.layout.yaxis.autorange == "reversed"
    with pytest.raises(ValueError, match="tokens"):
        viz.causal_mask_figure(4, CAUSAL_TOKENS)


def test_causal_mask_at_512_tokens_stays_light():
    tokens = [f"t{i % 30}" for i in range(512)]
    size = len(viz.causal_mask_figure(512, tokens).to_json())
    print(f"causal_mask_figure, 512 tokens: {size / 1e3:.0f} kB of JSON")
    assert size < 800_000


def test_what_if_titles_reach_the_head_heatmap():
    fig = viz.head_heatmap(np.eye(3), ["a", "b", "c"], title="What-if: causal, L0 H1")
    assert fig.layout.title.text == "What-if: causal, L0 H1"


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
