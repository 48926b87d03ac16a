"""The load bench's ordinary sessions (bench/load.py; bench/README.md says why the room is built so): a
Chromium page on this machine, timed by the page's clock, and laptops, websocket clients that speak
Streamlit's protocol to the app and draw nothing. Each submits a sentence with its marker word and
checks that it shows its own marker and no other session's."""

from __future__ import annotations

import asyncio
import json
import re
import time

# ---- what a page shows (scripts run in the page) --------------------------------------------------

# Charts of the current run; Streamlit keeps a faded copy (data-stale="true") of an element from the
# previous run beside its replacement until the run ends.
CURRENT = """[...document.querySelectorAll('.js-plotly-plot')]
    .filter(p => p.closest('[data-stale="true"]') === null)"""
HEAD_LABELS = f"""() => {{
    const head = {CURRENT}.find(p => (p.querySelector('.gtitle') || {{}}).textContent?.startsWith('Layer '));
    return head ? [...head.querySelectorAll('.xtick text')].map(t => t.textContent) : null;
}}"""
HAS_LABEL = f"(m) => ({HEAD_LABELS})()?.includes(m)"
# Resolves once the head heatmap shows `m`, checked on every change of the DOM (not polled), with the
# page's clock two animation frames later: when the frame showing `m` was made, not when this driver
# hears of it.
LABEL_SHOWN = f"""(m) => new Promise(resolve => {{
    const has = {HAS_LABEL};
    const drawn = () => requestAnimationFrame(() => requestAnimationFrame(() => resolve(Date.now())));
    if (has(m)) return drawn();
    const watch = new MutationObserver(() => {{ if (has(m)) {{ watch.disconnect(); drawn(); }} }});
    watch.observe(document.body, {{childList: true, subtree: true, characterData: true}});
}})"""
CHART_WORDS = """() => [...document.querySelectorAll('.js-plotly-plot')].map((p, i) => [
    (p.closest('[data-testid="stElementContainer"]')?.className.match(/st-key-(\\S+)/) || [0, `chart ${i}`])[1]
        + (p.closest('[data-stale="true"]') ? ', faded copy from the previous run' : ''),
    [...p.querySelectorAll('text')].flatMap(t => t.textContent.split(/\\s+/)).filter(Boolean)])"""
ERRORS = """() => [...document.querySelectorAll('[data-testid="stException"], [data-testid="stAlertContentError"]')]
    .map(e => e.innerText.trim().slice(0, 200))"""
DRIVER_LAG: list[float] = []  # per page submission: seconds from the page drawing it to this driver hearing


class Page:
    """An ordinary session in a Chromium page on this machine, drawing included: a submission is timed
    from pressing Run to the frame that shows its marker, by the page's clock."""

    kind = "page"

    def __init__(self, page):
        self.page, self.frames, self.clicked, self.heard = page, [], None, None
        page.on("websocket", lambda ws: ws.on("framereceived", lambda _: self.frames.append(time.perf_counter())))

    @classmethod
    async def open(cls, browser, url: str, timeout_s: float) -> Page:
        context = await browser.new_context(viewport={"width": 1500, "height": 1100})
        self = cls(await context.new_page())
        ms = timeout_s * 1000
        await self.page.goto(url, timeout=ms)
        await self.page.wait_for_function(HAS_LABEL, arg="animal", polling=100, timeout=ms)
        # The box edited once and left as it was (no run: it is in a form): a page's first edit costs its
        # browser 0.2-0.4 CPU-s once, which would otherwise land in the first timed submission.
        box = self.page.get_by_label("Sentence", exact=True)
        typed = await box.input_value(timeout=ms)
        await box.fill(typed + ".", timeout=ms)
        await box.fill(typed, timeout=ms)
        await self.page.get_by_role("button", name="Run").wait_for(timeout=ms)
        return self

    async def submit(self, text: str, marker: str, timeout_s: float, barrier=None) -> float | None:
        """Type `text`, press Run, wait for `marker` on the head heatmap: the seconds from pressing Run
        to the frame that shows it (None if it never came, or the page could not be used)."""
        # playwright's Error covers its TimeoutError too
        from playwright.async_api import Error as PlaywrightError

        ms = timeout_s * 1000
        try:
            await self.page.get_by_label("Sentence", exact=True).fill(text, timeout=ms)
            typed = True
        except PlaywrightError:
            typed = False
        if barrier is not None:
            await barrier.wait()  # the others wait here even if this one could not type
        self.clicked, pressed = time.perf_counter(), time.time()
        if not typed:
            return None
        try:
            await self.page.get_by_role("button", name="Run").click(timeout=ms)
            drawn = await asyncio.wait_for(self.page.evaluate(LABEL_SHOWN, marker), timeout_s) / 1000
        except (PlaywrightError, TimeoutError):
            return None
        self.heard = time.perf_counter()
        DRIVER_LAG.append(time.time() - drawn)
        return drawn - pressed

    def served_s(self) -> float | None:
        """The last submission's server's part: pressing Run -> the last websocket frame heard before the
        marker was drawn (frames are timed as this driver hears of them)."""
        if self.clicked is None or self.heard is None:
            return None
        return max((t - self.clicked for t in self.frames if self.clicked <= t <= self.heard), default=None)

    async def shown(self, words: set[str]) -> list[str]:
        """Which of `words` the page's charts show, as "word (in chart)"."""
        return sorted(
            f"{w} (in {title})" for title, found in await self.page.evaluate(CHART_WORDS) for w in set(found) & words
        )

    async def checked(self, name: str, own: str, previous: set[str], foreign: set[str]) -> list[str]:
        """Its marker missing from its heatmap, another session's marker on any chart, or its previous
        sentence still drawn other than as a faded copy, or 3 s later."""
        labels = await self.page.evaluate(HEAD_LABELS) or []
        problems = [] if own in labels else [f"{name}: its marker '{own}' is not on its heatmap (labels {labels})"]
        leaked = await self.shown(foreign - {own})
        if leaked:
            problems.append(f"ISOLATION VIOLATED: {name} (marker '{own}') shows {leaked}; heatmap labels {labels}")
        stale = await self.shown(previous - {own})
        if stale:
            await asyncio.sleep(3)
            later = await self.shown(previous - {own})
            if later or not all("faded copy" in s for s in stale):
                problems.append(
                    f"{name}: '{own}' on the heatmap while {stale} still drawn"
                    f"{'; STILL there 3 s later' if later else '; gone 3 s later'}"
                )
        return problems

    async def error_boxes(self) -> list[str]:
        return await self.page.evaluate(ERRORS)

    async def close(self) -> None:
        await self.page.context.close()


# ---- the laptops ----------------------------------------------------------------------------------


def chart_words(spec: dict) -> set[str]:
    """The words a plotly figure's traces and axis labels show (its template and colours left out)."""
    found: set[str] = set()

    def strings(value) -> None:
        if isinstance(value, str):
            found.update(w for w in re.split(r"[\s·]+", value) if w)
        elif isinstance(value, dict):
            for v in value.values():
                strings(v)
        elif isinstance(value, list):
            for v in value:
                strings(v)

    strings(spec.get("data", []))
    for name, axis in spec.get("layout", {}).items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            strings(axis.get("ticktext", []))
    return found


class Laptop:
    """An ordinary session whose browser draws on a laptop of its own: a websocket client that sends
    what the app's page sends (opening the app; the sentence form's text with its Run button pressed)
    and reads the server's answer, Streamlit's protobuf messages, drawing nothing. Every chart of a run
    is read for other sessions' marker words, and every error element kept."""

    kind = "laptop"

    def __init__(self, url: str):
        self.url, self.ws = url, None
        self.ids: dict[str, str] = {}  # the sentence box's and the Run button's widget ids
        self.heatmap: list[str] = []  # the head heatmap's x tick labels, as last sent
        self.words: dict[str, set[str]] = {}  # chart -> its words, for this session's last run
        self.errors: list[str] = []  # of its last run
        self.seen_errors: list[str] = []  # of every run checked

    async def open(self, timeout_s: float) -> None:
        import websockets

        ws_url = "ws" + self.url.removeprefix("http") + "/_stcore/stream"
        self.ws = await websockets.connect(
            ws_url, subprotocols=["streamlit"], origin=self.url, max_size=None, open_timeout=timeout_s
        )
        await asyncio.wait_for(self.run(None, None), timeout_s)
        missing = {"text", "run"} - set(self.ids)
        if missing:
            raise RuntimeError(f"the app's page has no {' or '.join(sorted(missing))} widget")

    def rerun(self, text: str | None) -> bytes:
        """The BackMsg of opening the app (text None) or of the sentence form submitted with `text`."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        back = BackMsg()
        back.rerun_script.query_string = ""
        if text is not None:
            box, run = (back.rerun_script.widget_states.widgets.add() for _ in range(2))
            box.id, box.string_value = self.ids["text"], text
            run.id, run.trigger_value = self.ids["run"], True
        return back.SerializeToString()

    async def run(self, text: str | None, marker: str | None) -> float | None:
        """One script run, read to its end. Returns the seconds to the heatmap showing `marker` (None if
        it did not)."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.words, self.errors, shown = {}, [], None
        start = time.perf_counter()
        await self.ws.send(self.rerun(text))
        while True:
            msg = ForwardMsg.FromString(await self.ws.recv())
            kind = msg.WhichOneof("type")
            if kind == "script_finished":
                return shown
            if (
                kind == "delta"
                and msg.delta.WhichOneof("type") == "new_element"
                and self.read(msg.delta.new_element, marker)
                and shown is None
            ):
                shown = time.perf_counter() - start

    def read(self, element, marker: str | None) -> bool:
        """Take in one element of a run; whether it is the head heatmap showing `marker`."""
        what = element.WhichOneof("type")
        body = getattr(element, what)
        if what == "text_area" and body.label == "Sentence":
            self.ids["text"] = body.id
        elif what == "button" and body.label == "Run" and body.is_form_submitter:
            self.ids["run"] = body.id
        elif what == "exception":
            self.errors.append(f"exception box: {body.type}")
        elif what == "alert" and body.format == body.ERROR:
            self.errors.append(body.body[:200])
        elif what == "plotly_chart":
            spec = json.loads(body.spec)
            self.words[body.id] = chart_words(spec)
            title = spec.get("layout", {}).get("title", {})
            if isinstance(title, dict) and str(title.get("text", "")).startswith("Layer "):
                self.heatmap = list(spec["layout"].get("xaxis", {}).get("ticktext", []))
                return marker in self.heatmap
        return False

    async def submit(self, text: str, marker: str, timeout_s: float, barrier=None) -> float | None:
        """Seconds from sending the press of Run to the message bringing the heatmap with `marker`."""
        from websockets.exceptions import WebSocketException

        if barrier is not None:
            await barrier.wait()
        try:
            return await asyncio.wait_for(self.run(text, marker), timeout_s)
        except (TimeoutError, OSError, WebSocketException) as err:  # its connection closed, say
            self.errors.append(f"no answer: {type(err).__name__}")
            return None

    def served_s(self) -> None:
        """None: a laptop's whole answer is the server's part."""

    def check(self, name: str, own: str, foreign: set[str]) -> list[str]:
        """Its marker missing from its heatmap, another session's marker on any chart."""
        missing = f"{name}: its marker '{own}' is not on its heatmap (labels {self.heatmap})"
        problems = [] if own in self.heatmap else [missing]
        leaked = sorted(
            f"{w} (in {chart.rsplit('-', 1)[-1]})"
            for chart, words in self.words.items()
            for w in words & (foreign - {own})
        )
        if leaked:
            problems.append(
                f"ISOLATION VIOLATED: {name} (marker '{own}') was sent {leaked}; heatmap labels {self.heatmap}"
            )
        return problems

    async def checked(self, name: str, own: str, previous: set[str], foreign: set[str]) -> list[str]:
        self.seen_errors += self.errors
        return self.check(name, own, foreign)

    async def error_boxes(self) -> list[str]:
        return self.seen_errors

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
