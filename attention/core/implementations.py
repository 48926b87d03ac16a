"""How an attention call turns its queries, keys and values into outputs: named implementations, one row each.

Every implementation takes the attention module, q (B, H, L, d), k and v (B, H or G, S, d) and the mask built
for this call, and returns (heads (B, H, L, d), probs): probs the map it keeps, (B, H, L, S) or (B, H, P, S) for
the call's rows, or None when it keeps none; heads None when only the map was asked for. The caller names one
(request.Call.implementation; request.MapRequest.call picks a layer's), as transformers' config names one of its
ALL_ATTENTION_FUNCTIONS: nothing here is inferred from flags. `shares`: the implementation reads one key/value
head per query head, so mha.py repeats each grouped K/V head over its group before the call; `values`: it
reads v (map_only does not, so a separate value projection is skipped).

    explicit   every step of dot_product.py, the map kept (rows picked from it when asked)
    fused      torch's scaled_dot_product_attention, no map (explicit steps, the map let go, for scores a part
               changes in a way the kernel cannot, such as a soft-cap)
    rows       the outputs fused, and the map of the call's rows only
    map_only   the map (or its rows) and nothing else
    by_group   one new query of a written sequence: each K/V head's group of query heads as rows of one matrix
    by_head    every step, one head at a time: no (B, H, L, S) map made whole (attention/core/by_head.py)
    long       the outputs fused, no map; kept instead, what recomputes any part of it exactly: q, grouped k,
               the mask and each row's log-sum-exp (attention/core/long.py, read by attention/long_maps.py)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from . import by_head as one_head
from . import long as kept
from .dot_product import no_record, scaled_dot_product_attention
from .masks import pick_rows

if TYPE_CHECKING:
    from .mha import MultiHeadAttention
    from .request import Call

Result = tuple[torch.Tensor | None, torch.Tensor | None]  # (heads (B, H, L, d) or None, probs or None)


def explicit(
    attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask, call: Call
) -> Result:
    """scores, mask, softmax, weighted sum, each step recorded; the map kept (its `rows` when the call has some)."""
    assert v is not None
    mask = attention.add_terms(q, k, mask, call.record)  # (B, H, L, S) with a part's position terms
    heads, probs = scaled_dot_product_attention(
        q, k, v, mask, attention.scaling, attention.dropout_p, call.record, call.head_mask, call.ablation,
        attention.cap, attention.sink_logits(),
    )  # fmt: skip
    return heads, probs if call.rows is None else pick_rows(probs, call.rows)  # (B, H, L or P, S)


def fused(
    attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask, call: Call
) -> Result:
    """torch's fused kernel, which shares each K/V head with its group itself; no map made."""
    assert v is not None
    if not attention.fusable:  # scores the kernel cannot change as a part does: the explicit steps, no map kept
        k, v = attention.share(k, v, call.record)  # (B, H, S, d)
        return explicit(attention, q, k, v, mask, call)[0], None
    return _fused_heads(attention, q, k, v, attention.add_terms(q, k, mask, call.record)), None


def _fused_heads(attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask):
    fused_mask = mask if mask is None or mask.dtype == torch.bool else mask.to(q.dtype)
    heads = F.scaled_dot_product_attention(
        q, k, v, attn_mask=fused_mask, dropout_p=attention.dropout_p, scale=attention.scaling,
        enable_gqa=k.size(1) != q.size(1),
    )  # fmt: skip
    if mask is not None:  # a query with no key left (padding under a causal mask) outputs zero
        heads = heads.nan_to_num(0.0) if heads.requires_grad else heads.nan_to_num_(0.0)
    return heads  # (B, H, L, d)


def rows(
    attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask, call: Call
) -> Result:
    """Every query's output by the fused kernel, and the map of the call's rows only, (B, H, P, S)."""
    assert v is not None
    if not attention.fusable:  # the map made whole by the explicit steps, its rows kept
        return explicit(attention, q, k, v, mask, call)
    mask = attention.add_terms(q, k, mask, call.record)
    return _fused_heads(attention, q, k, v, mask), attention.map_rows(q, k, mask, call.rows)


def map_only(
    attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask, call: Call
) -> Result:
    """The map of the call's rows (every row without them), and no values, no output."""
    mask = attention.add_terms(q, k, mask, call.record)
    return None, attention.map_rows(q, k, mask, call.rows, call.record, call.head_mask, call.ablation)


def by_group(
    attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask, call: Call
) -> Result:
    """One new query (L = 1) with no mask, K and V grouped (B, G, S, d): each K/V head's group of H/G query heads
    read as the rows of one (B, G, H/G, d) matrix, with no copy of the keys and values per query head. Query head
    g·(H/G) + i is row i of group g."""
    assert v is not None
    B, H, L, d = q.shape
    G, S = k.size(1), k.size(2)
    if L != 1 or mask is not None or call.record is not no_record or call.head_mask is not None:
        raise ValueError("by_group takes one new query, unmasked, with nothing recorded or ablated")
    mask = attention.add_terms(q, k, mask, call.record)
    grouped = q.reshape(B, G, H // G, d)  # (B, G, H/G, d)
    heads, probs = scaled_dot_product_attention(
        grouped,
        k,
        v,
        mask,
        attention.scaling,
        attention.dropout_p,
        cap=attention.cap,
        sink=attention.sink_logits(groups=G),
    )  # (B, G, H/G, d), (B, G, H/G, S)
    return heads.reshape(B, H, 1, -1), probs.reshape(B, H, 1, S)


def by_head(
    attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask, call: Call
) -> Result:
    """The explicit steps one head at a time (attention/core/by_head.py): the recorded head's map kept, (B, 1, L, S)."""
    assert v is not None
    heads, probs = one_head.attend(attention, q, k, v, mask, call)
    return heads, probs if call.rows is None or probs is None else pick_rows(probs, call.rows)


def long(
    attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None, mask, call: Call
) -> Result:
    """q (B, H, L, d), k and v (B, G, S, d): the heads' outputs (B, H, L, d) and no map; beside them q, k, the mask
    and each row's log-sum-exp put in `call.keep` (attention/core/long.py). The fused kernel when the mask is all
    the scores need and the keep does not pool; else (a soft-cap, score terms, T5's bias made a tile at a time,
    every head's blocks pooled in the pass) the explicit steps a tile of query rows at a time.

    Pooling in the pass (bench/long.py, 8,192 tokens, 4 layers × 8 heads, 256 × 256 blocks): the pass and every
    head's blocks 7.20 s against the fused forward's 7.14 s (1.01×); the fused pass, then the blocks in a pass of
    their own, was 2.33×."""
    assert v is not None and call.keep is not None
    pooled = None
    if attention.fusable and not attention.terms and call.keep.pool is None and call.keep.bias is None:
        fused = functools.partial(_fused_heads, attention)
        heads, stats = kept.fused_in_tiles(fused, q, k, v, mask), None  # the log-sum-exps taken by keep.add
    else:  # pooling too: the scores made once for the output, the log-sum-exps and the blocks
        heads, stats, pooled = kept.tiled(attention, q, k, v, mask, call.keep)
    call.keep.add(attention, q, k, mask, stats, pooled)
    return heads, None


@dataclass(frozen=True)
class Implementation:
    run: Callable[..., Result]
    shares: bool = True  # reads K/V repeated over each group (B, H, S, d)
    values: bool = True  # reads v


IMPLEMENTATIONS: dict[str, Implementation] = {
    "explicit": Implementation(explicit),
    "fused": Implementation(fused, shares=False),
    "rows": Implementation(rows),
    "map_only": Implementation(map_only, values=False),
    "by_group": Implementation(by_group, shares=False),
    "by_head": Implementation(by_head),
    "long": Implementation(long, shares=False),
}
