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


def reduce_span(x: torch.Tensor, first: int, length: int, n: int, op) -> torch.Tensor:
    """x (P, W): columns first ... first + W - 1 of a (P, length) matrix whose other columns are 0 (a tile's
    probabilities over the keys it sees) -> (P, n), `op` (torch.sum or torch.amax) over each of array_split's n
    pieces of the length, as reduce_last of the whole row makes it (probabilities are >= 0: the zeros left out
    change neither), with no copy of x widened to the length. Bench: bench/long.py (pooling in the pass)."""
    out = x.new_zeros(x.size(0), n)  # (P, n)
    last = first + x.size(1)
    ends = _piece(length, n, first), _piece(length, n, last - 1)
    whole = range(ends[0] + (start(length, n, ends[0]) < first), ends[1] + 1 - (start(length, n, ends[1] + 1) > last))
    for a, count, size in uniform_runs(length, n):  # the pieces x holds whole, as runs of one size
        lo, hi = max(a, whole.start), min(a + count, whole.stop)
        if lo < hi:
            at = start(length, n, lo) - first
            out[:, lo:hi] = op(x[:, at : at + (hi - lo) * size].unflatten(1, (hi - lo, size)), 2)
    for b in set(ends) - set(whole):  # a piece x holds a part of
        lo, hi = max(start(length, n, b), first), min(start(length, n, b + 1), last)
        out[:, b] = op(x[:, lo - first : hi - first], 1)
    return out


def _piece(length: int, n: int, position: int) -> int:
    """The piece of array_split's n pieces of `length` that holds `position`."""
    q, r = divmod(length, n)
    edge = r * (q + 1)
    return position // (q + 1) if position < edge else r + (position - edge) // q


class Pooled:
    """Every head's (n, n) block sums and maxima of one layer's (H, L, S) maps, filled by `add` a tile of query
    rows at a time; `means` and `maxima` once every row was added."""

    def __init__(self, n_heads: int, n_rows: int, n_cols: int, n: int, device: torch.device):
        if not 1 <= n <= min(n_rows, n_cols):
            raise ValueError(f"n must be from 1 to {min(n_rows, n_cols)}, the map's length, got {n}")
        self.n, self.shape = n, (n_heads, n_rows, n_cols)
        self.sums = torch.zeros(n_heads, n, n, dtype=torch.float32, device=device)
        self.maxima = torch.zeros(n_heads, n, n, dtype=torch.float32, device=device)  # probabilities are >= 0

    def add(self, head: int, rows: slice, first: int, probs: torch.Tensor) -> None:
        """probs (P, W): head `head`'s map at `rows` over keys first ... first + W - 1 (every other key's 0)."""
        n_cols = self.shape[2]
        sums, most = (reduce_span(probs, first, n_cols, self.n, op) for op in (torch.sum, torch.amax))  # (P, n) each
        top = rows.start
        for row, stop, size, block in self._runs(top, top + probs.size(0)):
            self._fold(head, sums[row - top : stop - top], most[row - top : stop - top], row, size, block)

    def _runs(self, start: int, stop: int) -> list[tuple[int, int, int, int]]:
        """Rows start ... stop - 1 as runs in blocks of one size: (first row, stop, size, its block)."""
        q, r = divmod(self.shape[1], self.n)
        edge = r * (q + 1)  # the first row of the first block of size q
        runs = [(start, min(stop, edge), q + 1, start // (q + 1))] if start < edge else []
        if stop > edge:
            row = max(start, edge)
            runs.append((row, stop, q, r + (row - edge) // q))
        return runs

    def _fold(self, head: int, sums: torch.Tensor, most: torch.Tensor, row: int, size: int, block: int) -> None:
        """sums and most (P, n) of rows row ... row + P - 1, all in blocks of `size` rows from `block` on: added
        to those blocks, the rows of a block outside them as zero rows (a sum's and a probability's floor)."""
        before = row - start(self.shape[1], self.n, block)  # the first block's rows above these
        count = -(-(before + sums.size(0)) // size)
        pad = (0, 0, before, count * size - before - sums.size(0))
        self.sums[head, block : block + count] += torch.nn.functional.pad(sums, pad).view(count, size, -1).sum(1)
        folded = torch.nn.functional.pad(most, pad).view(count, size, -1).amax(1)  # (count, n)
        torch.maximum(self.maxima[head, block : block + count], folded, out=self.maxima[head, block : block + count])

    def means(self) -> torch.Tensor:
        """(H, n, n) float32: each block's mean, its sum over its cells."""
        _, n_rows, n_cols = self.shape
        cells = torch.outer(sizes(n_rows, self.n), sizes(n_cols, self.n))  # (n, n) float64
        return (self.sums.double() / cells.to(self.sums.device)).float()
