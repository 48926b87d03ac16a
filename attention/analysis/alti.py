"""ALTI, Aggregation of Layer-wise Token-to-token Interactions (Ferrando, Gállego and Costa-jussà, EMNLP 2022,
"Measuring the Mixing of Contextual Information in the Transformer"), for post-norm encoders (BERT, RoBERTa,
ELECTRA, DistilBERT).

A post-norm layer's attention sub-block gives token i  ỹ_i = LN(z_i),  z_i = Σ_j T_i(x_j) + b_O, where
T_i(x_j) = Σ_h a^h_ij f_h(x_j) + [i = j] x_i (mixing.head_values' f, the residual counted as the token's own).
The LayerNorm is linear in each term once its scale σ(z_i) is fixed: T̃_i(x_j) = γ ⊙ (T_i(x_j) − mean(T_i(x_j)))
/ σ(z_i). Token j's contribution to token i is how close its term comes to the output, in Manhattan distance:
c_ij = max(0, ‖ỹ_i‖₁ − ‖ỹ_i − T̃_i(x_j)‖₁), each row divided by its sum. Across layers the contributions roll out
as attention rollout does: R^(l) = C^(l) · R^(l−1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..models import Transformer
from ..models.blocks import Block
from ..models.residuals import PostNorm
from ..runs.bigrun import BIG_RUN_BYTES, maps_bytes, within_bound
from ..runs.run import read_only
from .mixing import each_layer

ROWS_PER_PASS = 16  # query rows whose (rows, n, D) terms are made at once


@dataclass(frozen=True)
class Alti:
    """`layers` (n_layers, n, n): c_ij of each layer, rows summing to 1; `rollout` (n_layers, n, n): their product
    through that layer, R^(l) = C^(l) · R^(l−1), what each input token gives each token's output of layer l."""

    layers: np.ndarray
    rollout: np.ndarray


def _check_post_norm(model: Transformer) -> None:
    for block in model.layers:
        post_norm = type(block.residual) is PostNorm and isinstance(block.attention_norm, nn.LayerNorm)
        if model.config.attention.causal or not post_norm:
            raise ValueError(
                "ALTI decomposes a post-norm encoder's LayerNorm (BERT, RoBERTa, ELECTRA, DistilBERT); this "
                f"{model.config.model_type} is not one: use norm_maps or value_zeroing"
            )


def layer_contributions(probs, f, x, norm: nn.LayerNorm, bias: torch.Tensor | None) -> torch.Tensor:
    """c_ij of one layer: probs (H, n, n), f (H, n, D) float64, x (n, D) the layer's input -> (n, n) float64."""
    n, D = x.shape
    x = x.double()
    gamma, beta = norm.weight.double(), norm.bias.double()
    b = torch.zeros(D, dtype=torch.float64, device=x.device) if bias is None else bias.double()
    rows = []
    for start in range(0, n, ROWS_PER_PASS):
        i = torch.arange(start, min(start + ROWS_PER_PASS, n), device=x.device)  # (P,) query rows
        by_key = probs[:, i].double().permute(2, 1, 0)  # (H, P, n) -> (n, P, H)
        terms = torch.bmm(by_key, f.transpose(0, 1)).transpose(0, 1)  # (n, P, H) x (n, H, D) -> (P, n, D)
        terms[torch.arange(len(i)), i] += x[i]  # (P, n, D): T_i(x_j), the residual added as token i's own
        z = terms.sum(1) + b  # (P, D), before the norm
        sigma = (z.var(-1, unbiased=False) + norm.eps).sqrt()  # (P,)
        scaled = (terms - terms.mean(-1, keepdim=True)) / sigma[:, None, None] * gamma  # (P, n, D): T̃_i(x_j)
        y = (z - z.mean(-1, keepdim=True)) / sigma[:, None] * gamma + beta  # (P, D): LN(z_i), the output
        distance = (y[:, None] - scaled).abs().sum(-1)  # (P, n): ‖ỹ_i − T̃_i(x_j)‖₁
        rows.append((y.abs().sum(-1, keepdim=True) - distance).clamp_min(0))  # (P, n)
    c = torch.cat(rows)  # (n, n)
    return c / c.sum(-1, keepdim=True)


def alti(model: Transformer, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> Alti:
    """ALTI of one sentence (1, L) over its n real tokens (see the module's docstring): every layer's contributions
    and their rollout. A model that is not a post-norm encoder is refused, and so are maps past the server's bound
    (bigrun.KeepsTooMuch), before any work."""
    _check_post_norm(model)
    n = int(input_ids.size(1) if attention_mask is None else attention_mask.bool().sum())
    within_bound("ALTI", maps_bytes(2 * len(model.layers), 1, n), "Try a shorter input.", BIG_RUN_BYTES)
    layers: list[torch.Tensor] = []

    def keep(i: int, probs: torch.Tensor, f: torch.Tensor, records: dict[str, torch.Tensor]) -> None:
        block = model.layers[i]
        assert isinstance(block, Block) and isinstance(block.attention_norm, nn.LayerNorm)  # _check_post_norm's
        layers.append(
            layer_contributions(probs, f, records["input"][0], block.attention_norm, block.attention.o_proj.bias)
        )

    each_layer(model, input_ids, attention_mask, keep, names=("input",))
    rollout, total = [], torch.eye(n, dtype=torch.float64, device=layers[0].device)
    for c in layers:
        total = c @ total  # (n, n) x (n, n): R^(l) = C^(l) · R^(l−1)
        rollout.append(total)
    return Alti(_stacked(layers), _stacked(rollout))


def _stacked(maps: list[torch.Tensor]) -> np.ndarray:
    return read_only(torch.stack(maps).float().cpu().numpy())  # (n_layers, n, n)
