"""End to end in Debian's Chromium: type a sentence, see its tokens and shapes, open a head."""

from __future__ import annotations

import re
import shutil
import time

import pytest
from browser import CHROMIUM, served_chromium, wait_settled

# the Coreference view's suite upload (the sidebar has a file box of its own: a long text)
SUITE_UPLOAD = '[data-testid="stMain"] input[type=file]'

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not __import__("os").path.exists(CHROMIUM),
    reason="Debian's chromium is not installed (apt-get install -y chromium)",
)


# The suites' scoring on a loaded machine: Winogender (720 sentences) took 3 minutes beside four busy processes,
# its kernels at a lower priority (ui/compute/priority.py), past the server's default limit for a suite (120 s), and
# a suite waits for the one heavy slot that a stopped GAP scoring holds until its next progress update. The limits
# themselves are tested in tests/app (test_slots.py, test_caps_settings.py); here they are sized for a busy machine.
SERVER_ENV = {"ATTENTION_TIME_LIMIT_SUITE": "900", "ATTENTION_HEAVY_WAIT_S": "900"}
SCORING = 600_000  # ms: a suite's scoring, on a loaded machine (SERVER_ENV)


@pytest.fixture(scope="module")
def page():
    with served_chromium(env=SERVER_ENV) as (browser, url):
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(url)
        page.wait_for_selector(".js-plotly-plot", timeout=120_000)
        wait_settled(page)
        page.app_url = url
        yield page


def run_sentence(page, text: str) -> None:
    box = page.get_by_label("Sentence", exact=True)
    box.fill(text)
    page.get_by_role("button", name="Run", exact=True).click()
    wait_settled(page)


HEAD_LABELS = """() => {
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    const head = plots.find(p => (p.querySelector('.gtitle') || {}).textContent?.startsWith('Layer '));
    return head ? [...head.querySelectorAll('.xtick text')].map(t => t.textContent) : null;
}"""


def axis_labels(page) -> list[str]:
    """The key labels along the top of the head heatmap (the chart titled 'Layer …'), as drawn."""
    return page.evaluate(HEAD_LABELS)


def chart_text(page, needle: str, timeout: float = 60_000) -> str:
    """The text of the first chart that contains `needle`, once it does (within `timeout` ms)."""
    page.wait_for_function(
        "(n) => [...document.querySelectorAll('.js-plotly-plot')].some(p => p.textContent.includes(n))",
        arg=needle,
        timeout=timeout,
    )
    return page.evaluate(
        "(n) => [...document.querySelectorAll('.js-plotly-plot')].map(p => p.textContent).find(t => t.includes(n))",
        needle,
    )


def test_typed_sentence_appears_on_the_heatmap_axes(page):
    open_view(page, "Head")
    run_sentence(page, "A small dog chased the ball.")
    page.wait_for_function(f"() => ({HEAD_LABELS})()?.includes('chased')", timeout=60_000)
    labels = axis_labels(page)
    assert labels == ["[CLS]", "a", "small", "dog", "chased", "the", "ball", ".", "[SEP]"]
    assert page.locator('[data-testid="stException"]').count() == 0


def test_shape_flow_shows_the_real_shapes(page):
    run_sentence(page, "A small dog chased the ball.")  # 9 tokens
    open_view(page, "Shape flow")
    chart_text(page, "1 × 12 × 9 × 9")  # the scores' stage
    # the side panel: the step's whole path (drawn in the same run as the diagram, perhaps a moment after it)
    page.wait_for_function(
        r"() => /attention\/core\/(mha|dot_product|qkv)\.py:\d+/.test(document.body.innerText)", timeout=60_000
    )
    back = page.locator(".st-key-shapeflow_prev_stage button")
    for _ in range(8):  # back to the first stage (no wrapping past it): the input, at the model's width
        if back.is_disabled():
            break
        back.click()
        wait_settled(page)
    assert back.is_disabled()
    chart_text(page, "1 × 9 × 384")


def click_head(page, needle: str, layer: int, head: int) -> None:
    """Click the (layer, head) target of the chart containing `needle`, located from plotly's own data."""
    chart_text(page, needle)
    wait_settled(page)
    page.evaluate(
        """(needle) => [...document.querySelectorAll('.js-plotly-plot')]
        .find(p => p.textContent.includes(needle)).scrollIntoView({block: 'center'})""",
        needle,
    )
    box, previous = None, {}
    deadline = time.time() + 30
    # until the page has stopped moving and the point is on the chart itself, not on something drawn over it
    while (box != previous or not box["on_chart"]) and time.time() < deadline:
        previous = box
        page.wait_for_timeout(150)
        box = target_point(page, needle, layer, head)
    assert box["on_chart"], "the target stayed covered or off the chart"
    page.mouse.click(box["x"], box["y"])
    wait_settled(page)


def target_point(page, needle: str, layer: int, head: int) -> dict:
    """Where (layer, head) is drawn in the chart containing `needle`, in page coordinates."""
    return page.evaluate(
        """([needle, layer, head]) => {
        const el = [...document.querySelectorAll('.js-plotly-plot')].find(p => p.textContent.includes(needle));
        const tr = el._fullData.find(t => t.type === 'scatter' && t.customdata
                                         && t.customdata.some(c => c[0] === layer && c[1] === head));
        const i = tr.customdata.findIndex(c => c[0] === layer && c[1] === head);
        const xa = el._fullLayout[(tr.xaxis || 'x').replace('x', 'xaxis')];
        const ya = el._fullLayout[(tr.yaxis || 'y').replace('y', 'yaxis')];
        const r = el.getBoundingClientRect();
        const x = r.left + xa._offset + xa.l2p(xa.d2l(tr.x[i])), y = r.top + ya._offset + ya.l2p(ya.d2l(tr.y[i]));
        return {x, y, on_chart: el.contains(document.elementFromPoint(x, y))};
    }""",
        [needle, layer, head],
    )


def fresh(page, query: str = "") -> None:
    """Open the app anew (a new session), so that a test does not depend on the page others left."""
    page.goto(page.app_url + query)
    page.wait_for_selector(".js-plotly-plot", timeout=120_000)
    wait_settled(page)


def open_view(page, name: str) -> None:
    page.get_by_role("radio", name=name).or_(page.get_by_role("button", name=name)).first.click()
    wait_settled(page)


def test_open_a_head_from_the_overview(page):
    open_view(page, "Overview")
    click_head(page, "L5", 2, 5)
    page.wait_for_function("() => document.body.innerText.includes('Layer 2, head 5')", timeout=60_000)
    assert "view=head" in page.url and "layer=2" in page.url and "head=5" in page.url


def test_open_a_head_from_the_coreference_grid(page):
    fresh(
        page, "?view=coref&layer=0&head=0"
    )  # the default sentence, "The animal didn't cross the street because it was too tired."
    click_head(page, "specificity of it → animal", 3, 1)  # the grid of the default criterion
    page.wait_for_function("() => document.body.innerText.includes('Layer 3, head 1')", timeout=60_000)
    assert "view=head" in page.url and "layer=3" in page.url and "head=1" in page.url


def test_markup_in_the_sentence_runs_nothing_and_shows_as_text(page):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    fresh(page, "?view=head")
    run_sentence(page, "<img src=x onerror=alert(1)> <script>alert(2)</script> **bold** $$x$$")
    page.wait_for_function(f"() => ({HEAD_LABELS})()?.includes('bold')", timeout=60_000)
    labels = axis_labels(page)
    assert "<" in labels and "script" in labels  # the characters are drawn as text
    assert page.locator("img[src=x]").count() == 0 and page.locator("strong:has-text('bold')").count() == 0
    assert page.locator('[data-testid="stException"]').count() == 0
    page.wait_for_timeout(500)
    assert dialogs == []


def pick(page, label: str, option: str, settle: bool = True) -> None:
    """Choose `option` in the selectbox labelled `label`; then wait for the run it starts to end, unless not
    `settle` (a suite's scoring runs on for minutes: a wait for its end gave up after 60 s, 60 of the test's 70)."""
    page.locator('[data-testid="stSelectbox"]').filter(has_text=label).locator("input").first.click()
    page.keyboard.type(option)  # a click alone does not always open the list
    page.get_by_role("option", name=option, exact=True).click()
    if settle:
        wait_settled(page)


def test_coreference_upload_refuses_a_bad_file_and_uses_a_good_one(page, tmp_path):
    import json

    fresh(page, "?view=coref&coref=suite")
    page.wait_for_function(
        "() => document.body.innerText.includes('examples from the built-in suite')", timeout=120_000
    )
    pick(page, "Examples to score", "Upload")
    page.wait_for_function("() => document.body.innerText.includes('Upload a JSONL file')", timeout=60_000)
    bad = tmp_path / "weights.jsonl"
    bad.write_bytes(b"\x00\xff\xfe binary \x00")
    page.locator(SUITE_UPLOAD).set_input_files(str(bad))
    page.wait_for_function("() => document.body.innerText.includes('not UTF-8')", timeout=60_000)
    assert "The examples in use stay as they were" in page.inner_text("body")
    good = tmp_path / "mini.jsonl"
    good.write_text(
        "\n".join(
            json.dumps(e)
            for e in [
                {
                    "text": "The cat chased the dog because it was angry.",
                    "pronoun": "it",
                    "candidates": ["cat", "dog"],
                    "answer": "cat",
                },
                {
                    "text": "The trophy does not fit in the suitcase because it is too big.",
                    "pronoun": "it",
                    "candidates": ["trophy", "suitcase"],
                    "answer": "trophy",
                },
            ]
        )
    )
    page.locator(SUITE_UPLOAD).set_input_files(str(good))
    page.wait_for_function("() => document.body.innerText.includes('2 examples from mini.jsonl')", timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0


def test_coreference_picks_winogender_and_groups_it_by_gender(page):
    fresh(page, "?view=coref&coref=suite")
    pick(page, "Examples to score", "Winogender")
    page.wait_for_function("() => document.body.innerText.includes('Rudinger')", timeout=120_000)
    chart_text(page, "accuracy male − female", timeout=SCORING)  # Winogender's own gap grid, once it is scored
    wait_settled(page)
    pick(page, "Group by", "gender")
    chart_text(page, "accuracy, gender = female")
    page.wait_for_function("() => document.body.innerText.includes('Paired by')", timeout=60_000)
    # the URL is written at the end of the run, after the figures
    page.wait_for_function("() => location.search.includes('by=gender')", timeout=30_000)
    assert "set=winogender" in page.url and "by=gender" in page.url
    assert page.locator('[data-testid="stException"]').count() == 0


GAP_PROGRESS = r"Scoring .*: [1-9][0-9]* of 2000 examples"
BUSY = "Your previous computation is still running"  # SessionBusy's message (ui/compute/limits.py)
# Each end of a script run of the page, counted from now: Streamlit's app root says whether a run is going
# (data-test-script-state); a MutationObserver sees every change of it, however short the run
COUNT_RUN_ENDS = """() => {
    window.runEnds = 0;
    new MutationObserver((records) => {
        window.runEnds += records.filter((r) => r.oldValue === 'running').length;
    }).observe(document.querySelector('[data-testid="stApp"]'),
               {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state']});
}"""
# The scoring of GAP under way, or the run ended, told that the session's previous computation is still going
SCORING_OR_BUSY = """([progress, busy]) => new RegExp(progress).test(document.body.innerText)
    || (window.runEnds > 0
        && document.querySelector('[data-testid="stApp"]')?.dataset.testScriptState === 'notRunning'
        && [...document.querySelectorAll('[data-testid="stElementContainer"][data-stale="false"]')]
            .some((e) => e.innerText.includes(busy)))"""


def wait_run_ended(page, timeout: float = 60_000) -> None:
    """Until the session's script run has ended (Streamlit's app root says so)."""
    page.wait_for_function(
        """() => document.querySelector('[data-testid="stApp"]')?.dataset.testScriptState === 'notRunning'""",
        timeout=timeout,
    )


def score_gap_again(page) -> None:
    """Click "Score it", and once more as the page asks until GAP's scoring is under way. With Streamlit's fast
    reruns the page says "was stopped" at once, while the stopped run's thread lets go of the session's heavy
    job only at its next progress update: beside four busy processes, where the scoring's kernels run at a
    lower priority (ui/compute/priority.py), more than the 2 s this test waited. A click before then is told
    that the previous computation is still running (SessionBusy, one job a session); the visitor tries again,
    as the message says (Run: the same page again, not stopped)."""
    page.evaluate(COUNT_RUN_ENDS)
    page.get_by_role("button", name="Score it").click()
    deadline = time.monotonic() + 300
    while True:
        page.wait_for_function(SCORING_OR_BUSY, arg=[GAP_PROGRESS, BUSY], timeout=SCORING)
        if re.search(GAP_PROGRESS, page.inner_text("body")):
            return
        assert time.monotonic() < deadline, "the stopped scoring held the session's job for 5 minutes"
        page.wait_for_timeout(2000)
        page.evaluate(COUNT_RUN_ENDS)
        page.get_by_role("button", name="Run", exact=True).click()


def test_stop_interrupts_the_scoring_of_gap(page):
    """GAP development (2000 passages) is scored for tens of seconds: Stop ends it at the next progress
    update, and the view says so and offers to start again."""
    fresh(page, "?view=coref&coref=suite")
    pick(page, "Examples to score", "GAP development", settle=False)
    page.wait_for_function(f"() => /{GAP_PROGRESS}/.test(document.body.innerText)", timeout=120_000)
    page.get_by_role("button", name="Stop scoring").click()
    started = time.monotonic()
    page.wait_for_function("() => document.body.innerText.includes('was stopped')", timeout=30_000)
    stopped_after = time.monotonic() - started
    assert stopped_after < 15, stopped_after  # at the next progress update, not at the end of the 2000
    wait_run_ended(page)  # the progress bar of the stopped run is gone once this run has drawn to the end
    assert not re.search(r"Scoring .*of 2000 examples", page.inner_text("body"))  # no progress goes on
    page.wait_for_timeout(2000)
    assert "was stopped" in page.inner_text("body")
    assert page.get_by_role("button", name="Score it").count() == 1  # to start it again
    assert page.locator('[data-testid="stException"]').count() == 0

    # started again, it stops again
    score_gap_again(page)
    page.get_by_role("button", name="Stop scoring").click()
    started = time.monotonic()
    page.wait_for_function("() => document.body.innerText.includes('was stopped')", timeout=30_000)
    assert time.monotonic() - started < 15
    wait_run_ended(page)
    page.wait_for_timeout(2000)
    assert not re.search(r"Scoring .*of 2000 examples", page.inner_text("body"))
    assert page.get_by_role("button", name="Score it").count() == 1
    assert page.locator('[data-testid="stException"]').count() == 0


# ---- hostile input, as a room of people would type it ----------------------------------------------

HOSTILE = {
    "html and script": '<script>document.title="pwned"</script> <img src=x onerror="document.title=\'pwned\'">',
    "markdown and latex": "**x** [a](javascript:alert(1)) $$\\frac{a}{b}$$",
    "zero-width and right-to-left override": "The\u200b animal\u202e didn't\u200d cross.",
    "control characters": "The\x07 animal\x1b cross\x7f.",
    "emoji": "I love 😍 attention!",
    "cjk": "東京 is big",
}


def page_is_clean(page, dialogs: list) -> None:
    """Nothing the sentence held ran or became markup, and no traceback reached the page."""
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.title() != "pwned" and dialogs == []
    assert page.locator("img[src=x], a[href^='javascript'], strong:has-text('x')").count() == 0


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_sentence_shows_its_own_tokens_as_text(page, minilm, name):
    from attention import encode

    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    fresh(page, "?view=head")
    run_sentence(page, HOSTILE[name])
    typed = page.get_by_label("Sentence", exact=True).input_value()
    expected = encode(minilm[1], typed).tokens
    page.wait_for_function(
        f"(want) => JSON.stringify(({HEAD_LABELS})()) === JSON.stringify(want)", arg=expected, timeout=60_000
    )
    page.wait_for_timeout(300)
    page_is_clean(page, dialogs)


@pytest.mark.parametrize("text", ["", "  \n\t  "])
def test_empty_sentence_is_a_prompt_in_the_browser(page, text):
    run_sentence(page, text)
    page.wait_for_function("() => document.body.innerText.includes('Type a sentence above')", timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_label("Sentence", exact=True).input_value() == text  # what was typed stays


def test_six_thousand_words_are_truncated_in_the_browser(page):
    run_sentence(page, "word " * 6000)
    page.wait_for_function("() => document.body.innerText.includes('6002 tokens')", timeout=120_000)
    assert "512" in page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0


def test_bad_link_parameters_are_clamped_with_notices(page):
    other = page.context.browser.new_page(viewport={"width": 1500, "height": 1100})
    other.goto(page.app_url + "?s=" + "a" * 100_000 + "&layer=99&head=-3&view=bogus")
    other.wait_for_selector(".js-plotly-plot", timeout=120_000)
    wait_settled(other)
    body = other.inner_text("body")
    for notice in (
        "longer than 20,000 characters",
        "Unknown view in the link",
        "head is below 0",
        "Layer 99 does not exist",
    ):
        assert notice in body
    assert "Layer 5, head 0" in body and other.locator('[data-testid="stException"]').count() == 0
    other.close()
