"""Attention through the layers (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"):
how much each input token reaches each position after several layers, by rollout or by max-flow.

Maps are [batch, head, query_pos, key_pos] tensors as the model returns them, or one sentence's
(n_layers, H, L, L) numpy array as attention/runs/run.py keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from .maxflow import flow_rows

FLOW_MAX_TOKENS = 64
# scipy's max-flow takes integer capacities: attention weights become multiples of 2**-30
_FLOW_GRID = 2.0**-30


# ---- attention through the layers -------------------------------------------------------------


def residual_attention(attentions: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Per layer A_l = 0.5 · mean over heads(W_l) + 0.5 · I, rows renormalised to sum to 1.

    `attentions` is the model's tuple of n_layers tensors (B, H, T, T); returns (n_layers, B, T, T).
    The identity stands for the residual connection around each attention block.
    """
    if not attentions or any(a.dim() != 4 or a.size(-1) != a.size(-2) for a in attentions):
        raise ValueError("expected the model's attentions: a non-empty tuple of (B, H, T, T) tensors")
    W = torch.stack(attentions)  # (n_layers, B, H, T, T)
    eye = torch.eye(W.size(-1), dtype=W.dtype, device=W.device)  # (T, T)
    A = 0.5 * W.mean(dim=2) + 0.5 * eye  # (n_layers, B, T, T)
    return A / A.sum(dim=-1, keepdim=True)


def rollout(attentions: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020): R_0 = A_0, R_l = A_l · R_(l-1).

    A_l = 0.5 · mean over heads(W_l) + 0.5 · I with rows renormalised (see residual_attention).
    Input: the model's `attentions`, a tuple of n_layers tensors (B, H, T, T). Returns a tensor
    (n_layers, B, T, T): entry [l, b, i, j] is how much input token j contributes to position i
    after layer l. Every row sums to 1. Padded keys get no weight from real tokens, so the rows
    of real tokens are those of the unpadded sentence.
    """
    A = residual_attention(attentions)  # (n_layers, B, T, T)
    steps = [A[0]]
    for layer in range(1, A.size(0)):
        steps.append(A[layer] @ steps[-1])  # (B,T,T) x (B,T,T) -> (B,T,T)
    return torch.stack(steps)  # (n_layers, B, T, T)


def as_attention_tuple(attn: np.ndarray) -> tuple[torch.Tensor, ...]:
    """One sentence's (n_layers, H, L, L) array (SentenceRun.attentions) as the model's tuple of
    n_layers (1, H, L, L) tensors, for rollout and attention_flow."""
    # np.array copies: a SentenceRun's arrays are read-only, and torch wants writable memory
    return tuple(torch.from_numpy(np.array(layer))[None] for layer in attn)


def attention_flow(
    attentions: tuple[torch.Tensor, ...],
    batch: int = 0,
    layers: str = "last",
    max_tokens: int = FLOW_MAX_TOKENS,
    progress: Callable[[float], None] | None = None,
    solve_rows: Callable[[np.ndarray, list[tuple[int, int]]], Iterator[np.ndarray]] = flow_rows,
) -> np.ndarray:
    """Attention flow (Abnar & Zuidema 2020): max flow from each input token to each position.

    The graph, as in the paper: one node (l, p) per layer l = 0..n_layers and position p (layer 0
    is the input tokens, layer l the output of attention layer l); an edge from (l-1, j) to (l, i)
    for every i, j, whose capacity is entry [i, j] of attention layer l's head-averaged,
    residual-added, row-renormalised attention 0.5 · mean over heads(W) + 0.5 · I (rollout's
    A_(l-1), as rollout numbers layers from 0). flow[i, j] is the value of the maximum flow from
    source (0, j) to sink (n_layers, i), computed by scipy's maximum_flow (Dinic's algorithm),
    which takes integer capacities: they are rounded to multiples of 2**-30, so a flow is within
    T · 2**-30 of the exact one. Values lie in [0, 1], since the capacities into a sink sum to 1;
    a row is not a distribution (the paper's plots divide each row by its sum).

    One sentence: item `batch` of the model's tuple of (B, H, T, T) tensors. `layers="last"`
    returns (T, T); `layers="all"` returns (n_layers, T, T), [l - 1] holding the flows into the
    positions of layer l. `progress`, if given, is called with the fraction done after each row.
    `solve_rows(capacity, rows)` solves the max-flow problems (maxflow.flow_rows, in this thread, unless
    another is given: a server passes one that solves them in a worker process).
    It solves T² max-flow problems per layer, so it is offered up to `max_tokens` tokens. On one
    CPU core with the 6-layer default model, "last" took about 0.1 s at 16 tokens, 0.5 s at 32
    and 4.5 s at 64.
    """
    if layers not in ("last", "all"):
        raise ValueError(f'layers must be "last" or "all", got {layers!r}')
    A = residual_attention(attentions)  # (n_layers, B, T, T)
    n_layers, B, T, _ = A.shape
    if T > max_tokens:
        raise ValueError(
            f"attention flow is offered up to {max_tokens} tokens: it needs T² max-flow "
            f"problems on a graph of (layers+1)·T nodes (this input has {T} tokens)"
        )
    if not -B <= batch < B:
        raise ValueError(f"batch index {batch} is out of range for a batch of {B}")
    # every capacity is at most 1, and no flow exceeds the capacity into its sink (about 1): int32 fits
    capacity = np.round(A[:, batch].double().cpu().numpy() / _FLOW_GRID).astype(np.int32)
    sinks = range(1, n_layers + 1) if layers == "all" else [n_layers]
    rows = [(layer, i) for layer in sinks for i in range(T)]
    flow = np.zeros((len(rows), T))
    solved = solve_rows(capacity, rows)
    try:
        for n, row in enumerate(solved):
            flow[n] = row
            if progress is not None:
                progress((n + 1) / len(rows))
    finally:
        if hasattr(solved, "close"):  # a generator stopped early (progress raised) lets go of what it holds
            solved.close()
    flows = flow.reshape(len(sinks), T, T) * _FLOW_GRID  # (layers kept, T, T)
    return flows[-1] if layers == "last" else flows
