"""A GGUF file (llama.cpp's one-file format: metadata, tokenizer and quantized tensors) read as a checkpoint.

`GGUFCheckpoint` reads the file with the `gguf` package's GGUFReader (a memory map: no tensor data is read
until asked for). Its metadata becomes the config.json values of the family it names (`config_values`: the
`llama` architecture), so the family's own reading makes the ModelConfig; its tensors come under the names
transformers gives them (model.layers.N.self_attn.q_proj.weight ...), so the family's rules rename them and
convert.copy_weights copies them strictly, as for any checkpoint. Each tensor is dequantized when it is asked
for, with the package's own routines (gguf.quants.dequantize, as transformers' GGUF loader does), and the q and
k projections are turned back from llama.cpp's rotary layout (`unpermute`, transformers' reverse permute).
Every failure is a ModelLoadError: a file that is not GGUF or is cut short, an architecture or a tensor type
this package does not read, a tensor with no place in the model.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ModelLoadError

ARCHITECTURES = ("llama",)
# the tensor types read (gguf.quants.dequantize's): floats, llama.cpp's block quantizations and its k-quants
TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
# "<architecture>.<key>" -> the config.json name (transformers' GGUF_CONFIG_MAPPING for llama)
_CONFIG = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "rope.dimension_count": "head_dim",
    "rope.freq_base": "rope_theta",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "vocab_size": "vocab_size",
}
_NEEDED = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count", "context_length")
_BLOCK = r"blk\.(\d+)\."
# GGUF tensor name -> transformers' (llama.cpp's convert_hf_to_gguf.py names them the other way)
_TENSORS = (
    (r"token_embd\.weight", r"model.embed_tokens.weight"),
    (r"output_norm\.weight", r"model.norm.weight"),
    (r"output\.weight", r"lm_head.weight"),
    (_BLOCK + r"attn_norm\.weight", r"model.layers.\1.input_layernorm.weight"),
    (_BLOCK + r"attn_(q|k|v)\.(weight|bias)", r"model.layers.\1.self_attn.\2_proj.\3"),
    (_BLOCK + r"attn_output\.(weight|bias)", r"model.layers.\1.self_attn.o_proj.\2"),
    (_BLOCK + r"ffn_(gate|up|down)\.(weight|bias)", r"model.layers.\1.mlp.\2_proj.\3"),
    (_BLOCK + r"ffn_norm\.weight", r"model.layers.\1.post_attention_layernorm.weight"),
)
_ROTATED = re.compile(r"blk\.\d+\.attn_(q|k)\.")


def transformers_name(name: str) -> str:
    """A GGUF tensor's name as transformers' Llama names it; a ModelLoadError for a name with no place here."""
    for pattern, target in _TENSORS:
        if re.fullmatch(pattern, name):
            return re.sub(pattern, target, name)
    raise ModelLoadError(f"the GGUF file has a tensor this Llama model does not know: '{name}'")


def unpermute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """A q or k projection (its weight (n_head·d, E) or bias) back from llama.cpp's rotary layout, which
    convert_hf_to_gguf.py made by interleaving each head's two halves: transformers' _reverse_permute_weights."""
    dim = weights.shape[0] // n_head // 2
    return weights.reshape(n_head, dim, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)


class GGUFCheckpoint(Mapping[str, torch.Tensor]):
    """The tensors of a GGUF file under transformers' names, each dequantized to float32 when asked for; with
    `shapes_only`, empty tensors on the meta device (the name and shape: what the checks before building read)."""

    def __init__(self, path: Path, shapes_only: bool = False):
        from gguf import GGUFReader

        self.path, self.shapes_only = path, shapes_only
        try:
            self.reader = GGUFReader(path)
        except Exception as err:  # noqa: BLE001  (a file cut short or not GGUF: ValueError, struct, numpy errors)
            raise ModelLoadError(f"{path.name} is not a readable GGUF file ({type(err).__name__}: {err})") from None
        self.architecture = self.field("general.architecture")
        if self.architecture not in ARCHITECTURES:
            raise ModelLoadError(
                f"'{self.architecture}' GGUF models are not supported: "
                f"the architecture must be {', '.join(ARCHITECTURES)}"
            )
        self.tensors = {}
        for tensor in self.reader.tensors:
            if tensor.name == "rope_freqs.weight":  # Llama 3.1's frequency factors
                raise ModelLoadError(
                    "the GGUF file scales its rotary frequencies (rope_freqs), which this app does not"
                )
            if tensor.tensor_type.name not in TYPES:
                raise ModelLoadError(
                    f"tensor '{tensor.name}' is stored as {tensor.tensor_type.name}, a GGUF type this app does not "
                    f"read (it reads {', '.join(TYPES)})"
                )
            self.tensors[transformers_name(tensor.name)] = tensor

    def with_data(self) -> GGUFCheckpoint:
        """This file's tensors with their data (dequantized when asked for), from the same reader."""
        checkpoint = copy.copy(self)
        checkpoint.shapes_only = False
        return checkpoint

    def field(self, key: str, default: Any = None) -> Any:
        """A metadata value (a str, number, bool or list), `default` if the file has none."""
        field = self.reader.fields.get(key)
        return default if field is None else field.contents()

    def config_values(self) -> dict:
        """The metadata as the config.json values of a transformers Llama: sizes, rotary base, norm epsilon,
        whether the output head is the token embeddings (no output.weight), the special tokens."""
        arch = self.architecture
        missing = [key for key in _NEEDED if f"{arch}.{key}" not in self.reader.fields]
        if missing:
            raise ModelLoadError(f"the GGUF file does not give {arch}.{missing[0]}")
        given = [(key, ours) for key, ours in _CONFIG.items() if f"{arch}.{key}" in self.reader.fields]
        values = {ours: self.field(f"{arch}.{key}") for key, ours in given}
        scaling = self.field(f"{arch}.rope.scaling.type", "none")
        if scaling != "none":
            raise ModelLoadError(f"the GGUF file scales its rotary positions ('{scaling}'), which this app does not")
        if "vocab_size" not in values:  # as transformers: the tokenizer's size
            values["vocab_size"] = len(self.reader.fields["tokenizer.ggml.tokens"].data)
        if "rope_theta" in values:
            values["rope_parameters"] = dict(rope_type="default", rope_theta=values.pop("rope_theta"))
        values["attention_dropout"] = 0.0  # no training settings in the file: transformers' default
        values["tie_word_embeddings"] = "lm_head.weight" not in self.tensors
        values["attention_bias"] = any(name.endswith("q_proj.bias") for name in self.tensors)
        values["mlp_bias"] = any(name.endswith("up_proj.bias") for name in self.tensors)
        for token in ("bos", "eos", "padding"):
            if f"tokenizer.ggml.{token}_token_id" in self.reader.fields:
                values[f"{token.replace('padding', 'pad')}_token_id"] = self.field(f"tokenizer.ggml.{token}_token_id")
        return values

    def heads(self) -> tuple[int, int]:
        arch = self.architecture
        n_head = self.field(f"{arch}.attention.head_count")
        return n_head, self.field(f"{arch}.attention.head_count_kv", n_head)

    def __getitem__(self, name: str) -> torch.Tensor:
        from gguf.quants import dequantize

        tensor = self.tensors[name]
        shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists a tensor's sizes innermost first
        if self.shapes_only:
            return torch.empty(shape, device="meta")
        try:
            weights = dequantize(tensor.data, tensor.tensor_type).reshape(shape)
        except (ValueError, NotImplementedError) as err:
            raise ModelLoadError(f"tensor '{tensor.name}' could not be dequantized ({err})") from None
        if _ROTATED.match(tensor.name):
            n_head, n_kv = self.heads()
            weights = unpermute(weights, n_head if ".attn_q." in tensor.name else n_kv)
        if not weights.flags.writeable:  # a float32 tensor is a view of the memory-mapped file
            weights = weights.copy()
        return torch.from_numpy(weights)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)
