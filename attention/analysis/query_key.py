"""One query against every key, term by term: the query·key view (bertviz's "neuron view").

A head's score for query i and key j is Σ_c q_i[c] · k_j[c] · scaling. `query_key` takes q, k,
the scaled scores and the probabilities of one head and one query from a recorded forward pass
(attention/tracing/trace.py), and lays out the elementwise products q_i * k_j whose row sums, scaled,
are those scores. Nothing is recomputed by a second model: every vector is the one the model used.

Letters as in trace.py: S key length, d head width.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..tracing.trace import Trace


class QueryKey(NamedTuple):
    layer: int
    head: int
    query: int
    q: np.ndarray  # (d,) the query vector of token `query` for this head
    k: np.ndarray  # (S, d) every key vector this head reads
    product: np.ndarray  # (S, d) q * k elementwise
    scores: np.ndarray  # (S,) product.sum(-1) * scaling: the recorded scaled scores, before any mask
    probs: np.ndarray  # (S,) the recorded probabilities (0 for dropped keys)
    scaling: float


def query_key(trace: Trace, head: int, query: int) -> QueryKey:
    """Query `query` of head `head` against every key, from batch item 0 of `trace`.

    q comes from step "q_rot" when the model rotates q and k by position (RoPE), else "q_heads";
    k from "k_shared" when the model shares K heads between query heads (grouped-query attention,
    rotated first if at all), else from "k_rot" or "k_heads"; scores from "scores" (scaled, before
    the mask) and probs from "probs"; the scaling is the one the layer used (Trace.scaling).
    """
    H, L = trace.H, trace.L
    _check_index("head", head, H)
    _check_index("query", query, L)
    if trace.scaling is None:
        raise ValueError("this trace has no scaling: record it with trace_layer")
    q_all = trace.tensor("q_rot" if "q_rot" in trace else "q_heads")[0]  # (H, L, d)
    k_name = next(name for name in ("k_shared", "k_rot", "k_heads") if name in trace)
    k_all = trace.tensor(k_name)[0]  # (H, S, d)
    kept = trace.map_index(head)  # the head's place in the kept maps: all heads', or its own
    q = q_all[head, query].float().cpu().numpy()  # (d,)
    k = k_all[head].float().cpu().numpy()  # (S, d)
    return QueryKey(
        layer=trace.layer,
        head=int(head),
        query=int(query),
        q=q,
        k=k,
        product=q[None, :] * k,  # (1, d) * (S, d) -> (S, d)
        scores=trace.tensor("scores")[0, kept, query].float().cpu().numpy(),  # (S,)
        probs=trace.tensor("probs")[0, kept, query].float().cpu().numpy(),  # (S,)
        scaling=float(trace.scaling),
    )


def _check_index(name: str, value: int, size: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
        raise ValueError(f"{name} must be an integer from 0 to {size - 1}, got {value!r}")
