"""Attention flow solved in worker processes (ui/compute/workers.py): the same numbers, at the lowest priority,
stopped with the computation that asked for it."""

import os

import numpy as np
import pytest
import torch

from attention.analysis.rollout import attention_flow
from ui.compute.workers import WORKER_NICE, FlowWorkers


def random_attentions(n_layers=3, heads=2, T=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.softmax(torch.randn(1, heads, T, T, generator=g), dim=-1) for _ in range(n_layers))


@pytest.fixture
def workers():
    pool = FlowWorkers(workers=1, chunk_rows=1)
    yield pool
    if pool.pool is not None:
        pool.pool.shutdown(cancel_futures=True)


def test_a_worker_solves_the_same_flows_at_the_lowest_priority_and_is_kept_for_the_next(workers):
    attentions = random_attentions()
    here = attention_flow(attentions, layers="all")
    there = attention_flow(attentions, layers="all", solve_rows=workers.solve_rows)
    np.testing.assert_array_equal(there, here)
    assert workers.started == 1 and workers.pool is not None
    pool = workers.pool
    worker = pool.submit(os.getpid).result()
    assert pool.submit(os.getpriority, os.PRIO_PROCESS, 0).result() == WORKER_NICE
    other = random_attentions(n_layers=2, T=5, seed=1)
    np.testing.assert_array_equal(attention_flow(other, solve_rows=workers.solve_rows), attention_flow(other))
    assert workers.started == 1 and workers.pool is pool  # the same process answered
    assert pool.submit(os.getpid).result() == worker


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_a_flow_stopped_midway_stops_its_worker_and_the_next_flow_gets_a_new_one(workers):
    attentions = random_attentions(T=40)  # 40 rows: the worker is still on them when the flow stops
    rows, pools = [], []

    def progress(done):
        rows.append(done)
        pools.append(workers.pool)
        if len(rows) == 2:
            raise TimeoutError("stopped")

    with pytest.raises(TimeoutError):
        attention_flow(attentions, progress=progress, solve_rows=workers.solve_rows)
    assert workers.started == 1 and workers.pool is None  # stopped, not kept with unread answers
    with pytest.raises(RuntimeError):  # shut down: it takes no more work
        pools[0].submit(os.getpid)
    np.testing.assert_array_equal(attention_flow(attentions, solve_rows=workers.solve_rows), attention_flow(attentions))
    assert workers.started == 2


def test_where_no_worker_can_start_the_flow_is_solved_in_this_thread(workers, monkeypatch):
    def cannot(*args, **kwargs):
        raise OSError("no processes here")

    monkeypatch.setattr("ui.compute.workers.ProcessPoolExecutor", cannot)
    attentions = random_attentions(T=6)
    np.testing.assert_array_equal(attention_flow(attentions, solve_rows=workers.solve_rows), attention_flow(attentions))


def test_a_worker_that_stops_before_answering_leaves_the_flow_to_this_thread(workers, monkeypatch, caplog, tmp_path):
    # a worker that cannot import what it needs
    monkeypatch.setattr("ui.compute.workers.MAXFLOW", tmp_path / "maxflow.py")
    attentions = random_attentions(T=6)
    np.testing.assert_array_equal(attention_flow(attentions, solve_rows=workers.solve_rows), attention_flow(attentions))
    assert workers.started == 1 and workers.pool is None
    assert any("its worker stopped" in r.getMessage() for r in caplog.records)


SERVER = """
import os, sys
from attention.analysis.rollout import attention_flow
from tests.app.test_workers import random_attentions
from ui.compute.workers import FlowWorkers
workers = FlowWorkers(workers=1, chunk_rows=1)
attention_flow(random_attentions(T=4), solve_rows=workers.solve_rows)  # the pool and its worker start
print(workers.pool.submit(os.getpid).result(), flush=True)
sys.stdin.read()  # until killed
"""


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (a zombie waiting for its parent has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_a_worker_ends_soon_after_its_server_is_killed():
    import signal
    import subprocess
    import sys
    import time

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        worker = int(server.stdout.readline())
        assert running(worker)
        server.send_signal(signal.SIGKILL)  # no shutdown reaches the pool
        server.wait(timeout=30)
        deadline = time.monotonic() + 10
        while running(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not running(worker)
    finally:
        server.kill()
