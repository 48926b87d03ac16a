"""Rotary position embedding (RoPE; Su et al. 2021, "RoFormer"), the one place positions enter a
Llama-style model.

No position is added to the embeddings. Instead each head's q and k vectors are rotated: the pair
of coordinates (i, i + d/2) turns by the angle position · θ_i, with θ_i = rope_theta^(-2i/d). Then
q_m · k_n depends on the positions only through m - n. `rope_type` rescales the frequencies θ_i
as transformers computes them ("linear", "dynamic" NTK, "llama3", "yarn": the last also scales cos and sin;
"proportional": only a share of the pairs turn, Gemma 4);
"default" leaves them.

Letters: B batch, L positions, n heads, d head width.
"""

from __future__ import annotations

import math

import torch

from ..config import ModelConfig


def inverse_frequencies(config: ModelConfig, seq_len: int | None = None) -> torch.Tensor:
    """The d/2 frequencies θ_i for `config`, float32, rescaled by its rope_type; d is the number of
    coordinates turned, config.rotary_dim (each head's width unless the family turns only a share).

    `seq_len`, the length of the input, matters to "dynamic" only: up to max_position_embeddings
    the frequencies are the default ones, beyond it rope_theta grows with the length.
    """
    d, base = config.rotary_dim, float(config.positions.rope_theta)
    exponents = torch.arange(0, d, 2, dtype=torch.int64).float() / d  # (d/2,)
    if config.positions.rope_type == "dynamic":
        longest = max(seq_len or 0, config.max_position_embeddings)
        factor = config.positions.rope_factor
        base = base * ((factor * longest / config.max_position_embeddings) - (factor - 1)) ** (d / (d - 2))
    inv_freq = 1.0 / (base**exponents)  # (d/2,)
    if config.positions.rope_type == "linear":
        return inv_freq / config.positions.rope_factor
    if config.positions.rope_type == "llama3":
        return _llama3(inv_freq, config)
    if config.positions.rope_type == "yarn":
        return _yarn(exponents, config)
    if config.positions.rope_type == "proportional":
        return _proportional(inv_freq, config)
    return inv_freq


def _proportional(inv_freq: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    """Gemma 4's full layers: only the first rope_proportion of the d/2 pairs (i, i + d/2) turn, each at its
    θ_i = base^(-2i/d) over the whole d; the other pairs' frequency is 0 (cos 1, sin 0: they pass unturned);
    all ÷ factor."""
    p = config.positions
    turned = int(p.rope_proportion * config.rotary_dim // 2)  # as transformers rounds it
    kept = torch.cat((inv_freq[:turned], torch.zeros(inv_freq.numel() - turned)))  # (d/2,)
    return kept / p.rope_factor


def _llama3(inv_freq: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    """Llama 3.1: long wavelengths divided by `factor`, short ones kept, those between blended."""
    factor, low, high = (
        config.positions.rope_factor,
        config.positions.rope_low_freq_factor,
        config.positions.rope_high_freq_factor,
    )
    old_context = config.positions.rope_original_max_position_embeddings or config.max_position_embeddings
    wavelength = 2 * math.pi / inv_freq  # (d/2,)
    scaled = torch.where(wavelength > old_context / low, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelength - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < old_context / high) * ~(wavelength > old_context / low)
    return torch.where(medium, blended, scaled)


def _yarn(exponents: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    """YaRN (Peng et al. 2023): each frequency between its interpolated value (÷ factor) and its own, by a linear
    ramp over the dimensions between those turning beta_fast and beta_slow times within the original context."""
    p = config.positions
    d, base, factor = config.rotary_dim, float(p.rope_theta), p.rope_factor
    context = p.rope_original_max_position_embeddings or config.max_position_embeddings

    def dimension(turns: float) -> float:  # the dimension whose wavelength fits `turns` times in the context
        return (d * math.log(context / (turns * 2 * math.pi))) / (2 * math.log(base))

    low, high = dimension(p.rope_beta_fast or 32), dimension(p.rope_beta_slow or 1)
    if p.rope_truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    high = high + 0.001 if low == high else high
    ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)  # (d/2,)
    kept = 1 - ramp  # 1: the frequency kept (extrapolated), 0: interpolated
    frequencies = base**exponents  # (d/2,)
    return (1.0 / (factor * frequencies)) * (1 - kept) + (1.0 / frequencies) * kept


def cos_sin_scale(config: ModelConfig) -> float:
    """What cos and sin are multiplied by: yarn's attention factor (given, or 0.1·ln(factor) + 1, or the ratio of
    two such with mscale and mscale_all_dim); 1 for every other type."""
    p = config.positions
    if p.rope_type != "yarn":
        return 1.0
    if p.rope_attention_factor is not None:
        return float(p.rope_attention_factor)

    def scale(factor: float, m: float = 1.0) -> float:
        return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0

    if p.rope_mscale and p.rope_mscale_all_dim:
        return scale(p.rope_factor, p.rope_mscale) / scale(p.rope_factor, p.rope_mscale_all_dim)
    return scale(p.rope_factor)


def rotary_angles(
    position_ids: torch.Tensor, inv_freq: torch.Tensor, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and signed sin of position · θ for every position and coordinate: each (B or 1, L, d), the sin's
    first half negated (see `rotate`), both times `scale` (yarn's attention factor, `cos_sin_scale`).

    position_ids (L,) or (B, L); both halves of d use the same d/2 angles."""
    positions = position_ids if position_ids.dim() == 2 else position_ids[None]  # (B or 1, L)
    angles = positions[..., None].float() * inv_freq.to(positions.device)  # (B, L, 1) * (d/2,) -> (B, L, d/2)
    sin = angles.sin()  # (B, L, d/2)
    cos, sin = torch.cat((angles, angles), dim=-1).cos(), torch.cat((-sin, sin), dim=-1)  # (B, L, d) each
    return (cos, sin) if scale == 1.0 else (cos * scale, sin * scale)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, n, L, d) with each pair (i, i + d/2) turned by its angle: x·cos + rotate_half(x)·sin, where
    rotate_half(x1, x2) = (-x2, x1). `sin` comes signed from rotary_angles (-sin, sin), so the product is
    x·cos + (x2, x1)·(-sin, sin): the same numbers to the bit (a sign flips exactly) from one roll of x, where
    negating and joining its halves took more steps (bench/generate.py times a writing step's rotation).

    cos and sin, computed in float32, are cast to x's dtype first (as transformers does for half weights).
    When they are r < d wide (GPT-NeoX's rotary_pct) only the first r coordinates turn, pairs (i, i + r/2);
    the other d - r pass unchanged."""
    r = cos.size(-1)
    if r < x.size(-1):
        return torch.cat((rotate(x[..., :r], cos, sin), x[..., r:]), dim=-1)  # (B, n, L, r) + (B, n, L, d - r)
    if cos.dtype != x.dtype:
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # (B or 1, L, d)
    return x * cos[:, None] + x.roll(r // 2, dims=-1) * sin[:, None]  # (B, 1, L, d) broadcast over the heads


def angles_for(
    config: ModelConfig, L: int, device: torch.device, local: bool = False, start: int = 0
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """cos and signed sin (rotary_angles) of positions start ... start + L - 1, (1, L, d) each, for a rotary
    model's layers; None for a model without rotary positions. `local`: the windowed layers' angles, with their
    own base (local_rope_theta, unscaled) when the family has one. `start` > 0 (a decoder's cached positions
    before these): the same numbers as the last L rows of the angles of all start + L positions, without
    computing the others.

    Positions are 0 ... L-1 in every row, padding included, as transformers counts them when
    only an attention mask is given (left padding shifts a sentence; its maps do not change)."""
    if config.positions.position_embedding_type != "rotary":
        return None
    if local and config.positions.local_rope_theta is not None:  # unscaled, on their own base
        config = config.replace(rope_theta=config.positions.local_rope_theta, rope_type="default")
    inv_freq = inverse_frequencies(config, start + L).to(device)  # (d/2,); "dynamic" reads the whole length
    positions = torch.arange(start, start + L, device=device)
    return rotary_angles(positions, inv_freq, cos_sin_scale(config))  # (1, L, d) each
