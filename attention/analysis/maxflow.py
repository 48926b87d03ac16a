"""Attention flow's max-flow problems, solved here or in a worker process (numpy and scipy only).

scipy's maximum_flow is compiled code that keeps Python's interpreter lock, and attention flow runs
thousands of them. Run in a server's own process, it would hold up every other session's Python for as
long; run in a worker process, it holds up nothing. Run as a script, this file is that worker:

    python attention/analysis/maxflow.py [--nice N]

It lowers its own CPU priority by N (0 if not given), then answers requests on stdin/stdout until stdin
closes. A request is the capacities and the rows to solve; the answer is one row of flows per row asked,
each written as soon as it is solved (see `send_request` and `serve`). Only numbers cross the pipe: no
objects are unpickled.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

import numpy as np

HEADER = struct.Struct("<iii")  # n_layers, T, number of rows asked


def flow_graph(capacity: np.ndarray):
    """Nodes l·T + p for layer l = 0..n_layers and position p; an edge from (l, j) to (l+1, i) with
    capacity[l, i, j]. `capacity` is an integer (n_layers, T, T) array; returns a scipy sparse matrix."""
    from scipy.sparse import csr_matrix  # scipy is imported when flow is asked for: it slows the app's start

    n_layers, T, _ = capacity.shape
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")  # (T, T) each: row i, column j
    tails = np.concatenate([(layer * T + j).ravel() for layer in range(n_layers)])
    heads = np.concatenate([((layer + 1) * T + i).ravel() for layer in range(n_layers)])
    nodes = (n_layers + 1) * T
    return csr_matrix((capacity.ravel(), (tails, heads)), shape=(nodes, nodes))


def flow_rows(capacity: np.ndarray, rows: Iterable[Sequence[int]]) -> Iterator[np.ndarray]:
    """For each (layer, i) in `rows`: the (T,) integer max flows from every input token j, node (0, j), to
    position i after `layer` (1..n_layers), node (layer, i), one row at a time as each is solved."""
    from scipy.sparse.csgraph import maximum_flow

    graph = flow_graph(capacity)
    T = capacity.shape[1]
    for layer, i in rows:
        yield np.array([maximum_flow(graph, j, layer * T + i, method="dinic").flow_value for j in range(T)],
                       dtype=np.float64)


def send_request(pipe: BinaryIO, capacity: np.ndarray, rows: list[tuple[int, int]]) -> None:
    """Write a request: the header, the capacities (int32) and the rows asked (int32 pairs)."""
    n_layers, T, _ = capacity.shape
    pipe.write(HEADER.pack(n_layers, T, len(rows)))
    pipe.write(np.ascontiguousarray(capacity, dtype="<i4").tobytes())
    pipe.write(np.asarray(rows, dtype="<i4").reshape(len(rows), 2).tobytes())
    pipe.flush()


def read_exactly(pipe: BinaryIO, size: int) -> bytes | None:
    """`size` bytes from the pipe, or None where it closes first."""
    data = pipe.read(size)
    return data if data is not None and len(data) == size else None


def read_row(pipe: BinaryIO, T: int) -> np.ndarray:
    """One answered row of T flows; an OSError where the worker is gone."""
    data = read_exactly(pipe, 8 * T)
    if data is None:
        raise OSError("the max-flow worker stopped")
    return np.frombuffer(data, dtype="<f8").copy()


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """Answer requests until `requests` closes."""
    while (header := read_exactly(requests, HEADER.size)) is not None:
        n_layers, T, n_rows = HEADER.unpack(header)
        capacity = np.frombuffer(read_exactly(requests, 4 * n_layers * T * T) or b"", dtype="<i4")
        rows = np.frombuffer(read_exactly(requests, 8 * n_rows) or b"", dtype="<i4")
        if capacity.size != n_layers * T * T or rows.size != 2 * n_rows:
            return  # the server went away mid-request
        for row in flow_rows(capacity.reshape(n_layers, T, T), rows.reshape(n_rows, 2).tolist()):
            answers.write(row.astype("<f8").tobytes())
            answers.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description="attention flow's max-flow worker (see the module's text)")
    parser.add_argument("--nice", type=int, default=0, help="nice steps to lower this process's CPU priority by")
    args = parser.parse_args()
    if args.nice:
        os.nice(args.nice)
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
