"""A GGUF file (llama.cpp's one-file format: metadata, tokenizer and quantized tensors) read as a checkpoint.

`GGUFCheckpoint` reads the file with the `gguf` package's GGUFReader (a memory map: no tensor data is read
until asked for). Its metadata becomes the config.json values of the family that runs its architecture
(`config_values`; the architectures and what each declares: gguf_archs.py), so the family's own reading makes the
ModelConfig; its tensors come under the names transformers gives them (model.layers.N.self_attn.q_proj.weight ...),
so the family's rules rename them and convert.copy_weights copies them strictly, as for any checkpoint. Each
tensor is dequantized when it is asked for, with the package's own routines (gguf.quants.dequantize, as
transformers' GGUF loader does), then given back the layout transformers saved it in: a Llama's q and k turned
back from llama.cpp's rotary layout (`unpermute`, transformers' reverse permute), Gemma's norms less the 1 the
converter added, GPT-2's projections transposed back to (in, out). Every failure is a ModelLoadError: a file that
is not GGUF or is cut short, an architecture or a tensor type this package does not read (each named), a tensor
with no place in the model.
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
from ..models import FAMILIES
from .gguf_archs import ARCHITECTURES, hf_name, hf_names, is_transposed, linear_scaling

# tensors that rescale the rotary frequencies (Llama 3.1's rope_freqs, Phi-3's long-context factors)
_ROPE_FACTORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
_ROTATED = re.compile(r"blk\.\d+\.attn_(q|k)\.")


def unpermute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """A q or k projection (its weight (n_head·d, E) or bias) back from llama.cpp's rotary layout, which
    convert_hf_to_gguf.py made by interleaving each head's two halves: transformers' _reverse_permute_weights."""
    dim = weights.shape[0] // n_head // 2
    return weights.reshape(n_head, dim, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)


def readable_types() -> tuple[str, ...]:
    """The tensor types read: those gguf.quants.dequantize turns into floats (F32, F16 and every quantization it
    has a routine for: llama.cpp's block, k- and i-quants), not its integer types."""
    from gguf.quants import _type_traits

    return ("F32", "F16", *sorted(kind.name for kind in _type_traits))


def transformers_reads(architecture: str) -> bool:
    """Whether transformers makes a model config of a GGUF file of `architecture` (which AutoTokenizer reads)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return architecture in GGUF_SUPPORTED_ARCHITECTURES


def _unreadable(path: Path, err: Exception) -> ModelLoadError:
    """The error for a file GGUFReader could not read: a tensor type the gguf package has no number for, named,
    or a file that is not GGUF or is cut short."""
    unknown = re.search(r"(\d+)\)? is not a valid GGMLQuantizationType", str(err))
    if unknown:
        return ModelLoadError(
            f"{path.name} stores a tensor as GGML type {unknown.group(1)}, which the installed gguf package does "
            f"not know (it reads {', '.join(readable_types())})"
        )
    return ModelLoadError(f"{path.name} is not a readable GGUF file ({type(err).__name__}: {err})")


class GGUFCheckpoint(Mapping[str, torch.Tensor]):
    """The tensors of a GGUF file under transformers' names, each dequantized to float32 when asked for; with
    `shapes_only`, empty tensors on the meta device (the name and shape: what the checks before building read)."""

    def __init__(self, path: Path, shapes_only: bool = False):
        from gguf import GGUFReader

        self.path, self.shapes_only = path, shapes_only
        try:
            self.reader = GGUFReader(path)
        except Exception as err:  # noqa: BLE001  (a file cut short or not GGUF: ValueError, struct, numpy errors)
            raise _unreadable(path, err) from None
        self.architecture = self.field("general.architecture")
        if not isinstance(self.architecture, str):
            raise ModelLoadError(f"{path.name} does not say which model it holds (no general.architecture)")
        if self.architecture not in ARCHITECTURES:
            raise ModelLoadError(
                f"'{self.architecture}' GGUF models are not supported: "
                f"the architecture must be one of {', '.join(ARCHITECTURES)}"
            )
        self.kind = ARCHITECTURES[self.architecture]
        self.family = FAMILIES[self.kind.family]
        self.tensors = self._tensors()

    def _tensors(self) -> dict:
        """The file's tensors by their transformers names; a ModelLoadError for one this app does not read."""
        layers = self.field(f"{self.architecture}.block_count")
        if isinstance(layers, bool) or not isinstance(layers, int) or not 0 < layers <= 1024:
            raise ModelLoadError(f"the GGUF file's {self.architecture}.block_count is not a layer count: {layers!r}")
        decoder = self.field(f"{self.architecture}.decoder_block_count", layers)  # T5's, where it differs
        if isinstance(decoder, bool) or not isinstance(decoder, int) or not 0 < decoder <= 1024:
            raise ModelLoadError(f"the GGUF file's {self.architecture}.decoder_block_count is not a layer count")
        names, types = hf_names(self.architecture, self.family, max(layers, decoder)), readable_types()
        tensors = {}
        for tensor in self.reader.tensors:
            if tensor.name in _ROPE_FACTORS:
                raise ModelLoadError(
                    f"the GGUF file scales its rotary frequencies ({tensor.name.removesuffix('.weight')}), "
                    "which this app does not"
                )
            if tensor.tensor_type.name not in types:
                raise ModelLoadError(
                    f"tensor '{tensor.name}' is stored as {tensor.tensor_type.name}, a GGUF type this app does not "
                    f"read (it reads {', '.join(types)})"
                )
            tensors[hf_name(names, tensor.name, self.family.title)] = tensor
        return tensors

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
        """The metadata as the config.json values of the family that runs the architecture: its sizes, rotary
        base, norm epsilon..., whether the output head is the token embeddings (no output.weight), the special
        tokens."""
        arch = self.architecture
        missing = [key for key in self.kind.needed if f"{arch}.{key}" not in self.reader.fields]
        if missing:
            raise ModelLoadError(f"the GGUF file does not give {arch}.{missing[0]}")
        given = [(key, ours) for key, ours in self.kind.config.items() if f"{arch}.{key}" in self.reader.fields]
        values = {ours: self.field(f"{arch}.{key}") for key, ours in given}
        scaling = self.field(f"{arch}.rope.scaling.type", "none")
        if scaling not in ("none", "linear"):
            raise ModelLoadError(f"the GGUF file scales its rotary positions ('{scaling}'), which this app does not")
        embeddings = next((t for t in self.tensors.values() if t.name == "token_embd.weight"), None)
        tokens = self.reader.fields.get("tokenizer.ggml.tokens")
        if embeddings is not None:  # its rows (GGUF lists sizes innermost first): Gemma3's converter cuts the spare
            values["vocab_size"] = int(embeddings.shape[-1])
        elif "vocab_size" not in values and tokens is not None:  # as transformers: the tokenizer's size
            values["vocab_size"] = len(tokens.data)
        try:
            if self.kind.layout is not None:
                self.kind.layout(values, frozenset(t.name for t in self.tensors.values()))
            self.kind.fill(values)
        except (TypeError, ZeroDivisionError, KeyError) as err:
            raise ModelLoadError(f"the GGUF file's {arch} sizes do not fit together ({type(err).__name__})") from None
        if scaling == "linear":
            linear_scaling(values, self.field(f"{arch}.rope.scaling.factor"))
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
        tensor = self.tensors[name]
        shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists a tensor's sizes innermost first
        transposed = is_transposed(self.kind, tensor.name)
        if self.shapes_only:
            return torch.empty(shape[::-1] if transposed else shape, device="meta")
        weights = self._weights(tensor, shape)
        if transposed:  # back to transformers' (in, out): a view, which the family's rules turn again
            weights = weights.T
        return torch.from_numpy(weights)

    def _weights(self, tensor, shape: tuple[int, ...]) -> np.ndarray:
        """A tensor dequantized to float32 as transformers saved it: q and k out of llama.cpp's rotary layout,
        Gemma's norms less the 1 the converter added."""
        from gguf.quants import dequantize

        try:
            weights = dequantize(tensor.data, tensor.tensor_type).reshape(shape)
        except (ValueError, NotImplementedError) as err:
            raise ModelLoadError(f"tensor '{tensor.name}' could not be dequantized ({err})") from None
        if self.kind.permuted and _ROTATED.match(tensor.name):
            n_head, n_kv = self.heads()
            weights = unpermute(weights, n_head if ".attn_q." in tensor.name else n_kv)
        if self.kind.norm_offset and tensor.name.endswith("norm.weight"):
            weights = weights - np.float32(1.0)  # a new array, as transformers' Gemma2TensorProcessor makes it
        if not weights.flags.writeable:  # a float32 tensor is a view of the memory-mapped file
            weights = weights.copy()
        return weights

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)
