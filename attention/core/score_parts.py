"""Parts that change the scaled scores themselves, before the mask: a family chooses one when its attention is
built (mha.MultiHeadAttention's `cap`), and dot_product.attention_probs applies it as one step.

A cap is called with the scores (B, H, L, S) and the recorder and returns the capped scores, recorded under its
`step` name; `fusable` says whether torch's fused kernel can compute it (a cap is never a mask, so it cannot);
`steps` names the (B, H, L, S) maps it records (trace.kept_bytes sizes them), `worded` any other step it changes;
`words(step, scaling)` is the shape-flow diagram's and the walk's sentence for such a step
(attention/tracing/steps.py asks the part).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .dot_product import Recorder


class SoftCap:
    """Gemma 2's soft-cap: each scaled score s becomes cap · tanh(s / cap), kept within (-cap, cap)."""

    step = "softcap"
    steps = ("softcap",)
    fusable = False  # torch's kernel adds a mask to the scores; it cannot bend them

    def __init__(self, cap: float):
        if not cap > 0:
            raise ValueError(f"a soft-cap must be positive, not {cap!r}")
        self.cap = float(cap)

    def __call__(self, scores: torch.Tensor, record: Recorder) -> torch.Tensor:
        """(B, H, L, S) -> (B, H, L, S): in place without gradients; with them a new buffer (tanh's backward
        reads its output)."""
        if not scores.requires_grad:
            return record(self.step, scores.div_(self.cap).tanh_().mul_(self.cap))
        return record(self.step, torch.tanh(scores / self.cap) * self.cap)

    def words(self, step: str, scaling: float) -> str:
        return f"soft-cap: {self.cap}·tanh(scores/{self.cap})"

    def __repr__(self) -> str:
        return f"SoftCap({self.cap:g})"


class Sinks:
    """gpt-oss's learned sinks: each head has one logit that every row's softmax covers beside the keys, as a key
    that is no token; its share of the row goes nowhere, so a row of the map sums to less than 1. The logits are the
    attention's `sinks` parameter, (H,); `softmax` takes them shaped to the scores' heads."""

    steps: tuple[str, ...] = ()  # it records no map of its own: the map is the keys' share
    worded = ("probs",)  # the step whose words it gives: the softmax that covers the sink
    fusable = False  # torch's kernel has no sink column

    @staticmethod
    def kept(scores: torch.Tensor, logits: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
        """What of each row the keys keep, Σ exp(s) / (Σ exp(s) + exp(sink)) = sigmoid(logsumexp(s) − sink),
        (B, H, L, 1): the keys' softmax times it is the softmax over [scores, sink] with the sink's column
        dropped; 0 for a row whose keys are all masked."""
        s = scores if dtype is None else scores.to(dtype)
        return torch.sigmoid(torch.logsumexp(s, dim=-1, keepdim=True) - logits.to(s.dtype))

    def words(self, step: str, scaling: float) -> str:
        return "softmax over the keys and each head's learned sink: a row's sink share goes to no key"
