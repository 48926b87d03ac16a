"""Loading a checkpoint into our model: `load_model` (any family) and `load_bert`, and what they report.

The steps, each in its own module: where the files are (sources.py: the bundled default, a folder, a
hub id); config.json's model_type picks the family (attention/models/); the weights' names and shapes,
read from the files' headers (checkpoint.py), are checked against a model built on the meta device
before any data is read; then the tensors are read, renamed with the family's map and copied
strictly (convert.py), the generation config is read once (processors.attach: `model.generation`), and the
folder's own tokenizer is loaded.

The checkpoint is held once, not twice: safetensors files are read tensor by tensor as they are
renamed, each cast to the asked-for dtype and moved to the asked-for device, and the model is built
on the meta device (no memory, no random initialisation) and takes those tensors as its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config import ConfigError, ModelConfig, read_json
from ..errors import ModelLoadError
from ..models import FAMILIES, Family, build_model
from ..writing.processors import attach, settings_from_values
from .checkpoint import read_checkpoint
from .checkpoint_sizes import WeightBudget
from .convert import LAYERS_HINT, check_tensors, convert_checkpoint, copy_weights
from .gguf import GGUFCheckpoint, transformers_reads
from .sources import DEFAULT_NAME, gguf_source, resolve_source
from .tokenizer import FirstUseTokenizer, load_tokenizer


class DeviceUnavailable(ModelLoadError):
    """A GPU asked for that this machine does not have: `device` as asked for, and `reason`, why not
    (a clause, e.g. "torch finds no CUDA GPU on this machine (...)")."""

    def __init__(self, device: str, reason: str):
        super().__init__(f"device '{device}' was asked for, but {reason}: {DEVICE_HINT}")
        self.device, self.reason = device, reason


@dataclass(frozen=True)
class LoadReport:
    """What a loaded model carries as `model.load_report`: what was asked for and what was read."""

    source: str  # what was asked for, or DEFAULT_NAME
    path: str  # the folder the files came from
    weights_file: str
    ignored_keys: tuple[str, ...]  # checkpoint tensors that are not part of the encoder
    weight_names: dict[str, str] = field(default_factory=dict, compare=False)  # ours -> the checkpoint's
    device: str = "cpu"  # where the weights are
    dtype: str = "float32"  # the weights' dtype (the kept attention maps are float32 whatever it is)


def load_model(
    source: str | os.PathLike | None = None,
    *,
    downloads: bool = True,
    bin_files: bool = True,
    device: str | torch.device | None = "cpu",
    dtype: str | torch.dtype | None = None,
):
    """Load a checkpoint of any supported family into our model. Returns (model, tokenizer).

    source: None for the bundled all-MiniLM-L6-v2, a folder with config.json, model.safetensors
    (or pytorch_model.bin) and tokenizer files, or a hub id such as 'bert-base-uncased'. The
    family comes from config.json's model_type: bert, roberta, xlm-roberta, distilbert, electra, gpt2,
    gpt_neox, opt, llama, mistral, qwen2, qwen3, olmo2, or the encoder-decoders bart, mbart, marian and t5
    (an EncoderDecoder, whose forward takes decoder_input_ids too and returns a Seq2SeqOutput). The
    folder may hold the base model or a task model (masked LM, classifier, LM head ...): the
    task head's tensors are listed in `load_report.ignored_keys`. The tokenizer is the folder's own,
    transformers' fast tokenizer (the bundled model's is built at its first use: attention/load/tokenizer.py).
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


def load_bert(
    source: str | os.PathLike | None = None,
    *,
    device: str | torch.device | None = "cpu",
    dtype: str | torch.dtype | None = None,
):
    """Load a BERT checkpoint into our model. Returns (model, tokenizer).

    As load_model, but a checkpoint of any other family is refused with a ModelLoadError naming it.
    """
    return _load(source, "bert", device=device, dtype=dtype)


# ---- device and precision -------------------------------------------------------------------------

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}
DEVICE_HINT = "use device='cpu', or device='auto' to take a GPU only when there is one"


def resolve_device(device: str | torch.device | None = "cpu") -> torch.device:
    """ "cpu" (or None), "cuda", "cuda:N", a torch.device, or "auto": CUDA when torch.cuda.is_available(),
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
        raise DeviceUnavailable(
            str(device), "torch finds no CUDA GPU on this machine (torch.cuda.is_available() is False)"
        )
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


def _load(
    source: str | os.PathLike | None,
    model_type: str | None = None,
    *,
    downloads: bool = True,
    bin_files: bool = True,
    device: str | torch.device | None = "cpu",
    dtype: str | torch.dtype | None = None,
):
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    gguf_file = gguf_source(source)
    if gguf_file is not None:
        return _load_gguf(str(source).strip(), gguf_file, model_type, device, dtype)
    folder = resolve_source(source, downloads)
    family, config = read_config(folder, model_type)
    budget = check_before_building(family, config, folder, bin_files)
    checkpoint, weights_file = read_checkpoint(folder, bin_files, budget=budget)
    origins: dict[str, str] = {}
    # read, cast and moved one tensor at a time; the checkpoint's reader is then dropped
    tensors, ignored = convert_checkpoint(family, checkpoint, origins, dtype=dtype, device=device)
    del checkpoint
    with torch.device("meta"):  # no memory and no random initialisation: the tensors become the weights
        model = build_model(config)
    copy_weights(model, tensors, assign=True)
    del tensors
    model.eval().requires_grad_(False)
    try:  # read once here: each writing reads model.generation, whatever the folder holds by then
        attach(model, folder)
    except ConfigError as err:
        raise ModelLoadError(str(err)) from None
    # the bundled model's tokenizer is built at its first use (attention/load/tokenizer.py)
    tokenizer = (FirstUseTokenizer if source is None else load_tokenizer)(folder, config.vocab_size)
    model.load_report = LoadReport(
        DEFAULT_NAME if source is None else str(source),
        str(folder),
        weights_file,
        tuple(ignored),
        origins,
        str(device),
        str(dtype).removeprefix("torch."),
    )
    return model, tokenizer


def _load_gguf(source: str, path: Path, model_type: str | None, device: torch.device, dtype: torch.dtype):
    """load_model for a GGUF file (gguf.py): its metadata read as the config.json of the family it names, its
    tensors checked by name and shape against a model on the meta device, then dequantized one at a time and
    copied strictly; its generation settings and tokenizer are the file's own."""
    shapes = GGUFCheckpoint(path, shapes_only=True)
    if model_type is not None and shapes.family.model_type != model_type:
        title = FAMILIES[model_type].title
        raise ModelLoadError(f"{path.name} holds a '{shapes.architecture}' model, not a {title} one")
    family, values = shapes.family, shapes.config_values()
    # a byte-level BPE (llama.cpp's "gpt2"), or a file transformers cannot make a config of: its tokenizer class
    direct = shapes.field("tokenizer.ggml.model") == "gpt2" or not transformers_reads(shapes.architecture)
    try:
        config = family.read_config(values)
    except ConfigError as err:
        raise ModelLoadError(f"{path.name}: {err}") from None
    check_limits(config)
    with torch.device("meta"):
        expected = build_model(config).state_dict()
    check_tensors(convert_checkpoint(family, shapes)[0], expected, "the GGUF file", unknown_hint=LAYERS_HINT)
    checkpoint = shapes.with_data()  # the same reader: the file's metadata is parsed once
    origins: dict[str, str] = {}
    tensors, ignored = convert_checkpoint(family, checkpoint, origins, dtype=dtype, device=device)
    del checkpoint, shapes
    with torch.device("meta"):
        model = build_model(config)
    copy_weights(model, tensors, assign=True)
    del tensors
    model.eval().requires_grad_(False)
    try:
        attach(model, settings=settings_from_values(values, path.name))
    except ConfigError as err:
        raise ModelLoadError(str(err)) from None
    tokenizer = load_tokenizer(path.parent, config.vocab_size, gguf_file=path.name, direct=direct)
    model.load_report = LoadReport(
        source, str(path.parent), path.name, tuple(ignored), origins, str(device), str(dtype).removeprefix("torch.")
    )
    return model, tokenizer


# sizes past these are refused before anything is built: far beyond any checkpoint this app can show,
# and a config.json may say anything
LIMITS = {
    "num_hidden_layers": 1024,
    "num_attention_heads": 1024,
    "hidden_size": 65_536,
    "intermediate_size": 262_144,
    "vocab_size": 4_194_304,
    "max_position_embeddings": 1_048_576,
    "decoder_layers": 1024,
    "decoder_attention_heads": 1024,
    "decoder_ffn_dim": 262_144,
}


def check_limits(config: ModelConfig) -> None:
    """Refuse a config whose sizes pass LIMITS, before anything is built."""
    settings = config.flat()  # every setting by its flat name, as config.json names it
    for name, top in LIMITS.items():
        value = settings[name]
        if value is not None and value > top:
            raise ModelLoadError(f"config.json sets {name} to {value:,}, more than the {top:,} this app accepts")


def check_before_building(family: Family, config: ModelConfig, folder: Path, bin_files: bool = True) -> WeightBudget:
    """Refuse a config.json that does not fit its weights before any real tensor is made: its sizes
    against LIMITS; the weight files measured (a .bin's unpacked size, a safetensors header's size and
    entries) against what a model built on the meta device (which holds no data, whatever the config
    says) can need; then every tensor's name and shape, read from the files' headers, against that
    model. Returns the bounds the files were measured against, for reading them."""
    check_limits(config)
    with torch.device("meta"):
        expected = build_model(config).state_dict()
    budget = WeightBudget.of(expected)
    shapes, _ = read_checkpoint(folder, bin_files, shapes_only=True, budget=budget)
    tensors, _ = convert_checkpoint(family, shapes)
    check_tensors(tensors, expected, unknown_hint=LAYERS_HINT)
    return budget


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
                raise ConfigError(
                    f"'{model_type}' models are not supported: model_type must be one of {', '.join(FAMILIES)}"
                )
        family = FAMILIES[model_type]
        return family, family.read_config(values)
    except ConfigError as err:
        raise ModelLoadError(f"{path}: {err}") from None
