"""A mixture of experts in place of the feed-forward block (gpt-oss): a router scores every expert for each
token, the token goes through its top k experts, and their outputs are summed, weighted by the softmax of those k
scores. Each expert is a gated feed-forward block whose gate and up halves are interleaved in one projection
(gate_up_proj's even and odd columns), the gate clamped above and the up clamped both sides at `swiglu_limit`,
then (up + 1) · gate · sigmoid(alpha · gate).

Tensor names and layouts are transformers' (router.weight (E, D), router.bias (E,), experts.gate_up_proj
(E, D, 2F), gate_up_proj_bias (E, 2F), down_proj (E, F, D), down_proj_bias (E, D)). The last routing is kept in
`choices` (B, L, k) and `weights` (B, L, k) for views that show which experts a token went to.

Letters: B batch, L positions, D width, E experts, k experts per token, F each expert's width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig


class Router(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        E, D = config.feed_forward.num_local_experts, config.hidden_size
        self.top = config.feed_forward.num_experts_per_tok
        self.weight = nn.Parameter(torch.zeros(E, D))
        self.bias = nn.Parameter(torch.zeros(E))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (T, D) -> each token's k experts (T, k) and their weights (T, k), a softmax over the k scores."""
        scores = F.linear(x, self.weight, self.bias)  # (T, E)
        top, chosen = torch.topk(scores, self.top, dim=-1)  # (T, k) each
        return chosen, torch.softmax(top, dim=-1, dtype=top.dtype)


class Experts(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        ff = config.feed_forward
        E, D, F_ = ff.num_local_experts, config.hidden_size, config.intermediate_size
        self.limit, self.alpha = ff.swiglu_limit, ff.swiglu_alpha
        self.gate_up_proj = nn.Parameter(torch.zeros(E, D, 2 * F_))
        self.gate_up_proj_bias = nn.Parameter(torch.zeros(E, 2 * F_))
        self.down_proj = nn.Parameter(torch.zeros(E, F_, D))
        self.down_proj_bias = nn.Parameter(torch.zeros(E, D))

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert e on its tokens: (n, D) -> (n, D)."""
        gate_up = torch.addmm(self.gate_up_proj_bias[e], x, self.gate_up_proj[e])  # (n, 2F): bias + x W
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]  # (n, F) each, interleaved
        if self.limit is not None:
            gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
        glu = gate.mul(self.alpha).sigmoid_().mul_(gate)  # gate · sigmoid(alpha · gate), (n, F)
        return torch.addmm(self.down_proj_bias[e], glu.mul_(up + 1), self.down_proj[e])  # (n, F) x (F, D) + bias


class MixtureOfExperts(nn.Module):
    """The feed-forward block of a mixture: (B, L, D) -> (B, L, D)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.router = Router(config)
        self.experts = Experts(config)
        self.choices: torch.Tensor | None = None  # the last call's (B, L, k) experts and weights
        self.weights: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        tokens = x.reshape(-1, D)  # (T, D)
        chosen, weights = self.router(tokens)  # (T, k) each
        self.choices, self.weights = chosen.view(B, L, -1), weights.view(B, L, -1)
        out = torch.zeros_like(tokens)  # (T, D)
        for e in chosen.unique().tolist():  # each expert on the tokens that chose it
            token, slot = torch.where(chosen == e)  # (n,) each
            part = self.experts.expert(e, tokens[token]) * weights[token, slot, None]  # (n, D)
            out.index_add_(0, token, part.to(out.dtype))
        return out.view(B, L, D)
