"""The Chromium timing rig of bench/render.py and bench/overview.py: every websocket frame the page receives,
and when a view's charts are redrawn for new input and painted, on the page's own clock."""

from __future__ import annotations

import time

SUBMIT_TIMEOUT = 60  # seconds from a click on Run to its page drawn


class Frames:
    """Every websocket frame the page receives: arrival time, size and Streamlit message type."""

    def __init__(self) -> None:
        self.log: list[tuple[float, int, str]] = []

    def attach(self, ws) -> None:
        ws.on("framereceived", self._received)

    def _received(self, payload) -> None:
        from google.protobuf.message import DecodeError
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        data = payload if isinstance(payload, bytes) else payload.encode()
        try:
            kind = ForwardMsg.FromString(data).WhichOneof("type") or "?"
        except DecodeError:
            kind = "?"
        self.log.append((time.perf_counter(), len(data), kind))

    def finished_after(self, start: float) -> float | None:
        """When the first script run to end after `start` ended (its script_finished message)."""
        return next((t for t, _, kind in self.log if t >= start and kind == "script_finished"), None)

    def bytes_since(self, start: float) -> int:
        """Bytes received from `start` up to and including the end of the script run."""
        total = 0
        for t, size, kind in self.log:
            if t >= start:
                total += size
                if kind == "script_finished":
                    break
        return total


# Tag every trace drawn so far, and note the time of the next click: a chart redrawn for new
# input has fresh trace objects (Streamlit parses each figure anew), so untagged means redrawn.
MARK = """() => {
    document.querySelectorAll('.js-plotly-plot').forEach(g => (g.data || []).forEach(t => { t.__old = true; }));
    window.__clicked = null;
    document.addEventListener('click', () => { window.__clicked = performance.now(); }, {capture: true, once: true});
}"""
DRAWN = """({view, layers, heads, fresh}) => {
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    const ticks = (g, axis) => [...g.querySelectorAll(`.${axis}tick text`)].map(t => t.textContent).join(',');
    const title = g => (g.querySelector('.gtitle') || {}).textContent || '';
    const drawn = g => g && g._fullData && g.data && g.data.length > 0 && !g.data.some(t => t.__old)
        && g._fullData.every(t => g.data.includes(t._input));
    const chart = view === 'head' ? plots.find(g => title(g).startsWith('Layer '))
        : plots.find(g => ticks(g, 'x') === heads && ticks(g, 'y') === layers);
    return drawn(chart) && chart.querySelector('.hm image') !== null && (!fresh || drawn(plots[0]));
}"""
PAINT = """() => { window.__painted = null;
    requestAnimationFrame(() => setTimeout(() => { window.__painted = performance.now(); }, 0)); }"""


def wait_painted(page, timeout_s: float) -> float:
    """Wait for the next frame to be painted; its time on the page's clock (ms)."""
    page.evaluate(PAINT)
    return page.wait_for_function("() => window.__painted", timeout=timeout_s * 1000).json_value()


def wait_view(page, frames: Frames, view: str, labels: dict, since: float, fresh: bool, timeout_s: float) -> None:
    """Wait until the script run begun at `since` has finished and the view's charts are redrawn."""
    deadline = time.perf_counter() + timeout_s
    arg = {"view": view, "fresh": fresh, **labels}
    while True:
        page.wait_for_function(DRAWN, arg=arg, polling="raf", timeout=max(1, deadline - time.perf_counter()) * 1000)
        if frames.finished_after(since) is not None and page.evaluate(DRAWN, arg):
            return
        if time.perf_counter() > deadline:
            raise TimeoutError("the script run did not finish")
        page.wait_for_timeout(10)


def submit(page, frames: Frames, text: str, view: str, labels: dict) -> tuple[float, int, float]:
    """Type `text`, click Run. Returns seconds from the click to the settled, painted page; bytes
    received; and seconds from the script run's end reaching the page to that paint (drawing)."""
    page.get_by_label("Sentence", exact=True).fill(text)
    page.evaluate(MARK)
    since = time.perf_counter()
    page.get_by_role("button", name="Run").click()
    wait_view(page, frames, view, labels, since, fresh=True, timeout_s=SUBMIT_TIMEOUT)
    painted = wait_painted(page, SUBMIT_TIMEOUT)
    drawing = time.perf_counter() - frames.finished_after(since)
    clicked = page.evaluate("() => window.__clicked")
    return (painted - clicked) / 1000, frames.bytes_since(since), drawing
