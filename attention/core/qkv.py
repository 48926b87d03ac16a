"""How a layer's input becomes each head's queries, keys and values: the parts a family's attention is built with.

A projection part (PROJECTIONS) makes q (B, H, L, d), k and v (B, G, S, d) from the input; a Q/K-norm part
(QK_NORMS) normalises q and k where its family does, before or after they are split into heads; a value-norm part
(VALUE_NORMS) normalises each head's v where its family does (Gemma 4). All are chosen
once, when the attention is built (mha.MultiHeadAttention), from the model's config; the weights stay the
attention module's own (q_proj, k_proj, v_proj or qkv_proj; q_norm, k_norm), so checkpoints keep their names.
Each part records its steps under the names the trace and the shape flow read ("q_proj", "q_view", "q_heads" ...).
Letters as in mha.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .dot_product import Recorder

if TYPE_CHECKING:
    from .mha import MultiHeadAttention

QKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]  # q, k and v (None: the values not wanted)


def split_heads(x: torch.Tensor, n_heads: int, d: int, name: str, record: Recorder) -> torch.Tensor:
    """(B, T, n·d) -> (B, n, T, d), recorded as `{name}_view` and `{name}_heads`."""
    B, T, _ = x.shape
    x = record(f"{name}_view", x.view(B, T, n_heads, d))  # (B, T, n, d)
    return record(f"{name}_heads", x.transpose(1, 2))  # (B, n, T, d)


class NoQKNorm:
    """q and k as projected (most families)."""

    def widths(self, attention: MultiHeadAttention) -> tuple[int, int] | None:
        return None  # no q_norm, k_norm

    def flat(self, attention: MultiHeadAttention, q, k, record: Recorder) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k

    def heads(self, attention: MultiHeadAttention, q, k, record: Recorder) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k


class HeadQKNorm(NoQKNorm):
    """Qwen3: each head's q and k normalised over its d, after the split into heads."""

    def widths(self, attention: MultiHeadAttention) -> tuple[int, int]:
        return attention.head_dim, attention.head_dim

    def heads(self, attention: MultiHeadAttention, q, k, record: Recorder) -> tuple[torch.Tensor, torch.Tensor]:
        q = record("q_norm", attention.q_norm(q))  # (B, H, L, d)
        k = record("k_norm", attention.k_norm(k))  # (B, G, S, d)
        return q, k


class ProjectionQKNorm(NoQKNorm):
    """OLMo2: all heads' q, and all heads' k, normalised at once, over H·d and G·d, before the split."""

    def widths(self, attention: MultiHeadAttention) -> tuple[int, int]:
        return attention.qkv_widths[0], attention.qkv_widths[1]

    def flat(self, attention: MultiHeadAttention, q, k, record: Recorder) -> tuple[torch.Tensor, torch.Tensor]:
        q = record("q_norm", attention.q_norm(q))  # (B, L, H·d)
        k = record("k_norm", attention.k_norm(k))  # (B, S, G·d)
        return q, k


QK_NORMS = {None: NoQKNorm(), "head": HeadQKNorm(), "projection": ProjectionQKNorm()}


class NoValueNorm:
    """v as projected (every family but Gemma 4)."""

    steps: tuple[str, ...] = ()  # (B, H, L, S) maps it records: none
    worded: tuple[str, ...] = ()  # the steps it words

    def __call__(self, attention: MultiHeadAttention, v: torch.Tensor | None, record: Recorder) -> torch.Tensor | None:
        return v


class ValueRMSNorm(NoValueNorm):
    """Gemma 4's v_norm: each head's v over its d, v · (mean(v²) + eps) ** -0.5 in float32, no weight, cast back;
    before the cache keeps it. The attention's `value_eps` is its eps."""

    worded = ("v_norm",)

    def __call__(self, attention: MultiHeadAttention, v: torch.Tensor | None, record: Recorder) -> torch.Tensor | None:
        if v is None:  # a map alone reads no values
            return None
        wide = v.float()  # (B, G, S, d)
        normed = wide * torch.pow(wide.pow(2).mean(-1, keepdim=True) + attention.value_eps, -0.5)
        return record("v_norm", normed.to(v.dtype))  # (B, G, S, d)

    def words(self, step: str, scaling: float) -> str:
        return "RMSNorm of V over each head's d, no weight (v_norm): every value row the same length"


VALUE_NORMS = {False: NoValueNorm(), True: ValueRMSNorm()}


def separate(attention: MultiHeadAttention, query, key, value, record: Recorder, values: bool) -> QKV:
    """q_proj, k_proj and v_proj (BERT, Llama): the keys and values may read another sequence (cross-attention)."""
    q = record("q_proj", attention.q_proj(query))  # (B, L, H·d)
    k = record("k_proj", attention.k_proj(key))  # (B, S, G·d)
    v = record("v_proj", attention.v_proj(value)) if values else None  # (B, S, G·d); a map alone needs no values
    return _heads(attention, q, k, v, record)


def fused(attention: MultiHeadAttention, query, key, value, record: Recorder, values: bool) -> QKV:
    """One projection qkv_proj, D -> (H + 2G)·d, cut into [Q K V] (GPT-2's c_attn): self-attention only."""
    if key is not query or value is not query:
        raise ValueError("a fused Q·K·V projection does self-attention only: give no key or value")
    Q, K, _ = attention.qkv_widths
    qkv = record("qkv_proj", attention.qkv_proj(query))  # (B, L, (H+2G)·d)
    q = record("q_proj", qkv[..., :Q])  # (B, L, H·d)
    k = record("k_proj", qkv[..., Q : Q + K])  # (B, S, G·d)
    v = record("v_proj", qkv[..., Q + K :])  # (B, S, G·d)
    return _heads(attention, q, k, v, record)


def per_head(attention: MultiHeadAttention, query, key, value, record: Recorder, values: bool) -> QKV:
    """One projection laid out per head, [q_h k_h v_h] for each head h (GPT-NeoX's query_key_value): q, k and v
    are views of it, no copy."""
    if key is not query or value is not query:
        raise ValueError("a fused Q·K·V projection does self-attention only: give no key or value")
    qkv = record("qkv_proj", attention.qkv_proj(query))  # (B, L, H·3·d)
    B, L, _ = qkv.shape
    d = attention.head_dim
    per = qkv.view(B, L, attention.num_heads, 3 * d)  # (B, L, H, 3·d): [q_h k_h v_h] for each head h
    views = [record(f"{x}_view", per[..., i * d : (i + 1) * d]) for i, x in enumerate("qkv")]  # (B, L, H, d)
    q, k, v = (record(f"{x}_heads", view.transpose(1, 2)) for x, view in zip("qkv", views))  # (B, H, L, d)
    return q, k, v


def _heads(attention: MultiHeadAttention, q, k, v, record: Recorder) -> QKV:
    """A flat projection's q, k and v split into heads, the Q/K-norm part's flat step first."""
    q, k = attention.qk_norm_part.flat(attention, q, k, record)
    d = attention.head_dim
    q = split_heads(q, attention.num_heads, d, "q", record)  # (B, H, L, d)
    k = split_heads(k, attention.num_kv_heads, d, "k", record)  # (B, G, S, d)
    return q, k, None if v is None else split_heads(v, attention.num_kv_heads, d, "v", record)  # (B, G, S, d)


PROJECTIONS = {"separate": separate, "fused": fused, "per_head": per_head}
