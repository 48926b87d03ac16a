"""The load bench's rig (bench/load.py; bench/README.md says why each part is there): the server's memory
and everyone's CPU read from /proc, Linux's autogroup off for a run, the strangers' idle-priority Chromium,
and what the report says of the machine and the server."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

SAMPLE_EVERY_S = 0.2

# ---- the server's memory and everyone's CPU ------------------------------------------------------


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
            total += sum(
                int(line.split()[1])
                for line in Path(f"/proc/{p}/status").read_text().splitlines()
                if line.startswith("VmRSS:")
            )  # kB
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
        return (
            f"CPU used: server {server:.1f} s, Chromium {others:.1f} s"
            + (f", the strangers' Chromium {apart:.1f} s" if self.strangers else "")
            + (f", the laptops' clients (this driver) {driver:.1f} s" if self.laptops else "")
            + f", of {os.cpu_count() * wall:.1f} s ({os.cpu_count()} CPUs x {wall:.1f} s)"
        )


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

    async def settled(self, wait_s: float, window_s: float) -> float:
        """Median RSS over the last `window_s` of a `wait_s` pause with no traffic."""
        await asyncio.sleep(wait_s)
        start = time.perf_counter() - window_s
        return statistics.median(mb for t, mb in self.samples if t >= start)


# ---- priorities across the machine ---------------------------------------------------------------

AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


@contextlib.contextmanager
def machine_wide_priorities():
    """Linux's autogroup off for the block where this user may turn it off, and back as it was after;
    yields a line saying how priorities compare on this run."""
    # With autogroup on, the strangers' idle browser and the server's nice-19 work each took a session's
    # share of the cores: the storm's slowest submission took 5.6 s, and 4.3 s with it off (bench/README.md).
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
        yield (
            "Linux's autogroup is ON and this user may not turn it off (root may): priorities count only "
            "inside each session, so the server's long computations take a session's share from the "
            "room's browsers here, which they do not in a room (expect slower figures; the strangers' "
            "browser is put at the lowest group priority)"
        )
        return
    try:
        yield (
            "Linux's autogroup turned off for this run (it was on) and back on after: priorities compare "
            "across all the machine's processes, as on a server serving a room alone"
        )
    finally:
        AUTOGROUP.write_text(before)


async def launch_idle(playwright, chromium: str, args: list[str], folder: Path) -> tuple[object, int]:
    """A Chromium whose every process runs at the idle scheduling priority (it gets a core only when
    nothing else wants one), and its pid."""
    wrapper, pid_file = folder / "chromium-idle", folder / "chromium-idle.pid"
    # with autogroup on, the session Playwright started it in gets the lowest group priority
    wrapper.write_text(
        f'#!/bin/sh\necho $$ > "{pid_file}"\necho 19 > /proc/self/autogroup 2>/dev/null\n'
        f'exec chrt --idle 0 "{chromium}" "$@"\n'
    )
    wrapper.chmod(0o755)
    browser = await playwright.chromium.launch(executable_path=str(wrapper), args=args)
    return browser, int(pid_file.read_text())


# ---- reporting ------------------------------------------------------------------------------------


def health(url: str) -> str:
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=10) as reply:
            return f"{reply.status} {reply.read().decode(errors='replace').strip()}"
    except OSError as err:
        return f"no answer ({type(err).__name__})"


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    torch_version = (
        subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "?"
    )
    return (
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; {os.cpu_count()} CPUs ({cpu}); "
        f"Python {platform.python_version()}, torch {torch_version}, "
        f"streamlit {importlib.metadata.version('streamlit')}"
    )


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())
