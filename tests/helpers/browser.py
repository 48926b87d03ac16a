"""Start the app on loopback and open it in Debian's Chromium (shared by browser tests and benchmarks)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server_process(log, timeout: float = 120, env: dict[str, str] | None = None):
    """`streamlit run app.py` on a free loopback port, its output written to `log` (a readable binary
    file, not a pipe: an unread pipe fills up and stalls the server); yields (process, url). `env`
    adds to the environment (e.g. the server's model list, ui/serve/sources.py)."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless=true",
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--browser.gatherUsageStats=false",
            "--server.fileWatcherType=none",
        ],  # an edit to the code during a run must not offer a rerun
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=1)
                break
            except OSError as err:
                if proc.poll() is not None or time.time() > deadline:
                    log.seek(0)
                    raise RuntimeError("the app did not start:\n" + log.read().decode(errors="replace")) from err
                time.sleep(0.25)
        yield proc, url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def app_server(timeout: float = 120, env: dict[str, str] | None = None):
    """The app on loopback with its output in a temporary file; yields its URL."""
    with tempfile.TemporaryFile() as log, server_process(log, timeout, env) as (_, url):
        yield url


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


class SharedContext:
    """Chromium whose `new_page`s share one browser context (a profile: its HTTP and code caches), as the tabs of
    one person's browser do. A new context per page parsed the app's scripts from scratch each time: 2.35 s a
    page drawn against 2.75 s (median of four, tests/helpers/browser.py's pages on an idle 2-core machine). Each
    page is still a session of its own; `new_context` (a fresh browser: no cookies, no cache) is Chromium's."""

    def __init__(self, chromium):
        self.chromium, self.context = chromium, chromium.new_context()

    def new_page(self, viewport: dict[str, int] | None = None):
        page = self.context.new_page()
        if viewport is not None:
            page.set_viewport_size(viewport)
        return page

    def __getattr__(self, name: str):
        return getattr(self.chromium, name)


@contextlib.contextmanager
def served_chromium(env: dict[str, str] | None = None):
    """The app on loopback (`app_server`, with `env`) and Debian's Chromium beside it: yields (chromium, url),
    and closes both after; its pages share one context (`SharedContext`). A test module's browser fixture is
    this, held for the module."""
    from playwright.sync_api import sync_playwright

    with app_server(env=env) as url, sync_playwright() as pw:
        chromium = launch(pw)
        try:
            yield SharedContext(chromium), url
        finally:
            chromium.close()


SCRIPT_STATE = "document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state')"


def wait_settled(page, timeout: float = 60) -> None:
    """Wait, `timeout` seconds at most (a suite being scored runs on), until the script has finished running and
    no chart is still drawing. The page's own script state (stApp's data-test-script-state, running while the
    server runs the script) is read first, not only the status widget: the widget shows a run after a delay, so
    on a loaded machine a wait that saw no widget returned before the run a click had asked for ended
    (Renormalise rows still disabled 30 s after Hide was ticked, busy.py 3)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.time() + timeout
    time.sleep(0.3)
    with contextlib.suppress(PlaywrightTimeout):  # the status widget's wait below gives up the same way
        page.wait_for_function(f"() => {SCRIPT_STATE} === 'notRunning'", timeout=timeout * 1000)
    while time.time() < deadline:
        if page.locator('[data-testid="stStatusWidget"]').count() == 0:
            break
        time.sleep(0.1)
    page.wait_for_load_state("networkidle")
