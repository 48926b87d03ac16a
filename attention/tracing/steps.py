"""The words of the shape-flow diagram and the guided walk: each recorded step's title, the letters of
its axes and its operation in words. attention/tracing/trace.py gives every recorded step these.

Letters: B batch, L query length, S key/value length, D model width, H query heads,
G key/value heads, d head width, E embedding width (where a projection from it is recorded).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..models.layer_inputs import layer_input_part
from ..models.position_parts import POSITION_PARTS

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
    "v_norm": "V normalised",
    "scores": "scores Q·Kᵀ·scaling",
    "c2p": "c2p: content → position",
    "p2c": "p2c: position → content",
    "softcap": "soft-cap",
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
        "c2p": ("B", "H", "L", "S"),
        "p2c": ("B", "H", "L", "S"),
        "softcap": ("B", "H", "L", "S"),
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


# the module of each step that multiplies by a weight and may add a bias (attention/core/mha.py's names)
PROJECTIONS = {"qkv_proj": "qkv_proj", "q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output": "o_proj"}


def projection_biases(attention: nn.Module, embeddings: nn.Module | None = None) -> frozenset[str]:
    """The steps whose projection adds a bias, read from the loaded modules' parameters (a family's checkpoints
    differ: Qwen2's q, k and v have one and its o none, ModernBERT's none unless attention_bias): those of the
    attention's projections, and "embed_proj" where the embeddings' projection has one (ELECTRA; OPT's none)."""
    found = {step for step, module in PROJECTIONS.items() if _bias(getattr(attention, module, None))}
    if embeddings is not None and _bias(getattr(embeddings, "project", None)):
        found.add("embed_proj")
    return frozenset(found)


def _bias(module: nn.Module | None) -> bool:
    return module is not None and getattr(module, "bias", None) is not None


def layer_facts(config, layer: int, biases: frozenset[str] = frozenset(), attention: nn.Module | None = None) -> dict:
    """What a layer does that its tensors do not say: which projections add a bias (`projection_biases`), the
    norm's kind (Gemma's RMSNorm times 1 + weight) and whether this layer's attention reads x unnormed
    (ModernBERT's layer 0), what its position part says of its steps (models/position_parts.py), its window
    (and whether it looks back only), its score parts (`score_parts`), query_pre_attn_scalar, a norm after the
    attention or after the residual (post-norm, BERT's kind); what the embeddings sum (where a projection of them
    is drawn); read by `op_words`."""
    positions = POSITION_PARTS[config.positions.position_embedding_type]
    return {
        "biases": biases,
        "norm": (config.norms.norm, config.norms.norm_bias),
        "unnormed": layer == 0 and not config.norms.first_attention_norm,
        "relative_bias": positions.bias_in_mask,
        # the words of the steps the position part makes (q_rot, k_rot), and what it adds to the scores' words
        "position_words": {step: positions.words(step, config, layer) for step in positions.steps},
        "scores_note": positions.scores_note(config, layer),
        "window": config.window_of(layer),
        "causal": bool(config.attention.causal),
        "parts": score_parts(attention),
        "pre_attn_scalar": config.attention.query_pre_attn_scalar,
        "post_norm": config.norms.norm_after_sublayer,
        # BERT's kind: no norm before the sub-block, one after the residual adds its output
        "residual_norm": not config.norms.pre_norm and not config.norms.norm_after_sublayer,
        "embedding": _embedding_sum(config),
        "late_positions": config.positions.positions_after_projection,
        "layer_end": layer_input_part(config).words(config),  # what follows the feed-forward block (Gemma 4)
    }


def score_parts(attention: nn.Module | None) -> dict:
    """The steps the layer's score parts record or change, each with its part: its cap and sinks (score_parts.py)
    and its terms (models/disentangled.py); each part says in words what its step does."""
    return {step: part for part in _parts(attention) for step in (*part.steps, *getattr(part, "worded", ()))}


def recorded_maps(attention: nn.Module) -> int:
    """How many (B, H, L, S) maps the layer's score parts record besides the scores, masked scores and probs."""
    return sum(len(part.steps) for part in _parts(attention))


def _parts(attention: nn.Module | None) -> list:
    parts = [getattr(attention, "cap", None), getattr(attention, "sink", None), *getattr(attention, "terms", ())]
    parts.append(getattr(attention, "value_norm_part", None))  # Gemma 4's v_norm words its step
    return [part for part in parts if part is not None]


def _embedding_sum(config) -> str:
    """What the embeddings add up before a projection (blocks.Embeddings): words, token types, positions, a norm."""
    words = "word·√D" if config.embeddings.scale_embedding or config.embeddings.scale_embedding_in_dtype else "word"
    parts = [words] + (["token type"] if config.type_vocab_size else [])
    if (
        config.positions.position_embedding_type in ("absolute", "sinusoidal")
        and not config.positions.positions_after_projection
    ):
        parts.append("position" if config.positions.position_embedding_type == "absolute" else "sinusoidal position")
    return (
        " + ".join(parts)
        + " embeddings"
        + (f", then {_norm_kind(config.norms.norm)}" if config.norms.embedding_norm else "")
    )


def _norm_kind(norm: str) -> str:
    return "LayerNorm" if norm == "layer_norm" else "RMSNorm"


def _norm_scale(norm: tuple[str, bool]) -> str:
    """What a norm of blocks.make_norm multiplies the normalised x by: Gemma's RMSNorm (1 + weight)."""
    kind, bias = norm
    if kind == "rms_norm_offset":
        return "times (1 + its weight)"
    return "times its weight plus its bias" if kind == "layer_norm" and bias else "times its weight"


def op_words(
    name: str, tensors: dict, sizes: dict[str, int], scaling: float, layer: int, facts: dict | None = None
) -> str:
    facts = facts or {}
    part = facts.get("parts", {}).get(name)
    if part is not None:  # a step a family's part adds says what it does itself
        return part.words(name, scaling)
    lane = name[0].upper()
    kv = "G" if sizes["G"] != sizes["H"] else "H"
    width = "H·d" if lane == "Q" else f"{kv}·d"
    if name == "qkv_proj":
        laid = "each head's q, k, v side by side" if "q_proj" not in tensors else "Q, K and V in one"
        fused = qkv_width(sizes["H"], sizes["G"])
        return f"x · W_QKVᵀ{_plus_bias(name, 'QKV', facts)}   (D\u00a0→\u00a0{fused}): {laid}"
    if name in ("q_proj", "k_proj", "v_proj"):
        if "qkv_proj" in tensors:
            return _qkv_slice_words(lane, sizes)
        source = "memory" if lane in "KV" and "memory" in tensors else "x"  # cross-attention: K, V from it
        return f"{source} · W_{lane}ᵀ{_plus_bias(name, lane, facts)}   (D\u00a0→\u00a0{width})"
    if name.endswith("_view") and "qkv_proj" in tensors and "q_proj" not in tensors:  # laid out per head
        column = "qkv".index(name[0])
        return f"view QKV as H\u00a0×\u00a03·d; {lane} is columns {column}·d:{column + 1}·d of each head's, no copy"
    if name.endswith("_view"):
        return f"view: split {width} into {width[0]}\u00a0×\u00a0d, no copy"
    if name.endswith("_norm"):
        tensor = tensors.get(name)
        over = "each head's d" if tensor is not None and tensor.dim() == 4 else f"all heads' {width}"
        norm = facts.get("norm", ("rms_norm", False))
        return f"{_norm_kind(norm[0])} of {lane} over {over}, {_norm_scale(norm)}"
    if name.endswith("_heads") and name != "heads":
        return "transpose(1, 2): heads before positions"
    if name.endswith("_rot"):
        return facts.get("position_words", {}).get(name) or f"{lane} turned by position"
    if name.endswith("_shared"):
        return f"repeat each {lane} head H/G = {sizes['H'] // sizes['G']} times"
    if name == "mask":
        return _window_words(facts, sizes) + _mask_words(tensors.get("mask"), sizes, facts)
    if name == "scores":
        note = facts.get("scores_note", "")  # the position part's: a layer without positions (NoPE)
        return f"Q · Kᵀ · {scaling:.4g}   ({_scale_words(scaling, tensors, sizes, facts)}), per head{note}"
    if name == "masked_scores":
        return _masked_words(tensors, facts)
    words = {
        "embedding": f"{facts.get('embedding', 'word + position embeddings')}, {sizes.get('E')} wide",
        "embed_proj": f"x · W_Pᵀ{_plus_bias(name, 'P', facts)}   (E\u00a0→\u00a0D): up to the layers' width"
        + (", then position embeddings added" if facts.get("late_positions") else ""),
        "block_input": f"hidden states entering layer {layer}",
        "input": (
            "the decoder's hidden states: the queries, L of them"
            if "memory" in tensors
            else f"x as it is: layer {layer} has no norm before its attention (the others' are pre-norm)"
            if facts.get("unnormed")
            else _pre_norm_words(facts)
            if "block_input" in tensors
            else f"hidden states entering layer {layer}, not normalised first: the norm comes after the attention"
            if facts.get("post_norm")
            else f"hidden states entering layer {layer}"
        ),
        "memory": "the encoder's last hidden states: K and V are read from them, S of them",
        "probs": "softmax over the keys: each row sums to 1",
        "heads": "weighted sum of value rows",
        "merged": "transpose(1, 2), reshape: heads side by side",
        "output": f"merged · W_Oᵀ{_plus_bias(name, 'O', facts)}   (H·d\u00a0→\u00a0D)"
        + (", then post_attention_layernorm before the residual adds it" if facts.get("post_norm") else "")
        + (
            f", then {_norm_kind(facts['norm'][0])}(x + this): the norm after the residual (post-norm)"
            if facts.get("residual_norm")
            else ""
        )
        + facts.get("layer_end", ""),
    }
    return words.get(name, name)


def _plus_bias(step: str, letters: str, facts: dict) -> str:
    """ " + b_Q" where the step's projection has a bias tensor (facts["biases"], read from the loaded model)."""
    return f" + b_{letters}" if step in facts.get("biases", ()) else ""


def _pre_norm_words(facts: dict) -> str:
    norm = facts.get("norm")
    kind = "normalised" if norm is None else f"{_norm_kind(norm[0])} {_norm_scale(norm)},"
    return f"attention_norm(x): {kind} before the attention (pre-norm)"


def _qkv_slice_words(lane: str, sizes: dict[str, int]) -> str:
    """Where Q, K or V sit in the fused projection's columns."""
    q, kv = sizes["H·d"], sizes["G·d"]
    start, stop = {"Q": (0, q), "K": (q, q + kv), "V": (q + kv, q + 2 * kv)}[lane]
    return f"columns {start}:{stop} of QKV, no copy"


def _mask_words(mask: torch.Tensor | None, sizes: dict[str, int], facts: dict) -> str:
    """What the mask holds (T5's position bias, causality) and how many keys or pairs it keeps: of the first
    sentence's first head."""
    if mask is None:
        return "no mask: nothing dropped"
    kind = (
        "each head's learned bias for each query-key distance bucket, −∞ where dropped; "
        if facts.get("relative_bias")
        else "causal: each query sees itself and the keys before it; "
        if facts.get("causal") and facts.get("window") is None
        else ""
    )
    keep = mask if mask.dtype == torch.bool else torch.isfinite(mask)
    if keep.dim() == 4 and keep.shape[1] == keep.shape[2] == 1:  # key padding, (B, 1, 1, S)
        kept = ", ".join(str(int(k)) for k in keep.sum(-1).flatten())
        return f"{kind}keys kept per sentence: {kept} of S\u00a0=\u00a0{sizes['S']}"
    full = keep.expand(*keep.shape[:-2], sizes["L"], sizes["S"]).reshape(-1, sizes["L"] * sizes["S"])  # (B·H, L·S)
    return f"{kind}pairs kept: {int(full[0].sum())} of L·S = {sizes['L'] * sizes['S']}"


def _scale_words(scaling: float, tensors: dict, sizes: dict[str, int], facts: dict) -> str:
    """Where the factor on Q·Kᵀ comes from: 1/√d, query_pre_attn_scalar (Gemma2), or DeBERTa's position terms."""
    d, scalar = sizes["d"], facts.get("pre_attn_scalar")
    terms = [n for n in ("c2p", "p2c") if n in tensors]
    if terms and np.isclose(scaling, (d * (1 + len(terms))) ** -0.5):
        return f"1/√({d}·{1 + len(terms)}): d times 1 + {len(terms)} position terms"
    if scalar is not None and np.isclose(scaling, scalar**-0.5):
        return f"1/√{scalar:g}: query_pre_attn_scalar"
    return f"1/√{d}" if np.isclose(scaling, d**-0.5) else "unscaled" if scaling == 1 else "scaling"


def _window_words(facts: dict, sizes: dict[str, int]) -> str:
    window = facts.get("window")
    if window is None:
        return ""
    if facts.get("causal"):
        return f"sliding window of {window}: each query sees the {window} latest keys, itself included; "
    return f"local window of {window}: keys fewer than {window} positions away either side; "


def _masked_words(tensors: dict, facts: dict) -> str:
    """The masked scores: DeBERTa's position terms added, then the mask (additive, or dropped keys → −∞), T5's
    holding its position bias."""
    mask = tensors.get("mask")
    if facts.get("relative_bias") and mask is not None:
        return "scores + mask: each head's distance bias added, dropped keys → −∞"
    terms = "".join(f" + {n}" for n in ("c2p", "p2c") if n in tensors)
    if terms:
        return f"scores{terms}" + ("" if mask is None else " + mask" if mask.dtype != torch.bool else ", masked → −∞")
    return "scores + mask" if mask is not None and mask.dtype != torch.bool else "dropped keys → −∞"
