"""The load bench's two strangers (bench/load.py; bench/README.md says what they try): pages in a Chromium
of their own, one sending the heaviest computations the app offers, the other a 5 MB suite and links to
models the server does not serve, each case recorded as what its visitor saw."""

from __future__ import annotations

import asyncio
import json
import time

from _room import CURRENT

HOSTILE_SESSIONS = 2
UPLOAD_MB = 5  # the hostile suite upload (the app takes 2 MB)
FLOW_WORDS = 62  # the heaviest attention flow the app computes: 64 positions with [CLS] and [SEP]
LOCKED_OUT = ["/etc", "gpt2"]  # linked as ?model=...; the server runs locked to the bundled model
LONG_TOKENS = 510  # the stranger's long sentence: 512 positions with [CLS] and [SEP]

SEEN = """() => ({
    messages: [...document.querySelectorAll('[data-testid="stAlert"], [data-testid="stToast"]')]
        .filter(e => e.closest('[data-stale="true"]') === null)
        .map(e => e.innerText.trim().replace(/\\s+/g, ' ')),
    uploader: [...document.querySelectorAll('[data-testid="stFileUploader"]')]
        .map(e => e.innerText.trim().replace(/\\s+/g, ' ')),
    exceptions: [...document.querySelectorAll('[data-testid="stException"]')]
        .map(e => e.innerText.trim().replace(/\\s+/g, ' ').slice(0, 300)),
    traceback: document.body.innerText.includes('Traceback'),
    charts: CURRENT_CHARTS,
})""".replace("CURRENT_CHARTS", CURRENT.replace("\n", " ") + ".length")
# the shape flow's tensor, drawn for the current run, has `m` among its tick labels
TENSOR_SHOWS = f"""(m) => {CURRENT}.some(p => (p.querySelector('.gtitle') || {{}}).textContent?.includes(', head ')
    && [...p.querySelectorAll('.xtick text, .ytick text')].some(t => t.textContent === m))"""


async def settle(page, timeout_s: float, first_s: float = 0.5) -> None:
    """Wait until the page's script run has ended (Streamlit's running indicator is gone)."""
    await asyncio.sleep(first_s)
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if await page.locator('[data-testid="stStatusWidget"]').count() == 0:
            await asyncio.sleep(0.3)  # and stays gone
            if await page.locator('[data-testid="stStatusWidget"]').count() == 0:
                return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the page still ran after {timeout_s:.0f} s")


async def visit(page, url: str, timeout_s: float) -> None:
    await page.goto(url, timeout=timeout_s * 1000)
    await page.wait_for_selector('[data-testid="stMain"]', timeout=timeout_s * 1000)
    await settle(page, timeout_s, first_s=1.0)


async def hostile_case(page, name: str, action, timeout_s: float, start: float) -> dict:
    """Run one hostile action and record what its visitor saw."""
    from playwright.async_api import Error as PlaywrightError

    began, failed = time.perf_counter(), None
    try:
        await action()
    except (PlaywrightError, TimeoutError) as err:
        failed = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    ended = time.perf_counter()
    try:
        seen = await page.evaluate(SEEN)
    except PlaywrightError as err:
        seen = {
            "messages": [],
            "uploader": [],
            "exceptions": [],
            "traceback": False,
            "charts": 0,
            "unreadable": str(err).splitlines()[0][:160],
        }
    return {"name": name, "from_s": began - start, "to_s": ended - start, "failed": failed, **seen}


SUITE_LINE = (
    json.dumps(
        {
            "text": "The trophy does not fit in the suitcase because it is too big.",
            "pronoun": "it",
            "candidates": ["trophy", "suitcase"],
            "answer": "trophy",
        }
    )
    + "\n"
)
# The stranger's browser makes the file itself and drops it on the upload box, as a laptop picks one from
# its own disk: handed over by Playwright, 5 MB would cross the one browser process every page of the
# room goes through, and hold up their websocket frames for seconds (a cost of this bench, not the server's).
SUITE_INPUT = '[data-testid="stMain"] input[type=file]'  # the coreference upload (the sidebar has a long text's)
DROP_SUITE = """([line, mb, selector]) => {
    const file = new File([line.repeat(Math.ceil(mb * 1024 * 1024 / line.length))], "hostile-suite.jsonl",
                          {type: "application/jsonl"});
    const input = document.querySelector(selector);
    const files = new DataTransfer();
    files.items.add(file);
    input.files = files.files;
    input.dispatchEvent(new Event("change", {bubbles: true}));
    return file.size;
}"""


async def heavy_stranger(page, url: str, word: str, timeout_s: float, start: float) -> list[dict]:
    """512 tokens through the shape flow with the padded batch; the same sentence linked into attention
    flow; then the heaviest flow the app computes."""
    long_text = (word + " ") * LONG_TOKENS
    flow_link = f"{url}/?view=rollout&derived=flow&layer=5&s="

    async def shape_flow():
        await page.get_by_label("Sentence", exact=True).fill(long_text, timeout=timeout_s * 1000)
        await page.get_by_role("button", name="Run").click(timeout=timeout_s * 1000)
        await page.wait_for_function(TENSOR_SHOWS, arg=word, polling=100, timeout=timeout_s * 1000)
        await settle(page, timeout_s)

    cases = [
        (f"{LONG_TOKENS + 2}-token sentence in the shape flow view, padded batch", shape_flow),
        (
            f"the same {LONG_TOKENS + 2} tokens linked into attention flow (?view=rollout&derived=flow)",
            lambda: visit(page, flow_link + "+".join(long_text.split()), timeout_s),
        ),
        (
            f"the heaviest flow offered: {FLOW_WORDS + 2} tokens, last layer",
            lambda: visit(page, flow_link + "+".join([word] * FLOW_WORDS), timeout_s),
        ),
    ]
    return [await hostile_case(page, name, action, timeout_s, start) for name, action in cases]


async def upload_stranger(page, url: str, timeout_s: float, start: float) -> list[dict]:
    """A 5 MB suite upload, then links to models outside the server's list."""
    size = -(-UPLOAD_MB * 1024 * 1024 // len(SUITE_LINE)) * len(SUITE_LINE)  # bytes of the file, as made below

    async def upload():
        await page.locator(SUITE_INPUT).wait_for(state="attached", timeout=timeout_s * 1000)
        made = await page.evaluate(DROP_SUITE, [SUITE_LINE, UPLOAD_MB, SUITE_INPUT])
        assert made == size, (made, size)
        await settle(page, timeout_s, first_s=2.0)

    steps = [await hostile_case(page, f"a {size / 1e6:.1f} MB coreference suite uploaded", upload, timeout_s, start)]
    for source in LOCKED_OUT:
        steps.append(
            await hostile_case(
                page,
                f"a locked-out model linked: ?model={source}",
                lambda s=source: visit(page, f"{url}/?model={s}", timeout_s),
                timeout_s,
                start,
            )
        )
    return steps
