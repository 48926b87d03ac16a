"""Which scores each query may see, and which heads count: the masks the attention reads.

`build_mask` combines a key padding mask, a full mask and causality (with an optional sliding window)
into one boolean or additive mask for the scores, broadcastable to (B, H, L, S); `may_empty_rows` says
whether such a mask can leave a query no key at all. A head mask (H,) ablates heads right after the
softmax (`ablate_heads`): 1 keeps a head, 0 ablates it, either by zeroing its probabilities ("zero")
or by spreading them evenly over the keys it may see ("uniform"). `pick_rows` keeps some query rows of
q, of a mask or of a map. Letters as in mha.py.
"""

from __future__ import annotations

import torch

ABLATIONS = ("zero", "uniform")  # what an ablated head's probabilities become


def check_ablation(ablation: str) -> None:
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {', '.join(map(repr, ABLATIONS))}, got {ablation!r}")


def fits(mask: torch.Tensor, scores: torch.Tensor) -> bool:
    """Whether scores + mask (an additive mask) keeps the scores' dtype and shape, so that it may be added in place."""
    return mask.dtype == scores.dtype and torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask (True = may attend) as an additive one in `dtype`: 0 where it may, -inf where not. Added
    to finite scores it drops what masked_fill(~mask, -inf) drops, to the bit (x + 0 = x, x + -inf = -inf), and
    broadcast over a (B, H, L, S) layer's heads the add takes about 40% of masked_fill_'s time (1.6 against
    3.9 ms at 32 heads and 512 tokens, one thread)."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def may_empty_rows(mask: torch.Tensor | None) -> bool:
    """Whether some query row of `mask` may drop every key (its softmax is then NaN, 0/0). A boolean mask
    is read (a causal mask alone always leaves each query itself); an additive one is assumed to."""
    if mask is None:
        return False
    if mask.dtype != torch.bool:
        return True
    return not bool(mask.any(dim=-1).all())


def pick_rows(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """x (B or 1, n, L, C) -> (B, n, P, C): the rows `rows` (B, P) of each batch item (e.g. the query
    rows of q or of a map). An x with a single row (a padding mask, (B, 1, 1, S)) applies to every
    query, so it is returned as it is."""
    if x.size(2) == 1:
        return x
    B, P = rows.shape
    x = x.expand(B, -1, -1, -1)  # (B, n, L, C)
    index = rows[:, None, :, None].expand(B, x.size(1), P, x.size(3))  # (B, n, P, C)
    return x.gather(2, index)  # (B, n, P, C)


def ablate_heads(
    probs: torch.Tensor,
    head_mask: torch.Tensor,
    ablation: str = "zero",
    mask: torch.Tensor | None = None,
    in_place: bool = False,
) -> torch.Tensor:
    """Ablate heads of softmaxed probs (B, H, L, S) with head_mask (H,): 1 keeps, 0 ablates.

    "zero": probs · m, so an ablated head adds nothing to the output (only o_proj's bias is left
    once every head is ablated). "uniform": m · probs + (1 - m) · uniform, where uniform spreads
    each query row evenly over the keys `mask` lets it see (all S keys without a mask); a row
    with no key left stays zero. A mask of ones returns probs bit for bit; values between 0 and 1
    scale ("zero") or blend ("uniform").
    """
    check_ablation(ablation)
    H = probs.size(1)
    if tuple(head_mask.shape) != (H,):
        raise ValueError(f"a layer's head_mask must be (num_heads,) = {(H,)}, got {tuple(head_mask.shape)}")
    keep = head_mask.to(dtype=probs.dtype, device=probs.device)[None, :, None, None]  # (H,) -> (1, H, 1, 1)
    probs = probs.mul_(keep) if in_place else probs * keep  # (B, H, L, S)
    if ablation == "uniform":
        if mask is None:
            allowed = torch.ones(1, 1, 1, probs.size(-1), dtype=torch.bool, device=probs.device)  # (1, 1, 1, S)
        else:
            allowed = mask if mask.dtype == torch.bool else mask != float("-inf")  # broadcastable to (B, H, L, S)
        allowed = allowed.to(probs.dtype)
        uniform = allowed / allowed.sum(-1, keepdim=True).clamp(min=1)  # each row sums to 1, or 0 if empty
        spread = uniform * (1 - keep)  # broadcasts to (B, H, L, S)
        probs = probs.add_(spread) if in_place else probs + spread
    return probs


def build_mask(
    attention_mask: torch.Tensor | None,
    is_causal: bool,
    batch: int,
    query_len: int,
    key_len: int,
    window: int | None = None,
    device: torch.device | None = None,
) -> torch.Tensor | None:
    """Combine a key padding mask, a full mask and causality into one mask for the scores.
    With `window` (causal only) a query sees only the `window` latest keys, itself included (Mistral).

    attention_mask is None, a (B, S) key padding mask (1/True keep, 0/False drop), or a boolean
    (True keep) or additive float mask broadcastable to (B, H, L, S). Returns None when nothing
    is masked, else a boolean or additive mask broadcastable to (B, H, L, S). A causal mask is made
    on `device` (the inputs'), or on attention_mask's when one is given.
    """
    mask = attention_mask
    if mask is not None and mask.dim() == 2:
        if tuple(mask.shape) != (batch, key_len):
            raise ValueError(
                f"a key padding mask must be (batch, key_len) = {(batch, key_len)}, got {tuple(mask.shape)}"
            )
        mask = mask.bool()[:, None, None, :]  # (B, S) -> (B, 1, 1, S)
    if is_causal:
        # query i sees keys up to i (keys aligned to the end when S > L, as with cached keys)
        device = device if mask is None else mask.device
        causal = torch.ones(query_len, key_len, dtype=torch.bool, device=device)
        causal = causal.tril(diagonal=key_len - query_len)  # (L, S)
        if window is not None:  # and nothing `window` or more keys back
            causal = causal.triu(diagonal=key_len - query_len - window + 1)  # (L, S)
        causal = causal[None, None]  # (1, 1, L, S)
        if mask is None:
            mask = causal
        elif mask.dtype == torch.bool:
            mask = mask & causal
        else:
            mask = mask.masked_fill(~causal, float("-inf"))
    return mask


def head_mask_tensor(
    head_mask, expected: tuple[int, int], device: torch.device, ablation: str = "zero"
) -> torch.Tensor | None:
    """A head mask (array-like, bool or float, 1 keeps a head and 0 ablates it) as a float tensor of shape
    `expected`, (n_layers, H), on `device`; None stays None. A clear ValueError if it or `ablation` is invalid."""
    check_ablation(ablation)
    if head_mask is None:
        return None
    try:
        head_mask = torch.as_tensor(head_mask)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(
            f"head_mask must be a (n_layers, n_heads) = {expected} array of 0s and 1s, not {type(head_mask).__name__}"
        ) from None
    if tuple(head_mask.shape) != expected:
        raise ValueError(f"head_mask must be (n_layers, n_heads) = {expected}, got {tuple(head_mask.shape)}")
    if head_mask.is_complex():
        raise ValueError(f"head_mask must hold bools or real numbers, not {head_mask.dtype}")
    head_mask = head_mask.float()  # (n_layers, H)
    if not bool(((head_mask >= 0) & (head_mask <= 1)).all()):
        raise ValueError("head_mask values must be from 0 (ablate the head) to 1 (keep it)")
    return head_mask.to(device)


def query_rows(rows, batch: int, length: int, device: torch.device) -> torch.Tensor:
    """`rows`, array-like (B, P) query positions, as a long tensor on `device`; a clear ValueError unless
    it is (batch, P) with every position from 0 to length - 1."""
    rows = torch.as_tensor(rows, dtype=torch.long, device=device)
    if rows.dim() != 2 or rows.size(0) != batch:
        raise ValueError(f"rows must be (batch, n_rows) = ({batch}, P) query positions, got {tuple(rows.shape)}")
    if rows.numel() and not bool(((rows >= 0) & (rows < length)).all()):
        raise ValueError(f"rows must be query positions from 0 to {length - 1}")
    return rows
