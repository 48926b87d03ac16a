"""Positions that are computed rather than read from a table of weights: Marian's fixed sines and
cosines, and T5's buckets of relative distance (whose per-head bias is learned, one row per bucket)."""

from __future__ import annotations

import math

import torch


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
) -> torch.Tensor:
    """(L, S) bucket of each key's distance from each query, as T5 counts it.

    The distance is key - query. Bidirectional (an encoder): half the buckets for keys after the
    query, half for the rest; causal (a decoder): only keys at or before the query count, later ones
    fall in bucket 0. Within each half, the first half of the buckets are exact distances 0, 1, 2 ...;
    the rest grow logarithmically up to max_distance, beyond which everything shares the last bucket.
    """
    query = torch.arange(query_len, dtype=torch.long, device=device)[:, None]  # (L, 1)
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


def log_buckets(length: int, buckets: int, max_distance: int, device: torch.device | None = None) -> torch.Tensor:
    """(L, L) DeBERTa's relative position of each key seen from each query, query - key: exact up to
    buckets / 2 either way, then log-spaced up to max_distance (buckets <= 0: exact everywhere)."""
    index = torch.arange(length, dtype=torch.long, device=device)
    distance = index[:, None] - index[None, :]  # (L, L)
    if buckets <= 0 or max_distance <= 0:
        return distance
    mid = buckets // 2
    near = (distance < mid) & (distance > -mid)
    far = torch.where(near, torch.tensor(mid - 1).type_as(distance), distance.abs())  # (L, L)
    scale = torch.log(torch.tensor((max_distance - 1) / mid))
    logged = torch.ceil(torch.log(far / mid) / scale * (mid - 1)) + mid  # (L, L) float
    return torch.where(far <= mid, distance.type_as(logged), logged * torch.sign(distance)).long()  # (L, L)
