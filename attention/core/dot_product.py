"""Scaled dot-product attention in the paper's steps: each query's similarity with every key, scaled; the mask;
the softmax over the keys; the weighted sum of the values. attention/core/mha.py builds multi-head attention on it
(projections, heads, positions, shared key/value heads); attention/core/by_head.py runs it one head at a time.

Shapes: B batch, H heads, L query length, S key/value length, d head width; maps are (B, H, L, S).
Each step passes its result through `record(name, tensor)`, which returns the tensor unchanged. By default
nothing is kept; attention/tracing/trace.py passes a recorder that keeps the tensor and the line of code that made
it, so the shape-flow diagram shows the real forward pass. The masks it reads (the scores' mask, a head mask
that ablates heads after the softmax) are built and applied by masks.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol, TypeVar

import torch
import torch.nn.functional as F

from .masks import ablate_heads, additive, check_ablation, fits, may_empty_rows
from .score_parts import Sinks

if TYPE_CHECKING:
    from .score_parts import SoftCap

Recorded = TypeVar("Recorded", torch.Tensor, torch.Tensor | None)  # a step's tensor; None for no mask


class Recorder(Protocol):
    """record(name, tensor), called at every step: gives the tensor back unchanged (None stays None)."""

    def __call__(self, name: str, tensor: Recorded, /) -> Recorded: ...


HALF = (torch.float16, torch.bfloat16)  # weights in these: softmax and kept maps in float32
_reuse = threading.local()  # this thread's reused scores buffer, while `reused_scores` is on


@contextlib.contextmanager
def reused_scores() -> Iterator[None]:
    """Within this block, in this thread, each layer's attention scores (and the probabilities the softmax
    writes over them) go into one (B, H, L, S) buffer that the next layer of the same shape writes over again,
    not a new one per layer: for a forward pass whose maps are each read, and what is kept of them copied,
    before the next layer runs (bigrun.forward_maps's hooks). A new buffer of a few MB or more is a fresh
    mapping whose pages fault in as the scores are first written: at 512 tokens and 32 heads (33 MB a layer)
    about a fifth of a 16-layer pass (bench/overview.py's model)."""
    _reuse.on, _reuse.buffer = True, None
    try:
        yield
    finally:
        _reuse.on, _reuse.buffer = False, None


def _scores_buffer(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """Where q · kᵀ is written: the reused buffer (see `reused_scores`), or None for a new one."""
    if not getattr(_reuse, "on", False) or torch.is_grad_enabled():
        return None
    shape = (*q.shape[:-1], k.size(-2))  # (B, H, L, S)
    buffer = _reuse.buffer
    if buffer is None or buffer.shape != shape or buffer.dtype != q.dtype or buffer.device != q.device:
        buffer = _reuse.buffer = q.new_empty(shape)
    return buffer


def no_record(name: str, tensor: Recorded) -> Recorded:
    return tensor


def attention_probs(
    q: torch.Tensor,
    k: torch.Tensor,
    mask: torch.Tensor | None = None,
    scaling: float | None = None,
    record: Recorder = no_record,
    head_mask: torch.Tensor | None = None,
    ablation: str = "zero",
    cap: SoftCap | None = None,
    sink: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q · kᵀ · scaling + mask): the attention probabilities (B, H, L, S).

    q (B, H, L, d), k (B, H, S, d); the rest as in `scaled_dot_product_attention`. `cap`, a part of
    score_parts.py (Gemma2's soft-cap), changes the scaled scores before the mask, recorded as its own step.
    `sink`, each head's learned sink logit shaped to broadcast over (B, H, L, 1) (gpt-oss: score_parts.Sinks),
    joins every row's softmax as a column of no key: a row then sums to less than 1.
    With half-precision q and k (float16, bfloat16) the scores are taken in that precision and the softmax
    in float32, so the probabilities come back float32.
    """
    check_ablation(ablation)
    if scaling is None:
        scaling = q.size(-1) ** -0.5
    # 1. similarity of every query with every key. Without gradients each step below overwrites the
    #    scores: one (B, H, L, S) buffer per layer, which the softmax's probabilities take over
    reused = _scores_buffer(q, k)  # None: a new buffer (see reused_scores)
    scores = torch.matmul(q, k.transpose(-2, -1), out=reused)  # (B,H,L,d) x (B,H,d,S) -> (B,H,L,S)
    in_place = not scores.requires_grad
    scores = record("scores", scores.mul_(scaling))  # in place: no second (B, H, L, S) buffer
    if cap is not None:  # a family's part bends the scaled scores, its own step (score_parts.py)
        scores = cap(scores, record)  # (B, H, L, S)
    # 2. dropped positions get -inf, so softmax gives them exactly zero weight; in place (no step's backward reads
    #    the scores). A boolean mask is added as 0 / -inf (masks.additive: the same, sooner), save to half-precision
    #    scores, which may overflow to inf; an additive one in place only when it keeps their dtype and shape
    if mask is not None and mask.dtype == torch.bool and scores.dtype not in HALF:
        scores = record("masked_scores", scores.add_(additive(mask, scores.dtype)))  # (B, H, L, S)
    elif mask is not None and mask.dtype == torch.bool:
        scores = record("masked_scores", scores.masked_fill_(~mask, float("-inf")))  # (B, H, L, S)
    elif mask is not None:
        scores = record("masked_scores", scores.add_(mask) if fits(mask, scores) else scores + mask)  # (B, H, L, S)
    # 3. each query's row becomes probabilities over the keys. Half-precision scores are softmaxed
    #    into a new float32 buffer. A row with no key left softmaxes to NaN (0/0); such a query
    #    attends to nothing.
    wide = torch.float32 if scores.dtype in HALF else None  # the softmax's dtype (None: the scores')
    # each head's learned sink, where it has one, keeps a share of every row for no key (score_parts.Sinks)
    kept = None if sink is None else Sinks.kept(scores, sink, wide)  # (B, H, L, 1), read before the scores go
    probs = torch.softmax(scores, dim=-1, dtype=wide, out=scores if in_place and wide is None else None)
    if kept is not None:
        probs = probs.mul_(kept) if in_place else probs * kept
    if may_empty_rows(mask):
        probs = probs.nan_to_num_(nan=0.0) if in_place else probs.nan_to_num(nan=0.0)
    if head_mask is not None:  # ablated heads: zero or uniform probabilities
        probs = ablate_heads(probs, head_mask, ablation, mask, in_place)
    probs = record("probs", probs)  # (B, H, L, S)
    return probs


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scaling: float | None = None,
    dropout_p: float = 0.0,
    record: Recorder = no_record,
    head_mask: torch.Tensor | None = None,
    ablation: str = "zero",
    cap: SoftCap | None = None,
    sink: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q · kᵀ · scaling + mask) · v, returning (output, probs).

    q (B, H, L, d), k (B, H, S, d), v (B, H, S, d_v); `scaling` defaults to d ** -0.5.
    `mask`, broadcastable to (B, H, L, S), is boolean (True = may attend) or additive (added to
    the scores; -inf drops a position). A query row whose every key is dropped gets all-zero
    probabilities and a zero output, never NaN.
    `head_mask` (H,), 1 = keep and 0 = ablate, changes the probabilities after the softmax (see
    `ablate_heads`); the returned probs are the ones used. None leaves every head untouched.
    Half-precision inputs (float16, bfloat16): the softmax is taken in float32 and the probs are
    returned float32; the weighted sum casts them back to v's dtype, as transformers' eager does.
    """
    probs = attention_probs(q, k, mask, scaling, record, head_mask, ablation, cap, sink)  # (B, H, L, S)
    # 4. dropout on the probabilities (the caller passes 0 outside training)
    if dropout_p > 0.0:
        probs = F.dropout(probs, p=dropout_p)
    # 5. weighted sum of the values, in their precision
    output = record("heads", torch.matmul(probs.to(v.dtype), v))  # (B,H,L,S) x (B,H,S,d_v) -> (B,H,L,d_v)
    return output, probs
