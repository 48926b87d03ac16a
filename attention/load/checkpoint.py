"""Reading a checkpoint folder's weight files, with no pickled code ever run.

model.safetensors (one file, or the shards model.safetensors.index.json lists) first, else
pytorch_model.bin (or its shards), read with torch.load(weights_only=True). Safetensors files are read
through `safetensors.safe_open`: its header gives each tensor's name, shape and dtype without reading any
data, and each tensor is read from the file when it is asked for. With `shapes_only` every tensor is an
empty one on the meta device, its name, shape and dtype only: what the checks before building compare.
Every file is measured first (checkpoint_sizes.py): what reading it would cost, against `budget`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import SafetensorError, safe_open

from ..errors import ModelLoadError
from .checkpoint_sizes import WeightBudget, measure

BIN_REFUSED = "this server loads safetensors weights only, and this checkpoint has only pytorch_model.bin"
# (index of shards, single file, is it safetensors), in the order they are looked for
_LAYOUTS = (
    ("model.safetensors.index.json", "model.safetensors", True),
    ("pytorch_model.bin.index.json", "pytorch_model.bin", False),
)
# safetensors' dtype names; one it adds later is read as float32 for the shape check, and cast on load
_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def read_checkpoint(
    folder: Path, bin_files: bool = True, shapes_only: bool = False, budget: WeightBudget | None = None
) -> tuple[Mapping[str, torch.Tensor], str]:
    """The weights of a folder and the file (or index) they came from. With `bin_files` False a folder
    with only .bin weights is refused. Safetensors weights come as a SafetensorsWeights, which reads
    nothing up front: a tensor is in memory once its caller asks for it and keeps it. The files are
    measured against `budget` (the config's bounds; absolute ones without it) before any is read."""
    for index_name, file_name, safetensors in _LAYOUTS:
        for name, shards in ((index_name, True), (file_name, False)):
            if not (folder / name).is_file():
                continue
            if not safetensors and not bin_files:
                raise ModelLoadError(BIN_REFUSED)
            paths = _shard_paths(folder, name, budget) if shards else [folder / name]
            measure(paths, safetensors, budget)
            if safetensors:
                weights = SafetensorsWeights(paths)
                return (weights.shapes() if shapes_only else weights), name
            return _read_bins(paths, shapes_only), name
    raise ModelLoadError(f"no weights in {folder}: expected model.safetensors or pytorch_model.bin")


def _shard_paths(folder: Path, index_name: str, budget: WeightBudget | None) -> list[Path]:
    """The files a weight index names, each once, in name order (an index no larger than `budget`'s
    safetensors header: it names as many tensors)."""
    top = (budget or WeightBudget.absolute()).header_bytes()
    if (folder / index_name).stat().st_size > top:
        raise ModelLoadError(f"{index_name} in {folder} is larger than the {top:,} bytes a weight index may take")
    try:
        weight_map = json.loads((folder / index_name).read_text())["weight_map"]
        return [folder / shard for shard in sorted(set(weight_map.values()))]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise ModelLoadError(f"{index_name} in {folder} is not a valid weight index") from None


class SafetensorsWeights(Mapping[str, torch.Tensor]):
    """The tensors of one safetensors file or of its shards, each read from its file when it is asked for.

    Each read gives a new tensor in memory of its own (read with pread, not a view of a mapped file),
    so a tensor that is converted and dropped is freed, and one that is kept holds only itself.
    A damaged file is a ModelLoadError, when opened or when a tensor is read.
    """

    def __init__(self, paths: list[Path]):
        self._files: dict[str, tuple[Path, safe_open]] = {}  # tensor name -> (its file, the open file)
        for path in paths:
            opened = _safe_open(path)
            names: list[str] = _damaged_if_raises(path, opened.keys)
            for name in names:
                self._files.setdefault(name, (path, opened))  # a name in two shards: the first one's

    def __getitem__(self, name: str) -> torch.Tensor:
        path, opened = self._files[name]  # KeyError for a name it does not hold, as a Mapping should
        tensor: torch.Tensor = _damaged_if_raises(path, lambda: opened.get_tensor(name))
        return tensor

    def __contains__(self, name: object) -> bool:  # from the header: Mapping's own would read the tensor
        return name in self._files

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def shapes(self) -> dict[str, torch.Tensor]:
        """Every tensor as an empty one on the meta device, from the files' headers alone."""

        def meta(path: Path, opened: safe_open, name: str) -> torch.Tensor:
            part = _damaged_if_raises(path, lambda: opened.get_slice(name))
            return torch.empty(
                part.get_shape(), dtype=_SAFETENSORS_DTYPES.get(part.get_dtype(), torch.float32), device="meta"
            )

        return {name: meta(path, opened, name) for name, (path, opened) in self._files.items()}


def _safe_open(path: Path) -> safe_open:
    def opened() -> safe_open:
        try:
            return safe_open(str(path), framework="pt", device="cpu", backend="pread")
        except TypeError:  # a safetensors without the pread backend: tensors are views of the mapped file
            return safe_open(str(path), framework="pt", device="cpu")

    return _damaged_if_raises(path, opened)


Read = TypeVar("Read")


def _damaged_if_raises(path: Path, read: Callable[[], Read]) -> Read:
    """read(), with any failure of the safetensors library (its own error type among them) as a ModelLoadError."""
    try:
        return read()
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise ModelLoadError(f"{path.name} is damaged or not a safetensors file ({err})") from None


def _read_bins(paths: list[Path], shapes_only: bool) -> dict[str, torch.Tensor]:
    read = _bin_shapes if shapes_only else _read_bin
    tensors: dict[str, torch.Tensor] = {}
    for path in paths:
        tensors.update(read(path))
    return tensors


def _bin_shapes(path: Path) -> dict[str, torch.Tensor]:
    """The tensors a pytorch_model.bin holds, as meta tensors: the file is mapped, not read into memory
    (a file in torch's legacy format, which cannot be mapped, is read, still without running code)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001  (legacy format, or unsafe or damaged: _read_bin reads it or says why not)
        state = _read_bin(path)
    return {name: torch.empty(t.shape, dtype=t.dtype, device="meta") for name, t in _tensors(path, state).items()}


def _read_bin(path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001  (UnpicklingError for unsafe content, RuntimeError for a damaged zip)
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(
            f"{path.name} could not be loaded safely ({reason}); prefer a model.safetensors file"
        ) from None
    return _tensors(path, state)


def _tensors(path: Path, state: object) -> dict[str, torch.Tensor]:
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelLoadError(f"{path.name} does not hold a dictionary of tensors")
    return state
