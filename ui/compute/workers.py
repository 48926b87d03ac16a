"""Attention flow's max-flow problems in worker processes at the lowest CPU priority.

scipy's maximum_flow keeps Python's interpreter lock while it runs, and the heaviest flow the app offers
runs thousands of them (about 7 s here). In the server's process that would hold up every other
session's Python; lowering the thread's priority would make it worse, as a thread that waits for a core
while it holds the lock holds up everyone (ui/compute/priority.py's KernelsLow). A worker process shares no lock
with the server and lowers its own priority, which needs no privilege.

The workers are one `ProcessPoolExecutor` per server process, started when first needed; a visitor's
clear_cache does not reach it. They start from a forkserver, not by forking the server (whose torch
threads a fork would copy in the middle of their work), and this module imports neither torch nor
streamlit. multiprocessing has each worker import the page, app.py, as its main module (__mp_main__),
which starts no warm-up there: a worker holds numpy, scipy and streamlit, 96 MB under `python -m
streamlit run app.py` (439 MB when the page's import warmed up in it too). Each worker ends with the
server's process (`exit_with`).
"""

from __future__ import annotations

import importlib.util
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)
WORKER_NICE = 19  # the lowest priority: the workers take the cores the room's requests leave
# A flow's rows go to the workers this many at a time (about 0.4 s at 64 tokens here): a flow stopped
# midway cancels the chunks not yet begun, and its workers stop within about a chunk.
CHUNK_ROWS = 4
SERVER_CHECK_S = 1.0  # how often a worker looks whether the server's process is still there
# Loaded by its path in a worker: imported as attention.analysis.maxflow it would bring the attention
# package and torch (1.2 s and 225 MB against 0.4 s and 60 MB for numpy and scipy).
MAXFLOW = Path(__file__).resolve().parents[2] / "attention" / "analysis" / "maxflow.py"
_maxflow = None  # in a worker: attention/analysis/maxflow.py, loaded by start_worker


def start_worker(maxflow_path: str, server_pid: int) -> None:
    """A worker's initializer: its priority lowered, a thread that ends it with the server's process
    (`exit_with`), then maxflow.py and scipy loaded. Should this fail, the pool breaks and the flow is
    solved in the server's thread."""
    global _maxflow
    os.nice(WORKER_NICE)
    threading.Thread(target=exit_with, args=(server_pid,), name="exit-with-server", daemon=True).start()
    spec = importlib.util.spec_from_file_location("maxflow", maxflow_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module at {maxflow_path}")
    _maxflow = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(_maxflow)
    import scipy.sparse.csgraph  # noqa: F401  (before the first flow asks)


def exit_with(pid: int, every_s: float = SERVER_CHECK_S) -> None:
    """In a worker: end this process once process `pid` (the server's) is gone. A server stopped by a
    signal (SIGTERM from `docker stop`, a service manager or a test) never shuts its pool down: its
    workers, waiting on their call queue, and their forkserver would outlive it, holding their memory."""
    while True:
        time.sleep(every_s)
        try:
            os.kill(pid, 0)  # signal 0: only whether the process exists
        except (ProcessLookupError, PermissionError):  # gone (or its number taken by another user's process)
            os._exit(0)


def solve(capacity: np.ndarray, rows: list[tuple[int, int]]) -> list[np.ndarray]:
    """In a worker: maxflow.flow_rows for `rows`, all of them."""
    assert _maxflow is not None, "start_worker loads the solver first"
    return list(_maxflow.flow_rows(capacity, rows))


class FlowWorkers:
    """The server's pool of flow workers, started when first needed and replaced where a stopped flow
    leaves its workers busy with rows no one reads."""

    def __init__(self, workers: int, chunk_rows: int = CHUNK_ROWS):
        self.workers, self.chunk_rows = workers, chunk_rows
        self.pool: ProcessPoolExecutor | None = None
        self.lock = threading.Lock()
        self.started = 0  # pools started so far

    def executor(self) -> ProcessPoolExecutor:
        with self.lock:
            if self.pool is None:
                self.pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("forkserver"),
                    initializer=start_worker,
                    initargs=(str(MAXFLOW), os.getpid()),
                )
                self.started += 1
            return self.pool

    def submit(self, capacity: np.ndarray, chunks: list) -> tuple[ProcessPoolExecutor, list[Future]]:
        pool = self.executor()
        return pool, [pool.submit(solve, capacity, chunk) for chunk in chunks]

    def replace(self, pool: ProcessPoolExecutor) -> None:
        """Shut `pool` down, its work not yet begun cancelled; the next flow starts a new one."""
        with self.lock:
            if self.pool is pool:
                self.pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def stop(self, pool: ProcessPoolExecutor, futures: list[Future]) -> None:
        """A flow stopped midway: its chunks not yet begun are cancelled; where a worker is still on one,
        the pool is replaced rather than left to finish rows before the next flow's."""
        for future in futures:
            future.cancel()
        if not all(future.done() for future in futures):
            self.replace(pool)

    def solve_rows(self, capacity: np.ndarray, rows: list[tuple[int, int]]) -> Iterator[np.ndarray]:
        """maxflow.flow_rows, solved by the workers: each row as its chunk comes. Stopped early (a time
        limit, a rerun), the chunks not begun are cancelled. Where no worker starts, or the pool breaks
        before its first answer, the rows are solved in this thread."""
        chunks = [rows[k : k + self.chunk_rows] for k in range(0, len(rows), self.chunk_rows)]
        try:
            pool, futures = self.submit(capacity, chunks)
        except (OSError, RuntimeError) as err:  # RuntimeError: the pool broke, or was shut down meanwhile
            if self.pool is not None and isinstance(err, BrokenProcessPool):
                self.replace(self.pool)
            yield from in_this_thread(capacity, rows, f"no worker process starts ({err})")
            return
        answered = 0
        try:
            for k in range(len(chunks)):
                try:
                    answer = futures[k].result()
                except CancelledError:  # another flow's stop replaced the pool: the rest goes to the new one
                    pool, futures[k:] = self.submit(capacity, chunks[k:])
                    answer = futures[k].result()
                except BrokenProcessPool as err:
                    if answered:
                        raise
                    self.replace(pool)
                    yield from in_this_thread(capacity, rows, f"its worker stopped ({err})")
                    return
                yield from answer
                answered += 1
        finally:
            if answered < len(chunks):
                self.stop(pool, futures)


def in_this_thread(capacity: np.ndarray, rows: list[tuple[int, int]], why: str) -> Iterator[np.ndarray]:
    from attention.analysis.maxflow import flow_rows

    from ..serve import preload

    preload.later()  # scipy, imported once for the whole process (not alongside another session's import)

    log.warning("attention flow is solved in the server's process: %s", why)
    yield from flow_rows(capacity, rows)


_workers: FlowWorkers | None = None
_workers_lock = threading.Lock()


def flow_workers() -> FlowWorkers:
    """The server's flow workers, one pool per process: as many workers as flows may run at once."""
    global _workers
    with _workers_lock:
        if _workers is None:
            from ..serve.settings import HEAVY_SLOTS

            _workers = FlowWorkers(HEAVY_SLOTS)
        return _workers
