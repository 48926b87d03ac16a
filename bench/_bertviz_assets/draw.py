"""bertviz's model view drawn in Debian's Chromium, one fresh browser per page, bounded in time and memory.

Its pages grow as L² per head and the whole page is drawn as SVG lines in one synchronous task,
so a large input can take minutes, many gigabytes, or crash the renderer: each of those is an
outcome to report, not an error of the benchmark.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from browser import launch  # tests/helpers/browser.py: Debian's Chromium with the flags the tests use

from . import ASSETS, cdn_paths, fetch_assets, route_cdn, serve, write_model_views

MEMORY_SHARE = 0.75  # of the memory available when a case starts: past it, the case is stopped
# every thumbnail (one <g> per head) is appended in the same task, so all present means all drawn
DRAWN = """(n) => { const svg = document.querySelector('#vis svg');
    return svg !== null && [...svg.children].filter(c => c.tagName === 'g').length === n; }"""
PAINT = """() => { window.__painted = null;
    requestAnimationFrame(() => setTimeout(() => { window.__painted = performance.now(); }, 0)); }"""


@dataclass
class Case:
    tokens: int
    page_bytes: int
    build_s: float  # transformers forward + model_view(html_action="return")
    draw_s: float | None = None  # page load to the model view drawn and painted
    outcome: str = ""  # why it was not drawn ("> 240 s", "renderer crashed after 21 s", ...), or notes
    at_least_s: float | None = None  # set when it was not drawn within the timeout
    peak_bytes: int = 0  # resident memory of the browser's processes, summed

    skipped: bool = False  # not drawn, because a smaller page of the same run was not drawn either

    @property
    def short(self) -> str:
        """The outcome in a few characters, for a table cell; * when not drawn but implied."""
        if self.draw_s is not None:
            return f"{self.draw_s:.2f}"
        if self.skipped:
            return self.outcome.split(" (")[0] + "*"
        return self.outcome.split(" after")[0].replace("renderer ", "")[:12]


def descendants() -> list[int]:
    """Ids of every process started from this one (the Playwright driver, Chromium, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def meminfo_bytes(path: str, field: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


class MemoryGuard(threading.Thread):
    """Track the resident memory of this process's descendants; past `limit`, kill our Chromium."""

    def __init__(self, limit: int) -> None:
        super().__init__(daemon=True)
        self.limit, self.peak, self.tripped = limit, 0, False
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            pids = descendants()
            used = sum(meminfo_bytes(f"/proc/{pid}/status", "VmRSS:") for pid in pids)
            self.peak = max(self.peak, used)
            if used > self.limit:
                self.tripped = True
                for pid in pids:
                    with contextlib.suppress(OSError):
                        if "chrom" in Path(f"/proc/{pid}/comm").read_text():
                            os.kill(pid, signal.SIGKILL)
                return


def draw(pw, url: str, base_url: str, thumbnails: int, timeout_s: float, case: Case) -> None:
    """Load one model view page in a fresh Chromium and fill in case.draw_s or case.outcome."""
    from playwright.sync_api import Error as PlaywrightError

    browser = launch(pw)
    page, blocked, errors, crashed = browser.new_page(), [], [], []
    route_cdn(page, base_url, blocked)
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("crash", lambda _: crashed.append(time.perf_counter()))
    guard = MemoryGuard(limit=int(meminfo_bytes("/proc/meminfo", "MemAvailable:") * MEMORY_SHARE))
    guard.start()
    start = time.perf_counter()

    def left_ms() -> float:
        return max(1.0, timeout_s - (time.perf_counter() - start)) * 1000

    try:
        page.goto(url, wait_until="commit", timeout=left_ms())
        page.wait_for_function(DRAWN, arg=thumbnails, polling=250, timeout=left_ms())
        page.evaluate(PAINT)
        page.wait_for_function("() => window.__painted", timeout=left_ms())
        case.draw_s = time.perf_counter() - start
    except PlaywrightError as err:
        elapsed = time.perf_counter() - start
        if guard.tripped:
            case.outcome = f"stopped at {guard.limit / 2**30:.1f} GB of memory after {elapsed:.0f} s"
        elif crashed or "crash" in str(err).lower():
            case.outcome = f"renderer crashed after {(crashed[0] if crashed else time.perf_counter()) - start:.0f} s"
        elif "Timeout" in str(err):
            case.outcome, case.at_least_s = f"> {timeout_s:.0f} s", timeout_s
        else:
            case.outcome = "error: " + str(err).splitlines()[0]
    finally:
        guard.done.set()
        guard.join()
        browser.close()
    case.peak_bytes = guard.peak
    notes = errors[:1] + [f"blocked {u}" for u in blocked[:2]]
    case.outcome = "; ".join(filter(None, [case.outcome, *notes]))


def skip(case: Case, failed: Case, timeout_s: float) -> None:
    """Mark a page as not drawn because the smaller `failed` one was not drawn either."""
    implied = f"> {timeout_s:.0f} s" if failed.at_least_s else "not drawn"
    case.outcome = (f"{implied} (not drawn: the {failed.tokens}-token page, {failed.page_bytes / case.page_bytes:.0%} "
                    f"of this one, already ended in '{failed.outcome}')")
    case.skipped, case.at_least_s = True, failed.at_least_s


def measure(model_path: str, texts: dict[int, str], thumbnails: int, timeout_s: float, progress,
            draw_all: bool = False) -> dict[int, Case]:
    """Build each text's model view page (in a child process), then draw each in Chromium.

    Texts go from short to long. Once a page is not drawn in time, the longer ones are not drawn
    (unless draw_all): they hold every line of it and more, so they cannot be faster, and each
    would cost another timeout and many gigabytes of memory.
    """
    from playwright.sync_api import sync_playwright

    cases: dict[int, Case] = {}
    with tempfile.TemporaryDirectory(prefix="bertviz-bench-") as tmp:
        folder = Path(tmp)
        fetch_assets(folder)
        progress("bertviz: assets fetched from npm; building pages")
        spawn = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            built = pool.submit(write_model_views, model_path, texts, tmp).result()
        first = (folder / f"model_view_{min(texts)}.html").read_bytes()[:20_000].decode(errors="replace")
        unknown = cdn_paths(first) - set(ASSETS)
        if unknown:
            progress(f"bertviz asks for CDN files this benchmark does not serve: {sorted(unknown)}")
        with serve(folder) as base_url, sync_playwright() as pw:
            failed = None
            for key, (tokens, size, build_s) in sorted(built.items(), key=lambda item: item[1][0]):
                case = cases[key] = Case(tokens, size, build_s)
                if failed is not None and not draw_all:
                    skip(case, failed, timeout_s)
                else:
                    draw(pw, f"{base_url}/model_view_{key}.html", base_url, thumbnails, timeout_s, case)
                    failed = failed or (case if case.draw_s is None else None)
                (folder / f"model_view_{key}.html").unlink()
                progress(f"bertviz {tokens} tokens: {size / 1e6:.1f} MB, "
                         + (f"{case.draw_s:.1f} s" if case.draw_s is not None else case.outcome))
    return cases
