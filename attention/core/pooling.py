"""Block pooling of maps, rows and columns cut as numpy.array_split cuts them: n contiguous pieces, the first
length % n one longer. `Pooled` gathers one layer's every head's block sums and maxima a tile of query rows at a
time, in the pass that makes the rows' probabilities (attention/core/long.py's `tiled`), so that no head's scores
are made twice for an overview; attention/long_maps.py reads it, and pools in its own pass of row tiles otherwise."""

from __future__ import annotations

import torch


def sizes(length: int, n: int) -> torch.Tensor:
    """numpy.array_split's n sizes of `length`: the first length % n one longer, float64 (n,)."""
    q, r = divmod(length, n)
    return torch.tensor([q + 1] * r + [q] * (n - r), dtype=torch.float64)


def start(length: int, n: int, block: int) -> int:
    """Where array_split's `block`-th of n pieces of `length` starts."""
    q, r = divmod(length, n)
    return block * q + min(block, r)


def uniform_runs(length: int, n: int) -> list[tuple[int, int, int]]:
    """array_split's n pieces of `length` as runs of one size: (first piece, how many, size), the longer first."""
    q, r = divmod(length, n)
    return [run for run in ((0, r, q + 1), (r, n - r, q)) if run[1] and run[2]]


def reduce_last(x: torch.Tensor, n: int, op) -> torch.Tensor:
    """x (P, S) -> (P, n): `op` (torch.sum or torch.amax) over each of array_split's n pieces of the last axis."""
    parts = [op(x[:, start(x.size(1), n, first) :][:, : count * size].unflatten(1, (count, size)), 2)
             for first, count, size in uniform_runs(x.size(1), n)]  # fmt: skip
    return torch.cat(parts, dim=1)  # (P, n)


class Pooled:
    """Every head's (n, n) block sums and maxima of one layer's (H, L, S) maps, filled by `add` a tile of query
    rows at a time; `means` and `maxima` once every row was added."""

    def __init__(self, n_heads: int, n_rows: int, n_cols: int, n: int, device: torch.device):
        if not 1 <= n <= min(n_rows, n_cols):
            raise ValueError(f"n must be from 1 to {min(n_rows, n_cols)}, the map's length, got {n}")
        self.n, self.shape = n, (n_heads, n_rows, n_cols)
        self.sums = torch.zeros(n_heads, n, n, dtype=torch.float32, device=device)
        self.maxima = torch.zeros(n_heads, n, n, dtype=torch.float32, device=device)  # probabilities are >= 0
        self.row_block = torch.repeat_interleave(torch.arange(n), sizes(n_rows, n).long()).to(device)  # (L,)

    def add(self, head: int, rows: slice, first: int, probs: torch.Tensor) -> None:
        """probs (P, W): head `head`'s map at `rows` over keys first ... first + W - 1 (every other key's 0)."""
        n_cols = self.shape[2]
        if probs.size(1) != n_cols:  # the keys outside as the zeros they are
            probs = torch.nn.functional.pad(probs, (first, n_cols - first - probs.size(1)))  # (P, S)
        blocks = self.row_block[rows]  # (P,): each row's block
        self.sums[head].index_add_(0, blocks, reduce_last(probs, self.n, torch.sum))
        most = reduce_last(probs, self.n, torch.amax)  # (P, n)
        self.maxima[head].scatter_reduce_(0, blocks[:, None].expand_as(most), most, "amax")

    def means(self) -> torch.Tensor:
        """(H, n, n) float32: each block's mean, its sum over its cells."""
        _, n_rows, n_cols = self.shape
        cells = torch.outer(sizes(n_rows, self.n), sizes(n_cols, self.n))  # (n, n) float64
        return (self.sums.double() / cells.to(self.sums.device)).float()
