"""Grouped-query attention made from a trained model, and how much it changes the maps.

Ainslie et al. (2023), "GQA: Training Generalized Multi-Query Transformer Models from Multi-Head
Checkpoints", turn a multi-head checkpoint into one with G key/value heads before uptraining: the
H query heads are cut into G groups of H / G consecutive heads, and each group's key and value
projections (weights and biases) are replaced by their mean. G = H is the original model, G = 1
multi-query attention. Here the converted model is used as is, without uptraining, to show how
far each head's map moves when its keys and values are shared.

Shapes: H query heads, G key/value heads, d head width, D model width (D = H * d).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import cast

import numpy as np
import torch
from torch import nn

from ..core.mha import MultiHeadAttention
from ..models import Transformer
from ..models.blocks import Block

# GPT-NeoX's fused projection lays Q, K and V out per head: one K and V per query head is its layout
NOT_PER_HEAD = (
    "this model's fused Q·K·V projection is laid out per head (GPT-NeoX), which keeps one key and one "
    "value head per query head: grouping them is not a conversion of this model"
)


def kv_head_options(num_heads: int, kv_heads: int | None = None) -> list[int]:
    """The numbers of key/value heads that `num_heads` query heads can share: its divisors, descending.

    For a model that already has `kv_heads` < num_heads (Llama's grouped heads), only the divisors
    of kv_heads: each new group is then a union of whole existing groups."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    within = num_heads if kv_heads is None else kv_heads
    return [g for g in range(num_heads, 0, -1) if num_heads % g == 0 and within % g == 0]


def check_kv_heads(num_heads: int, num_kv_heads: int, kv_heads: int | None = None) -> None:
    """ValueError, naming the allowed values, unless num_kv_heads divides num_heads and, for a model
    already grouped into `kv_heads` key/value heads, divides kv_heads or is a multiple of it (the
    shared heads repeated: the same model)."""
    options = kv_head_options(num_heads)
    if isinstance(num_kv_heads, bool) or not isinstance(num_kv_heads, int) or num_kv_heads not in options:
        raise ValueError(
            f"num_kv_heads must divide the {num_heads} attention heads (one of "
            f"{', '.join(map(str, options))}), got {num_kv_heads!r}"
        )
    if kv_heads is not None and kv_heads % num_kv_heads and num_kv_heads % kv_heads:
        raise ValueError(
            f"this model already shares {kv_heads} key/value heads among its {num_heads} query heads: "
            f"num_kv_heads must divide {kv_heads} (one of "
            f"{', '.join(map(str, kv_head_options(num_heads, kv_heads)))}) or be a multiple of it, "
            f"got {num_kv_heads}"
        )


def pool_kv_rows(tensor: torch.Tensor, num_heads: int, num_kv_heads: int) -> torch.Tensor:
    """Mean of each group's rows of a key or value projection weight (H·d, D) or bias (H·d,).

    Group g holds query heads g·H/G ... (g+1)·H/G - 1. Returns (G·d, D) or (G·d,), in the tensor's
    dtype and on its device; a half-precision mean is taken in float32 and rounded once.
    """
    group = num_heads // num_kv_heads
    head_dim = tensor.size(0) // num_heads
    rows = tensor.reshape(num_kv_heads, group, head_dim, *tensor.shape[1:])  # (G, H/G, d[, D])
    mean = rows.mean(dim=1, dtype=torch.float32 if rows.dtype in (torch.bfloat16, torch.float16) else None)
    return mean.to(tensor.dtype).reshape(num_kv_heads * head_dim, *tensor.shape[1:])  # (G·d[, D])


def _per_query_head(tensor: torch.Tensor, attention: MultiHeadAttention) -> torch.Tensor:
    """A k/v weight or bias with one block of rows per query head, (H·d[, D]): a grouped layer's
    shared rows repeated for each query head they serve, as its forward pass does."""
    group = attention.num_heads // attention.num_kv_heads
    rows = tensor.reshape(attention.num_kv_heads, attention.head_dim, *tensor.shape[1:])  # (G, d[, D])
    return rows.repeat_interleave(group, dim=0).reshape(-1, *tensor.shape[1:])  # (H·d[, D])


def projections(attention: MultiHeadAttention) -> dict[str, dict[str, torch.Tensor]]:
    """The q/k/v/o projections' tensors ({"q_proj": {"weight": ..., "bias": ...}, ...}), the
    fused qkv_proj cut into its Q, K and V rows."""
    parts = {
        name: {kind: t.clone() for kind, t in getattr(attention, name).state_dict().items()}
        for name in (("qkv_proj",) if attention.fused_qkv else ("q_proj", "k_proj", "v_proj")) + ("o_proj",)
    }
    if attention.fused_qkv:
        fused = parts.pop("qkv_proj")
        pieces = {kind: t.split(attention.qkv_widths, dim=0) for kind, t in fused.items()}  # (H·d | G·d | G·d)
        for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
            parts[name] = {kind: rows[i] for kind, rows in pieces.items()}
    return parts


def _keep_parts(attention: MultiHeadAttention, new: MultiHeadAttention) -> None:
    """The parts of `attention` that grouping its keys and values leaves as they are, given to `new`: the q and k
    norms (each head's over its d: Qwen3, Gemma3, Gemma 4; OLMo2's over all heads at once, its K norm's weight then
    pooled as the keys' rows are), the value norm (Gemma 4), the score cap, the sinks."""
    new.value_norm_part, new.value_eps, new.cap, new.sink = (
        attention.value_norm_part, attention.value_eps, attention.cap, attention.sink,
    )  # fmt: skip
    if attention.sink is not None:
        new.sinks = nn.Parameter(attention.sinks.detach().clone())  # (H,): one per query head
    if attention.qk_norm is not None:
        new.qk_norm, new.qk_norm_part = attention.qk_norm, attention.qk_norm_part
        new.q_norm, new.k_norm = copy.deepcopy(attention.q_norm), copy.deepcopy(attention.k_norm)
    if attention.qk_norm == "projection":  # the K norm spans every key head: (G·d,) weights, pooled to the new G
        k_norm = new.k_norm
        assert isinstance(k_norm, nn.RMSNorm) and k_norm.weight is not None  # OLMo2's
        weight = _per_query_head(k_norm.weight.detach(), attention)  # (H·d,)
        k_norm.weight = nn.Parameter(pool_kv_rows(weight, new.num_heads, new.num_kv_heads))
        k_norm.normalized_shape = tuple(k_norm.weight.shape)


def grouped_attention(attention: MultiHeadAttention, num_kv_heads: int) -> MultiHeadAttention:
    """A new MultiHeadAttention with num_kv_heads key/value heads, each the mean of its group's.

    Query and output projections are copied unchanged; a fused Q·K·V projection stays fused. A
    layer that is already grouped is first seen as one key/value head per query head (the heads it
    shares repeated), so converting it back to num_heads key/value heads gives the same outputs.
    """
    H = attention.num_heads
    check_kv_heads(H, num_kv_heads, attention.num_kv_heads)
    inputs = attention.qkv_proj if attention.fused_qkv else attention.q_proj
    new = MultiHeadAttention(
        attention.d_model,
        H,
        num_kv_heads=num_kv_heads,
        dropout=attention.dropout,
        bias=inputs.bias is not None,
        projection=attention.projection,
        head_dim=attention.head_dim,
        out_bias=attention.o_proj.bias is not None,
    )
    new.scaling = attention.scaling  # a checkpoint's own factor on Q·Kᵀ, if it differs from 1/√d
    weight = attention.o_proj.weight
    new.to(device=weight.device, dtype=weight.dtype)
    parts = projections(attention)
    for name in ("k_proj", "v_proj"):
        parts[name] = {
            kind: pool_kv_rows(_per_query_head(t, attention), H, num_kv_heads) for kind, t in parts[name].items()
        }
    if new.fused_qkv:  # Q, pooled K and pooled V rows, one above the other
        q, k, v = (parts.pop(name) for name in ("q_proj", "k_proj", "v_proj"))
        parts["qkv_proj"] = {kind: torch.cat([q[kind], k[kind], v[kind]]) for kind in q}
    new.load_state_dict({f"{name}.{kind}": t for name, part in parts.items() for kind, t in part.items()}, strict=True)
    _keep_parts(attention, new)
    new.train(attention.training)
    requires_grad = any(p.requires_grad for p in attention.parameters())
    return new.requires_grad_(requires_grad)


def to_grouped(model: Transformer, num_kv_heads: int, progress: Callable[[float], None] | None = None) -> Transformer:
    """A copy of `model` whose every attention layer has `num_kv_heads` key/value heads.

    Each key/value head is the mean of the key/value projections (weights and biases) of its group
    of num_heads / num_kv_heads consecutive query heads, as GQA initialises a model for uptraining.
    num_kv_heads = num_heads gives the original model exactly; 1 is multi-query attention. A model
    already grouped (config.kv_heads < num_heads) is grouped further into unions of its groups, or
    given back unchanged for a multiple of its kv_heads; any other number is a ValueError, as is one
    that does not divide the number of heads. The given model is not changed; the copy's config
    says its num_key_value_heads. The copy keeps the model's dtype and device.

    `progress`, if given, is called with the fraction done after the copy and after each layer's
    conversion: a caller with a time limit can stop the work there by raising from it (the copy
    made so far is dropped).
    """
    check_kv_heads(model.config.num_attention_heads, num_kv_heads, model.config.kv_heads)
    if model.config.attention.qkv_per_head and num_kv_heads != model.config.num_attention_heads:
        raise ValueError(NOT_PER_HEAD)
    grouped = copy.deepcopy(model)
    grouped.config = grouped.embeddings.config = model.config.replace(num_key_value_heads=num_kv_heads)
    n = len(grouped.layers)
    if progress is not None:
        progress(0.0)
    for k, layer in enumerate(cast(Iterable[Block], grouped.layers)):  # a ModuleList of Blocks
        layer.attention = grouped_attention(layer.attention, num_kv_heads)
        if progress is not None:
            progress((k + 1) / n)
    return grouped


def map_change(base: np.ndarray, grouped: np.ndarray) -> np.ndarray:
    """Mean absolute difference per head between two (n_layers, H, L, L) attention arrays.

    Returns (n_layers, H): for each head, the mean over all (query, key) cells of |base - grouped|.
    Each row of a map sums to 1, so a head's value is at most 2 / L.
    """
    base, grouped = np.asarray(base, dtype=np.float64), np.asarray(grouped, dtype=np.float64)
    if base.ndim != 4 or base.shape != grouped.shape:
        raise ValueError(
            f"expected two (n_layers, H, L, L) arrays of the same shape, got {base.shape} and {grouped.shape}"
        )
    return np.abs(base - grouped).mean(axis=(2, 3))  # (n_layers, H, L, L) -> (n_layers, H)


__all__ = [
    "check_kv_heads",
    "grouped_attention",
    "kv_head_options",
    "map_change",
    "pool_kv_rows",
    "projections",
    "to_grouped",
]
