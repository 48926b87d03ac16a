"""What each GGUF architecture this app reads declares: the family that runs it, its metadata keys as that
family's config.json names (transformers' GGUF_CONFIG_MAPPING, with the keys it leaves out), and what llama.cpp's
convert_hf_to_gguf.py did to its tensors that reading them must undo (`Architecture`). Tensor names are not listed
here: `hf_names` inverts the `gguf` package's own table (gguf.get_tensor_name_map, the one the converter names
them by) and keeps, for each GGUF name, the transformers name the family's rules take.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelLoadError
from ..models import Family

# "<architecture>.<key>" -> config.json, for the Llama-style decoders
_DECODER = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "rope.freq_base": "rope_theta",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.key_length": "head_dim",
    "vocab_size": "vocab_size",
}
_NEEDED = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count", "context_length")
_GPT2 = {
    "context_length": "n_positions",
    "block_count": "n_layer",
    "feed_forward_length": "n_inner",
    "embedding_length": "n_embd",
    "attention.head_count": "n_head",
    "attention.layer_norm_epsilon": "layer_norm_epsilon",
    "vocab_size": "vocab_size",
}
_WINDOW = {"attention.sliding_window": "sliding_window"}
_T5 = {
    "context_length": "n_positions",
    "block_count": "num_layers",
    "decoder_block_count": "num_decoder_layers",
    "feed_forward_length": "d_ff",
    "embedding_length": "d_model",
    "attention.key_length": "d_kv",
    "attention.head_count": "num_heads",
    "attention.layer_norm_epsilon": "layer_norm_epsilon",
    "attention.layer_norm_rms_epsilon": "layer_norm_epsilon",  # the converter writes both, the same
    "attention.relative_buckets_count": "relative_attention_num_buckets",
    "decoder_start_token_id": "decoder_start_token_id",
    "vocab_size": "vocab_size",
}
_CAPS = {"attn_logit_softcapping": "attn_logit_softcapping", "final_logit_softcapping": "final_logit_softcapping"}
_GEMMA3 = {
    **_DECODER,
    **_WINDOW,
    "final_logit_softcapping": "final_logit_softcapping",
    "rope.freq_base_swa": "rope_local_base_freq",
    "attention.sliding_window_pattern": "windowed_layers",
}


def _rotary_base(values: dict) -> None:
    """rope_theta as transformers 5's rope_parameters (unscaled: a file that scales is refused before)."""
    if "rope_theta" in values:
        values["rope_parameters"] = dict(rope_type="default", rope_theta=values.pop("rope_theta"))


def _gemma_scale(values: dict, layers_27b: int) -> None:
    """query_pre_attn_scalar, which the file does not hold: as llama.cpp runs it, hidden_size / heads for the
    27B model (told by its layer count) and head_dim for the others (transformers' values for the released ones)."""
    width = values["hidden_size"] // values["num_attention_heads"]
    big = values["num_hidden_layers"] == layers_27b
    values["query_pre_attn_scalar"] = width if big else values.get("head_dim", width)


def _gemma2(values: dict) -> None:
    _rotary_base(values)
    _gemma_scale(values, 46)


def _gemma3(values: dict) -> None:
    """Gemma3's full layers turn on the file's base, its windowed ones on rope.freq_base_swa (10,000 where the file
    does not say: llama.cpp's); each sixth layer is full unless attention.sliding_window_pattern lists the windowed
    ones; no attention.sliding_window: no window (the converter leaves it out for a model without one)."""
    base, local = values.pop("rope_theta", 1_000_000.0), values.pop("rope_local_base_freq", 10_000.0)
    values["rope_parameters"] = {
        "full_attention": dict(rope_type="default", rope_theta=base),
        "sliding_attention": dict(rope_type="default", rope_theta=local),
    }
    values.setdefault("sliding_window", None)
    windowed = values.pop("windowed_layers", None)
    if windowed is not None:
        values["layer_types"] = ["sliding_attention" if w else "full_attention" for w in windowed]
    _gemma_scale(values, 62)


def _phi3(values: dict) -> None:
    """rope.dimension_count (the rotated coordinates of a head) as partial_rotary_factor; a sliding window of 0, which
    the converter writes for a model without one (Phi-4's), as none."""
    if values.get("sliding_window") == 0:
        del values["sliding_window"]
    rotated = values.pop("rotary_dims", None)
    _rotary_base(values)
    if rotated is not None:
        width = values.get("head_dim") or values["hidden_size"] // values["num_attention_heads"]
        values.setdefault("rope_parameters", {})["partial_rotary_factor"] = rotated / width


def _olmo2(values: dict) -> None:
    if "sliding_window" in values:  # convert_hf_to_gguf.py writes OLMo3 as olmo2, with its window
        raise ModelLoadError("the GGUF file's olmo2 model has a sliding window (OLMo3's), which this app does not run")
    _rotary_base(values)


def _smollm3(values: dict) -> None:
    """SmolLM3's layers without positions: each fourth, as llama.cpp fixes it (n_no_rope_layer_step)."""
    _rotary_base(values)
    values["no_rope_layer_interval"] = 4


def _t5(values: dict) -> None:
    """T5's decoder as deep as its encoder unless decoder_block_count says otherwise, and the relative distances
    bucketed up to 128 (llama.cpp's fixed reach: the file does not hold relative_attention_max_distance)."""
    values.setdefault("num_decoder_layers", values["num_layers"])
    values["relative_attention_max_distance"] = 128


def _t5_layout(values: dict, names: frozenset[str]) -> None:
    """T5's feed-forward as llama.cpp runs it: gated GELU where the file has ffn_gate tensors (v1.1, Flan-T5),
    else ReLU (v1.0)."""
    gated = any(re.fullmatch(r"(enc|dec)\.blk\.\d+\.ffn_gate\.weight", name) for name in names)
    values["feed_forward_proj"] = "gated-gelu" if gated else "relu"


def linear_scaling(values: dict, factor: Any) -> None:
    """rope.scaling.type linear (Gemma3 4B and up): the full layers' positions divided by the factor."""
    params = values.get("rope_parameters") or {}
    full = params.get("full_attention", params)
    if not full or isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0:
        raise ModelLoadError(f"the GGUF file's linear rotary scaling has no use here or no factor ({factor!r})")
    full.update(rope_type="linear", factor=float(factor))


@dataclass(frozen=True)
class Architecture:
    name: str  # general.architecture
    family: str  # the FAMILIES key of the model that runs it
    config: dict[str, str]  # "<name>.<key>" -> config.json name
    fill: Callable[[dict], None] = _rotary_base  # the values the family reads, from those `config` gave
    permuted: bool = False  # q and k in llama.cpp's rotary layout (LlamaModel.permute): turned back
    norm_offset: bool = False  # RMSNorm weights saved as 1 + w (Gemma's): 1 is taken off again
    transposed: str | None = None  # GGUF names of the weights saved (out, in) where transformers saves (in, out)
    needed: tuple[str, ...] = field(default=_NEEDED)
    layout: Callable[[dict, frozenset[str]], None] | None = None  # values the GGUF tensor names tell


ARCHITECTURES = {
    a.name: a
    for a in (
        Architecture("llama", "llama", {**_DECODER, "rope.dimension_count": "head_dim"}, permuted=True),
        Architecture("smollm3", "smollm3", {**_DECODER, "rope.dimension_count": "head_dim"}, _smollm3, permuted=True),
        Architecture("olmo2", "olmo2", {**_DECODER, **_WINDOW}, _olmo2),
        Architecture("qwen2", "qwen2", _DECODER),
        Architecture("qwen3", "qwen3", _DECODER),
        Architecture("phi3", "phi3", {**_DECODER, **_WINDOW, "rope.dimension_count": "rotary_dims"}, _phi3),
        Architecture("gemma", "gemma", _DECODER, norm_offset=True),
        Architecture("gemma2", "gemma2", {**_DECODER, **_WINDOW, **_CAPS}, _gemma2, norm_offset=True),
        Architecture("gemma3", "gemma3_text", _GEMMA3, _gemma3, norm_offset=True),
        Architecture(
            "gpt2",
            "gpt2",
            _GPT2,
            lambda values: None,
            transposed=r"blk\.\d+\.(attn_qkv|attn_output|ffn_up|ffn_down)\.weight",
            needed=("block_count", "embedding_length", "attention.head_count", "context_length"),
        ),
        Architecture(
            "t5",
            "t5",
            _T5,
            _t5,
            needed=("block_count", "embedding_length", "feed_forward_length", "attention.head_count"),
            layout=_t5_layout,
        ),
    )
}


def hf_names(architecture: str, family: Family, layers: int) -> dict[str, str]:
    """GGUF tensor name (without .weight or .bias) -> the transformers name the family reads it as: of the names
    gguf's table maps to it (every model's it knows), the one under the family's prefix that its rules rename, or
    else one it sets aside as a head (lm_head). A GGUF name with none is left out (the file's is then refused)."""
    import gguf

    kind = next(k for k, name in gguf.MODEL_ARCH_NAMES.items() if name == architecture)
    candidates: dict[str, list[str]] = {}
    for theirs, (_, name) in gguf.get_tensor_name_map(kind, layers).mapping.items():
        candidates.setdefault(name, []).append(theirs)
    found = {}
    for name, names in candidates.items():
        taken = [n for n in names if n.startswith(family.prefix) and family.rename(n[len(family.prefix) :] + ".weight")]
        heads = [n for n in names if family.is_ignored(n + ".weight")]
        if taken or heads:
            found[name] = (taken or heads)[0]
    return found


def hf_name(names: dict[str, str], gguf_name: str, title: str) -> str:
    """A GGUF tensor's transformers name, from `hf_names`; a ModelLoadError naming it if it has none."""
    stem, dot, suffix = gguf_name.rpartition(".")
    if dot and stem in names and suffix in ("weight", "bias"):
        return f"{names[stem]}.{suffix}"
    raise ModelLoadError(f"the GGUF file has a tensor this {title} model does not know: '{gguf_name}'")


def is_transposed(architecture: Architecture, gguf_name: str) -> bool:
    return architecture.transposed is not None and re.fullmatch(architecture.transposed, gguf_name) is not None
