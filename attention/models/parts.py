"""The small parts the model is built from: norms and activations, chosen by name in the config
(attention/config.py): LayerNorm with or without a bias, Llama's RMSNorm, Gemma's RMSNorm around 1 + weight,
Gemma 4's in float32 throughout;
GELU (exact or tanh), ReLU, SiLU; and the embedding tables.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


class RMSNorm(nn.RMSNorm):
    """x / sqrt(mean(x²) + eps) · weight, the mean taken in float32 and the normalised x cast back to
    the input's dtype before the weight multiplies it (as transformers' LlamaRMSNorm, for half weights)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.float()  # (B, L, D) float32
        eps = torch.finfo(wide.dtype).eps if self.eps is None else self.eps  # None: as nn.RMSNorm takes it
        normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)  # (B, L, D)
        return self.weight * normed.to(x.dtype)


class OffsetRMSNorm(RMSNorm):
    """Gemma's RMSNorm: x / sqrt(mean(x²) + eps) · (1 + weight), all in float32, cast back at the end;
    the weight holds the offset from 1 (zero: the identity scale)."""

    def __init__(self, width: int, eps: float):
        super().__init__(width, eps=eps)
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.float()  # (B, L, D) float32
        eps = torch.finfo(wide.dtype).eps if self.eps is None else self.eps  # None: as nn.RMSNorm takes it
        normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)  # (B, L, D)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)


class FloatRMSNorm(RMSNorm):
    """Gemma 4's RMSNorm: x · (mean(x²) + eps) ** -0.5 · weight, all in float32, cast back at the end (the weight
    itself, not 1 + weight)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.float()  # (B, L, D) float32
        eps = torch.finfo(wide.dtype).eps if self.eps is None else self.eps  # None: as nn.RMSNorm takes it
        normed = wide * torch.pow(wide.pow(2).mean(-1, keepdim=True) + eps, -0.5)  # (B, L, D)
        return (normed * self.weight.float()).to(x.dtype)


def make_norm(config: ModelConfig, width: int) -> nn.Module:
    if config.norms.norm == "rms_norm_offset":
        return OffsetRMSNorm(width, eps=config.norms.layer_norm_eps)
    if config.norms.norm == "rms_norm_float":
        return FloatRMSNorm(width, eps=config.norms.layer_norm_eps)
    if config.norms.norm == "rms_norm":
        return RMSNorm(width, eps=config.norms.layer_norm_eps)
    return nn.LayerNorm(width, eps=config.norms.layer_norm_eps, bias=config.norms.norm_bias)


def embedding_table(rows: int, width: int, padding_idx: int | None = None) -> nn.Embedding:
    """nn.Embedding(rows, width), randomly initialised as torch does, except on the meta device (a model
    built to check a checkpoint's shapes, or to take its tensors): there it is left empty, since every
    weight comes from the checkpoint and normal_ on a meta tensor costs a second of imports."""
    weight = torch.empty(rows, width)  # (rows, width), on the device in use
    if weight.device.type != "meta":
        nn.init.normal_(weight)
        if padding_idx is not None:
            weight.data[padding_idx].zero_()
    return nn.Embedding(rows, width, padding_idx=padding_idx, _weight=weight)
