"""Positions: which row of a position table each token reads (position_ids), and positions that are computed
rather than read from a table of weights: Marian's fixed sines and cosines, and T5's buckets of relative
distance (whose per-head bias is learned, one row per bucket)."""

from __future__ import annotations

import math

import torch

from ..config import ModelConfig


def position_ids(
    config: ModelConfig, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, start: int = 0
) -> torch.Tensor:
    """Each token's row in the position table: (L,) counting from position_offset, or (B, L) when
    padding tokens take no position (RoBERTa: they read row pad_token_id, the rest count on; OPT:
    the attention mask's padding reads row position_offset - 1, its real tokens count on).
    `start`: how many positions came before these (a decoder's cached ones), counted from when no mask is given."""
    L = input_ids.size(1)
    if config.positions.positions_from_mask and attention_mask is not None:
        real = attention_mask.long()  # (B, L)
        return (torch.cumsum(real, dim=1) * real - 1 + config.positions.position_offset).long()  # (B, L)
    if not config.positions.positions_skip_padding:
        first = config.positions.position_offset + start
        return torch.arange(first, first + L, device=input_ids.device)  # (L,)
    pad = config.pad_token_id
    if pad is None:
        raise ValueError("positions that skip padding need the config's pad_token_id")
    real = input_ids.ne(pad)  # (B, L)
    counted = torch.cumsum(real, dim=1) - 1 + config.positions.position_offset  # (B, L)
    return torch.where(real, counted, pad)  # (B, L)


def sinusoids(positions: torch.Tensor, width: int) -> torch.Tensor:
    """(L,) or (B, L) positions -> (L, width) or (B, L, width): sin(p / 10000^(2j/width)) in the first
    half of the columns and cos of the same angles in the second half (Marian's layout, not interleaved),
    j = 0 ... width/2 - 1. Taken in float64 and returned float32, as transformers fills its table."""
    half = (width + 1) // 2  # an odd width has one more sine than cosines
    j = torch.arange(half, dtype=torch.float64, device=positions.device)  # (half,)
    angles = positions.to(torch.float64)[..., None] / 10000 ** (2 * j / width)  # (L, 1) / (half,) -> (L, half)
    return torch.cat([angles.sin(), angles.cos()[..., : width - half]], dim=-1).float()  # (L, width)


def relative_buckets(
    query_len: int,
    key_len: int,
    bidirectional: bool,
    num_buckets: int,
    max_distance: int,
    device: torch.device | None = None,
    start: int = 0,
) -> torch.Tensor:
    """(L, S) bucket of each key's distance from each query, as T5 counts it; the queries are positions
    start ... start + L - 1 (a decoder's new rows after `start` cached ones), the keys 0 ... S - 1.

    The distance is key - query. Bidirectional (an encoder): half the buckets for keys after the
    query, half for the rest; causal (a decoder): only keys at or before the query count, later ones
    fall in bucket 0. Within each half, the first half of the buckets are exact distances 0, 1, 2 ...;
    the rest grow logarithmically up to max_distance, beyond which everything shares the last bucket.
    """
    query = torch.arange(start, start + query_len, dtype=torch.long, device=device)[:, None]  # (L, 1)
    key = torch.arange(key_len, dtype=torch.long, device=device)[None, :]  # (1, S)
    distance = key - query  # (L, S)
    bucket = torch.zeros_like(distance)  # (L, S)
    if bidirectional:
        num_buckets //= 2
        bucket += (distance > 0).long() * num_buckets  # later keys: the upper half
        distance = distance.abs()
    else:
        distance = (-distance).clamp(min=0)  # how far back; later keys count as 0
    exact = num_buckets // 2
    # log-spaced from `exact` to max_distance over the remaining buckets (the clamp avoids log(0))
    log_ratio = torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
    far = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)  # (L, S)
    return bucket + torch.where(distance < exact, distance, far)  # (L, S)


def band(length: int, window: int, device: torch.device | None = None) -> torch.Tensor:
    """(1, 1, L, L) boolean: True where key and query are fewer than `window` positions apart, either side
    (an encoder's sliding window: ModernBERT's local layers see local_attention / 2 keys each way)."""
    index = torch.arange(length, device=device)  # (L,)
    return ((index[:, None] - index[None, :]).abs() < window)[None, None]  # (1, 1, L, L)


def log_buckets(
    length: int, buckets: int, max_distance: int, device: torch.device | None = None, rows: slice | None = None
) -> torch.Tensor:
    """(L, L) DeBERTa's relative position of each key seen from each query, query - key: exact up to
    buckets / 2 either way, then log-spaced up to max_distance (buckets <= 0: exact everywhere). `rows`: those
    queries' only, (P, L)."""
    index = torch.arange(length, dtype=torch.long, device=device)
    distance = index[slice(None) if rows is None else rows, None] - index[None, :]  # (L or P, L)
    if buckets <= 0 or max_distance <= 0:
        return distance
    mid = buckets // 2
    near = (distance < mid) & (distance > -mid)
    far = torch.where(near, torch.tensor(mid - 1).type_as(distance), distance.abs())  # (L, L)
    scale = torch.log(torch.tensor((max_distance - 1) / mid))
    logged = torch.ceil(torch.log(far / mid) / scale * (mid - 1)) + mid  # (L, L) float
    return torch.where(far <= mid, distance.type_as(logged), logged * torch.sign(distance)).long()  # (L, L)
