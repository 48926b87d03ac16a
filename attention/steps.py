"""The words of the shape-flow diagram and the guided walk: each recorded step's title, the letters of
its axes and its operation in words. attention/trace.py gives every recorded step these.

Letters: B batch, L query length, S key/value length, D model width, H query heads,
G key/value heads, d head width, E embedding width (where a projection from it is recorded).
"""

from __future__ import annotations

import numpy as np
import torch

LETTERS = {
    "B": "batch",
    "L": "queries",
    "S": "keys",
    "D": "width",
    "H": "heads",
    "G": "K/V heads",
    "d": "head width",
    "E": "embedding width",
}
TITLES = {
    "embedding": "embeddings",
    "embed_proj": "embedding projection",
    "block_input": "hidden states x",
    "input": "input x",
    "memory": "encoder output",
    "qkv_proj": "fused QKV projection",
    "q_proj": "Q projection",
    "k_proj": "K projection",
    "v_proj": "V projection",
    "q_view": "Q view",
    "k_view": "K view",
    "v_view": "V view",
    "q_heads": "Q transpose",
    "k_heads": "K transpose",
    "v_heads": "V transpose",
    "q_rot": "Q rotated by position",
    "k_rot": "K rotated by position",
    "k_shared": "K shared by groups",
    "v_shared": "V shared by groups",
    "mask": "mask",
    "q_norm": "Q normalised",
    "k_norm": "K normalised",
    "scores": "scores Q·Kᵀ·scaling",
    "masked_scores": "masked scores",
    "probs": "softmax",
    "heads": "probs · V",
    "merged": "transpose and merge",
    "output": "output projection",
}


def qkv_width(H: int, G: int) -> str:
    """The width of a fused Q·K·V projection, in letters."""
    return "3·H·d" if G == H else "(H+2G)·d"


def dims_of(name: str, shape: tuple[int, ...] | None, sizes: dict[str, int]) -> tuple[str, ...] | None:
    """The letters of each axis, checked against the real sizes (numbers where a letter would lie)."""
    if shape is None:
        return None
    kv = "G" if sizes["G"] != sizes["H"] else "H"
    lane = name.split("_")[0]
    T, n = ("L", "H") if lane == "q" else ("S", kv)
    table = {
        "input": ("B", "L", "D"),
        "output": ("B", "L", "D"),
        "memory": ("B", "S", "D"),
        "merged": ("B", "L", "H·d"),
        "embedding": ("B", "L", "E"),
        "embed_proj": ("B", "L", "D"),
        "block_input": ("B", "L", "D"),
        "qkv_proj": ("B", "L", qkv_width(sizes["H"], sizes["G"])),
        "q_proj": ("B", "L", "H·d"),
        "k_proj": ("B", "S", f"{kv}·d"),
        "v_proj": ("B", "S", f"{kv}·d"),
        "k_shared": ("B", "H", "S", "d"),
        "v_shared": ("B", "H", "S", "d"),
        "heads": ("B", "H", "L", "d"),
        "scores": ("B", "H", "L", "S"),
        "masked_scores": ("B", "H", "L", "S"),
        "probs": ("B", "H", "L", "S"),
    }
    dims: tuple[str, ...] | None
    if name.endswith("_view"):
        dims = ("B", T, n, "d")
    elif name.endswith(("_heads", "_rot")) or name.endswith("_norm") and len(shape) == 4:  # a norm per head
        dims = ("B", n, T, "d")
    elif name.endswith("_norm"):  # over all heads' projection (OLMo2)
        dims = table[f"{lane}_proj"]
    elif name == "mask":  # broadcastable to (B, H, L, S): axes of size 1 are "1"
        full = ("B", "H", "L", "S")[-len(shape) :]
        dims = tuple(x if size == sizes[x] and (size != 1 or x == "B") else "1" for x, size in zip(full, shape))
    else:
        dims = table.get(name)
    if dims is None or len(dims) != len(shape) or any(sizes.get(x) != n for x, n in zip(dims, shape)):
        return tuple(str(n) for n in shape)
    return dims


def op_words(name: str, tensors: dict, sizes: dict[str, int], scaling: float, layer: int) -> str:
    lane = name[0].upper()
    kv = "G" if sizes["G"] != sizes["H"] else "H"
    width = "H·d" if lane == "Q" else f"{kv}·d"
    if name == "qkv_proj":
        laid = "each head's q, k, v side by side" if "q_proj" not in tensors else "Q, K and V in one"
        return f"x · W_QKVᵀ + b_QKV   (D\u00a0→\u00a0{qkv_width(sizes['H'], sizes['G'])}): {laid}"
    if name in ("q_proj", "k_proj", "v_proj"):
        if "qkv_proj" in tensors:
            return _qkv_slice_words(lane, sizes)
        source = "memory" if lane in "KV" and "memory" in tensors else "x"  # cross-attention: K, V from it
        return f"{source} · W_{lane}ᵀ + b_{lane}   (D\u00a0→\u00a0{width})"
    if name.endswith("_view") and "qkv_proj" in tensors and "q_proj" not in tensors:  # laid out per head
        column = "qkv".index(name[0])
        return f"view QKV as H\u00a0×\u00a03·d; {lane} is columns {column}·d:{column + 1}·d of each head's, no copy"
    if name.endswith("_view"):
        return f"view: split {width} into {width[0]}\u00a0×\u00a0d, no copy"
    if name.endswith("_norm"):
        tensor = tensors.get(name)
        over = "each head's d" if tensor is not None and tensor.dim() == 4 else f"all heads' {width}"
        return f"RMSNorm of {lane} over {over}, times its weight"
    if name.endswith("_heads") and name != "heads":
        return "transpose(1, 2): heads before positions"
    if name.endswith("_rot"):
        return f"RoPE: coordinates i and i+d/2 turned by position·θ_i   ({lane}·cos + rotate_half({lane})·sin)"
    if name.endswith("_shared"):
        return f"repeat each {lane} head H/G = {sizes['H'] // sizes['G']} times"
    if name == "mask":
        return _mask_words(tensors.get("mask"), sizes)
    if name == "scores":
        root = f"1/√{sizes['d']}" if np.isclose(scaling, sizes["d"] ** -0.5) else "scaling"
        return f"Q · Kᵀ · {scaling:.4g}   ({root}), per head"
    if name == "masked_scores":
        mask = tensors.get("mask")
        return "scores + mask" if mask is not None and mask.dtype != torch.bool else "dropped keys → −∞"
    words = {
        "embedding": f"word + position embeddings, {sizes.get('E')} wide",
        "embed_proj": "x · W_Pᵀ + b_P   (E\u00a0→\u00a0D): up to the layers' width",
        "block_input": f"hidden states entering layer {layer}",
        "input": (
            "the decoder's hidden states: the queries, L of them"
            if "memory" in tensors
            else "attention_norm(x): normalised before the attention (pre-norm)"
            if "block_input" in tensors
            else f"hidden states entering layer {layer}"
        ),
        "memory": "the encoder's last hidden states: K and V are read from them, S of them",
        "probs": "softmax over the keys: each row sums to 1",
        "heads": "weighted sum of value rows",
        "merged": "transpose(1, 2), reshape: heads side by side",
        "output": "merged · W_Oᵀ + b_O   (H·d\u00a0→\u00a0D)",
    }
    return words.get(name, name)


def _qkv_slice_words(lane: str, sizes: dict[str, int]) -> str:
    """Where Q, K or V sit in the fused projection's columns."""
    q, kv = sizes["H·d"], sizes["G·d"]
    start, stop = {"Q": (0, q), "K": (q, q + kv), "V": (q + kv, q + 2 * kv)}[lane]
    return f"columns {start}:{stop} of QKV, no copy"


def _mask_words(mask: torch.Tensor | None, sizes: dict[str, int]) -> str:
    if mask is None:
        return "no mask: nothing dropped"
    keep = mask if mask.dtype == torch.bool else torch.isfinite(mask)
    if keep.dim() == 4 and keep.shape[1] == keep.shape[2] == 1:  # key padding, (B, 1, 1, S)
        kept = ", ".join(str(int(k)) for k in keep.sum(-1).flatten())
        return f"keys kept per sentence: {kept} of S\u00a0=\u00a0{sizes['S']}"
    full = keep.expand(*keep.shape[:-2], sizes["L"], sizes["S"])
    return f"pairs kept: {int(full.flatten(-2)[0].sum())} of L·S = {sizes['L'] * sizes['S']}"
