"""Attention flow's max-flow problems (numpy and scipy only, so that a worker process can load this file
alone: ui/compute/workers.py).

scipy's maximum_flow is compiled code that keeps Python's interpreter lock, and attention flow runs
thousands of them. Run in a server's own process, it would hold up every other session's Python for as
long; run in a worker process, it holds up nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np


def flow_graph(capacity: np.ndarray):
    """Nodes l·T + p for layer l = 0..n_layers and position p; an edge from (l, j) to (l+1, i) with
    capacity[l, i, j]. `capacity` is an integer (n_layers, T, T) array; returns a scipy sparse matrix."""
    # scipy is imported when flow is asked for: it slows the app's start
    from scipy.sparse import csr_matrix

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
        yield np.array(
            [maximum_flow(graph, j, layer * T + i, method="dinic").flow_value for j in range(T)], dtype=np.float64
        )
