"""DeBERTa's disentangled attention: besides content-to-content, q · k, each score holds content-to-position,
q_i · K_r[δ(i, j)], and position-to-content, k_j · Q_r[δ(j, i)], where δ is the bucketed relative distance
(positions.log_buckets) and Q_r, K_r are a shared table of relative positions (rel_embeddings, normed) through
each layer's own q and k projections (share_att_key). All three are scaled by 1 / √(d · (1 + the number of
position terms)). The two position terms reach the scores as an additive mask (a score-term part of the
attention: mha.MultiHeadAttention.terms), recorded as "c2p" and "p2c" beside the content-only "scores", so the
trace keeps every term per head.

Letters: B batch, H heads, L positions (queries and keys alike), d head width, R = 2 · span rows of the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from ..config import ModelConfig
from ..core.mha import MultiHeadAttention, Recorder
from .positions import log_buckets

if TYPE_CHECKING:
    from .blocks import Transformer


def span(config: ModelConfig) -> int:
    """How many relative distances the table holds each way: position_buckets, else max_relative_positions."""
    return (
        config.positions.position_buckets
        if config.positions.position_buckets > 0
        else config.positions.max_relative_positions
    )


def terms(config: ModelConfig) -> tuple[str, ...]:
    """The position terms this model adds ("c2p", "p2c"), in that order."""
    kinds = set(config.positions.pos_att_type.split("|"))
    return tuple(kind for kind in ("c2p", "p2c") if kind in kinds)


def attach(model: Transformer) -> None:
    """The shared table (rel_embeddings and its norm) on `model`, and each layer's attention reading it."""
    c = model.config
    model.rel_embeddings = nn.Embedding(2 * span(c), c.hidden_size)
    if c.positions.relative_norm:
        model.rel_norm = nn.LayerNorm(c.hidden_size, eps=c.norms.layer_norm_eps)
    indices = Indices(c)
    for layer in model.layers:
        attention = layer.attention
        assert isinstance(attention, MultiHeadAttention)
        attention.terms = (Disentangled(c, attention, model, indices),)


class Indices:
    """Which table row each (query, key) pair reads, for both position terms: the bucketed distances
    (positions.log_buckets) shifted into the table, (L, L) each. Shared by every layer and kept for the last
    length and device asked for, so a forward pass computes them once, not once per layer; the same numbers
    whichever thread fills it."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self.last: tuple[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] | None = None

    def __call__(self, L: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(c2p's, p2c's) rows, long (L, L): c2p's [i, j] reads δ(i, j), p2c's [j, i] reads δ(j, i)."""
        last = self.last
        if last is not None and last[0] == (L, device):
            return last[1]
        n, c = span(self.config), self.config
        distance = log_buckets(L, c.positions.position_buckets, c.positions.max_relative_positions, device)  # (L, L)
        rows = ((distance + n).clamp(0, 2 * n - 1), (-distance + n).clamp(0, 2 * n - 1))  # (L, L) each
        self.last = ((L, device), rows)
        return rows

    def rows(self, L: int, rows: slice, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The query rows `rows` of both, (c2p's (P, L), p2c's (L, P)), computed for those rows alone (not kept):
        the bucketed distance is odd, δ(j, i) = -δ(i, j), so p2c's rows are c2p's transposed."""
        n, c = span(self.config), self.config
        distance = log_buckets(L, c.positions.position_buckets, c.positions.max_relative_positions, device, rows)
        c2p = (distance + n).clamp(0, 2 * n - 1)  # (P, L)
        return c2p, c2p.t()


class Disentangled:
    """One layer's position terms: called by its attention with q and k (B, H, L, d) and the mask, returns the
    mask plus c2p + p2c (B, H, L, S), -inf where the mask hides a key. Not a module: the table is the model's."""

    def __init__(self, config: ModelConfig, attention: MultiHeadAttention, model: Transformer, indices: Indices):
        self.config, self.attention, self.model, self.indices = config, attention, model, indices
        self.scale = (attention.head_dim * (1 + len(terms(config)))) ** 0.5  # √(d · factor), as the content's
        self.steps = terms(config)  # the (B, H, L, S) maps it records: "c2p", "p2c"

    def words(self, step: str, scaling: float) -> str:
        """The shape flow's sentence for its step: scaled as the content's scores are, then added."""
        content, projected, what = (
            ("Q", "K", "query content · key") if step == "c2p" else ("K", "Q", "key content · query")
        )
        term = f"{content} · ({projected}-projected relative position)ᵀ · {scaling:.4g}"
        return f"{what} position: {term}, added to the scores"

    def table(self) -> torch.Tensor:
        """The relative positions' rows, normed: (R, D)."""
        table, norm = self.model.rel_embeddings, getattr(self.model, "rel_norm", None)
        assert isinstance(table, nn.Embedding)
        return table.weight if norm is None else norm(table.weight)  # (R, D)

    def heads(self, projection: nn.Module, table: torch.Tensor) -> torch.Tensor:
        """The table through a layer's projection, split into heads: (R, D) -> (1, H, R, d)."""
        H, d = self.attention.num_heads, self.attention.head_dim
        return projection(table).view(-1, H, d).transpose(0, 1)[None]  # (1, H, R, d)

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        mask: torch.Tensor | None,
        record: Recorder,
        head: int | None = None,
        rows: slice | None = None,
    ) -> torch.Tensor:
        """`head`: q and k are that one head's, (B, 1, L, d) (attention/core/by_head.py), and so is what is returned.
        `rows`: q and the mask are those query rows' only, (B, ·, P, ·), and what is returned is (B, ·, P, S),
        their distances alone computed (attention/core/long.py)."""
        B, H, L, _ = q.shape
        S = k.size(2)
        heads = slice(None) if head is None else slice(head, head + 1)  # the table's heads these q and k meet
        if (S if rows is None else len(range(S)[rows])) != L:
            raise ValueError("disentangled attention needs as many keys as queries (self-attention)")
        c2p_rows, p2c_rows = self.indices(L, q.device) if rows is None else self.indices.rows(S, rows, q.device)
        table = self.table().to(q.dtype)  # (R, D)
        kinds, bias = terms(self.config), None  # bias: c2p + p2c (B, H, L, S), summed in the first term's buffer
        if "c2p" in kinds:  # query i's content against key j's relative position δ(i, j)
            by_row = q @ self.heads(self.attention.k_proj, table)[:, heads].transpose(-1, -2)  # (B, H, L, R)
            index = c2p_rows.expand(B, H, L, S)  # (B, H, L, S)
            bias = record("c2p", by_row.gather(-1, index) / self.scale)  # (B, H, L, S)
        if "p2c" in kinds:  # key j's content against query i's relative position δ(j, i)
            by_row = k @ self.heads(self.attention.q_proj, table)[:, heads].transpose(-1, -2)  # (B, H, S, R)
            index = p2c_rows.expand(B, H, S, L)  # (B, H, S, L): row j, column i
            p2c = record("p2c", by_row.gather(-1, index).transpose(-1, -2) / self.scale)  # (B, H, L, S)
            bias = p2c if bias is None else bias.add_(p2c)  # (B, H, L, S)
        if bias is None:  # no position term
            bias = torch.zeros(B, H, L, S, dtype=q.dtype, device=q.device)  # (B, H, L, S)
        if mask is None:
            return bias
        if mask.dtype == torch.bool:
            return bias.masked_fill_(~mask, float("-inf"))  # (B, H, L, S)
        return bias + mask
