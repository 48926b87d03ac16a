"""Attention flow's max-flow problems in worker processes at the lowest CPU priority.

scipy's maximum_flow keeps Python's interpreter lock while it runs, and the heaviest flow the app offers
runs thousands of them (about 7 s here). In the server's process that would hold up every other
session's Python; lowering the thread's priority would make it worse, as a thread that waits for a core
while it holds the lock holds up everyone (ui/priority.py's KernelsLow). A worker process
(attention/analysis/maxflow.py, run as a script) shares no lock with the server and lowers its own
priority, which needs no privilege. Only numbers cross its pipes.
"""
from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from attention.analysis import maxflow

from .settings import HEAVY_SLOTS
from .stores import kept

log = logging.getLogger(__name__)
WORKER_NICE = 19  # the lowest priority: the worker takes the cores the room's requests leave


class FlowWorkers:
    """Worker processes for attention flow, started when first needed; up to `keep` idle ones are kept
    for the next flow (each holds numpy and scipy, about 60 MB)."""

    def __init__(self, keep: int):
        self.keep = keep
        self.idle: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.started = 0  # worker processes started so far

    def start(self) -> subprocess.Popen:
        # -P: the worker's folder is not put on its path, so it imports numpy and scipy only
        proc = subprocess.Popen([sys.executable, "-P", str(Path(maxflow.__file__)), "--nice", str(WORKER_NICE)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.started += 1
        return proc

    def take(self) -> subprocess.Popen:
        with self.lock:
            while self.idle:
                proc = self.idle.pop()
                if proc.poll() is None:
                    return proc
        return self.start()

    def give_back(self, proc: subprocess.Popen) -> None:
        with self.lock:
            if proc.poll() is None and len(self.idle) < self.keep:
                self.idle.append(proc)
                return
        stop(proc)

    def solve_rows(self, capacity: np.ndarray, rows: list[tuple[int, int]]) -> Iterator[np.ndarray]:
        """maxflow.flow_rows, solved by a worker: each row as it comes. Stopped early (a time limit, a
        rerun), the worker is stopped too, as it would go on solving rows no one reads. Where no worker
        can start, or one stops before its first answer, the rows are solved in this thread."""
        try:
            proc = self.take()
        except OSError as err:
            log.warning("attention flow is solved in the server's process: no worker process starts (%s)", err)
            yield from maxflow.flow_rows(capacity, rows)
            return
        answered = 0
        try:
            maxflow.send_request(proc.stdin, capacity, rows)
            for _ in rows:
                row = maxflow.read_row(proc.stdout, capacity.shape[1])
                answered += 1
                yield row
        except OSError as err:
            if answered:
                raise
            log.warning("attention flow is solved in the server's process: its worker stopped (%s)", err)
            yield from maxflow.flow_rows(capacity, rows)
        finally:
            if answered == len(rows):
                self.give_back(proc)
            else:
                stop(proc)


def stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        try:
            pipe.close()
        except OSError:  # the pipe broke with the process
            pass


@kept()
def flow_workers() -> FlowWorkers:
    """One set per server: as many idle workers kept as flows may run at once."""
    return FlowWorkers(HEAVY_SLOTS)
