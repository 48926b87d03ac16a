"""Weight files measured before they are read: what reading them would cost, against what the config needs.

A pytorch_model.bin is a zip archive (torch.save's format) whose entries torch.load unpacks whole: its zip
directory says how large each entry is once unpacked, so a small file of deflated zeros that would become
gigabytes is refused from its directory alone, before torch.load. A file in torch's legacy format (before
1.6: pickles, then each storage's data) has its pickles read first by torch's weights-only unpickler, each
storage it declares made on the meta device (no memory): torch.load would allocate every declared size and
leave a storage the file holds no data for uninitialized, so the declarations must match the data that
follows them. A safetensors file starts with an 8-byte
length and a JSON header of that length, which its reader parses whole: the length is bounded before the
header is read, the header's entry count once it is parsed (a bounded parse), and every entry's shape and
data offsets are checked against the file's size. The bounds come from the config's model (`WeightBudget.of`,
from its meta-device state dict: no memory), or from absolute caps where no config is at hand.
"""

from __future__ import annotations

import json
import math
import os
import struct
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import ModelLoadError

try:  # what torch.load(weights_only=True) reads a legacy file's pickles with
    from torch._weights_only_unpickler import Unpickler as _WeightsUnpickler
except ImportError:  # a torch without it: nothing to parse with, and a legacy file is refused
    _WeightsUnpickler = None  # type: ignore[assignment,misc]

WIDEST = 8  # bytes per element of the widest dtype a checkpoint may store (float64, int64)
BYTES_MARGIN = 16 * 2**20  # a pickle, zip headers, small task heads
HEADER_ENTRY_BYTES = 512  # a safetensors header's entry: a name, a dtype, a shape, two offsets (~120 bytes)
HEADER_MARGIN = 64 * 1024  # the header's __metadata__
MAX_TENSORS = 200_000  # with no config at hand: more tensors than any checkpoint this app reads
ZIP_ENTRY_BYTES = 512  # a zip directory's entry: 46 bytes, a name, zip64 and alignment fields
_ZIP_END = struct.Struct("<4s4H2LH")  # end of central directory: ..., entries, directory size, offset, comment
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")
_ELEMENT_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2}
_ELEMENT_BYTES |= {"BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def memory_bytes() -> int:
    """This machine's physical memory: torch.load holds a whole .bin in it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):  # not on this platform: no cap from it
        return 2**62


@dataclass(frozen=True)
class WeightBudget:
    """What a checkpoint's files may hold: `tensors` at most, taking `max_bytes` at most once read."""

    tensors: int
    max_bytes: int
    why: str  # what the bounds come from, for the messages

    @classmethod
    def of(cls, expected: Mapping[str, torch.Tensor]) -> WeightBudget:
        """The bounds for a checkpoint of the model whose (meta) state dict is `expected`: its tensors twice
        over plus 64 (buffers, task heads, an untied output layer), each element in the widest dtype."""
        elements = sum(t.numel() for t in expected.values())
        return cls(
            2 * len(expected) + 64, WIDEST * elements + BYTES_MARGIN, f"its config.json's {len(expected):,} tensors"
        )

    @classmethod
    def absolute(cls) -> WeightBudget:
        return cls(MAX_TENSORS, 2**62, "this app's bounds")

    def header_bytes(self) -> int:
        return self.tensors * HEADER_ENTRY_BYTES + HEADER_MARGIN


def measure(paths: Iterable[Path], safetensors: bool, budget: WeightBudget | None) -> None:
    """Refuse weight files that would cost more to read than `budget` allows (its absolute form without
    one), from their sizes, zip directories and header lengths alone: a ModelLoadError of one sentence."""
    budget = budget or WeightBudget.absolute()
    tensors = total = 0
    for path in paths:
        count, size = (_safetensors_sizes if safetensors else _bin_sizes)(path, budget)
        tensors, total = tensors + count, total + size
        if tensors > budget.tensors:
            raise ModelLoadError(
                f"{path.name} brings the checkpoint to {tensors:,} tensors, more than the {budget.tensors:,} "
                f"{budget.why} allow; it is refused before it is read"
            )
        cap = budget.max_bytes if safetensors else min(budget.max_bytes, memory_bytes())
        if total > cap:
            over = "this machine's memory allows" if cap < budget.max_bytes else f"{budget.why} allow"
            raise ModelLoadError(
                f"{path.name} would take {_size(total)} once read, more than the {_size(cap)} {over}; "
                "it is refused before it is read"
            )


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.1f} MB"


def _bin_sizes(path: Path, budget: WeightBudget) -> tuple[int, int]:
    """(entries, bytes once unpacked) of a torch.save archive, from its zip directory; of a file in torch's
    legacy format (not a zip archive), (storages, bytes) from its declarations (`_legacy_sizes`)."""
    with path.open("rb") as file:
        directory = _zip_directory(file)
        if directory is None:
            return _legacy_sizes(file, path.name, budget)
        entries, directory_bytes = directory
        if entries > budget.tensors or directory_bytes > budget.tensors * ZIP_ENTRY_BYTES:
            raise ModelLoadError(
                f"{path.name} is an archive of {entries:,} entries ({_size(directory_bytes)} of directory), more "
                f"than the {budget.tensors:,} {budget.why} allow; it is refused before it is read"
            )
        try:
            infos = zipfile.ZipFile(file).infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise ModelLoadError(f"{path.name} is a damaged archive ({err})") from None
    return len(infos), sum(info.file_size for info in infos)


class _Declarations(_WeightsUnpickler or object):  # type: ignore[misc]
    """torch's weights-only unpickler, each storage the pickle declares recorded (key: bytes) and made on the
    meta device, as torch.load would make it but holding no memory; past `budget`, refused at once."""

    def __init__(self, file, budget: WeightBudget, name: str):
        super().__init__(file, encoding="utf-8")
        self.declared: dict[object, int] = {}
        self.total, self.budget, self.name = 0, budget, name

    def persistent_load(self, saved_id):
        if not isinstance(saved_id, tuple) or len(saved_id) != 6 or saved_id[0] not in ("storage", b"storage"):
            raise ModelLoadError(f"{self.name} could not be loaded safely (it refers to something not a storage)")
        storage_type, key, numel = saved_id[1], saved_id[2], saved_id[4]
        dtype = getattr(storage_type, "dtype", None)
        if not isinstance(dtype, torch.dtype) or not isinstance(numel, int) or numel < 0:
            raise ModelLoadError(f"{self.name} could not be loaded safely (a storage of no valid size)")
        if key not in self.declared:
            self.declared[key] = numel * dtype.itemsize
            self.total += numel * dtype.itemsize
        count, total, budget = len(self.declared), self.total, self.budget
        if count > budget.tensors:
            raise ModelLoadError(
                f"{self.name} declares {count:,} storages, more than the {budget.tensors:,} {budget.why} allow; "
                "it is refused before it is read"
            )
        if total > budget.max_bytes:
            raise ModelLoadError(
                f"{self.name} would take {_size(total)} once read, more than the {_size(budget.max_bytes)} "
                f"{budget.why} allow; it is refused before it is read"
            )
        storage = torch.UntypedStorage(numel * dtype.itemsize, device="meta")
        return torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)


def _legacy_sizes(file, name: str, budget: WeightBudget) -> tuple[int, int]:
    """(storages, bytes) of a file in torch's legacy format, from its pickles: three small ones, the tensors
    (their storages declared with their sizes), the storages' keys; then each storage's data, an 8-byte element
    count and its bytes. What the pickles declare must be what follows them, each storage once."""
    size = os.fstat(file.fileno()).st_size
    file.seek(0)
    try:
        if _WeightsUnpickler is None:
            raise ValueError("this torch has no weights-only unpickler")
        for _ in range(3):  # magic number, protocol version, system info
            _WeightsUnpickler(file, encoding="utf-8").load()
        declarations = _Declarations(file, budget, name)
        declarations.load()
        keys = _WeightsUnpickler(file, encoding="utf-8").load()
    except ModelLoadError:
        raise
    except Exception as err:  # noqa: BLE001  (UnpicklingError for unsafe content, anything for a damaged file)
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(f"{name} could not be loaded safely ({reason}); prefer a model.safetensors file") from None
    declared = declarations.declared
    data = declarations.total + 8 * len(declared)
    if (
        not isinstance(keys, list)
        or not all(isinstance(key, str | int) for key in keys)
        or len(keys) != len(declared)
        or set(keys) != set(declared)
    ):
        raise ModelLoadError(f"{name} is damaged: the storages its tensors use are not the ones it holds data for")
    if data != size - file.tell():
        raise ModelLoadError(
            f"{name} is damaged: it declares {data:,} bytes of tensor data but holds {size - file.tell():,}; "
            "it is refused before it is read"
        )
    return len(declared), data


def _zip_directory(file) -> tuple[int, int] | None:
    """(entries, directory bytes) from a zip archive's end records, or None for a file that is not one."""
    size = file.seek(0, os.SEEK_END)
    start = max(0, size - (_ZIP_END.size + 0xFFFF))  # the end record and a comment of at most 64 KB
    file.seek(start)
    tail = file.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _ZIP_END.size:
        return None
    *_, entries, directory_bytes, _, _ = _ZIP_END.unpack_from(tail, at)
    if entries != 0xFFFF and directory_bytes != 0xFFFFFFFF:
        return entries, directory_bytes
    locator = at - _ZIP64_LOCATOR.size  # zip64: the locator before the end record points at the real one
    if locator < 0 or tail[locator : locator + 4] != b"PK\x06\x07":
        return entries, directory_bytes
    offset = _ZIP64_LOCATOR.unpack_from(tail, locator)[2]
    file.seek(offset)
    record = file.read(_ZIP64_END.size)
    if len(record) < _ZIP64_END.size or record[:4] != b"PK\x06\x06":
        return entries, directory_bytes
    *_, entries, directory_bytes, _ = _ZIP64_END.unpack(record)
    return entries, directory_bytes


def _safetensors_sizes(path: Path, budget: WeightBudget) -> tuple[int, int]:
    """(tensors, data bytes) of a safetensors file, its header's length bounded before the header is read
    and each entry's shape, dtype and offsets checked against the file's size."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        head = file.read(8)
        length = int.from_bytes(head, "little")
        if len(head) < 8 or 8 + length > size:
            raise ModelLoadError(f"{path.name} is damaged or not a safetensors file (its header is cut short)")
        if length > budget.header_bytes():
            raise ModelLoadError(
                f"{path.name} has a header of {_size(length)}, more than the {_size(budget.header_bytes())} "
                f"{budget.why} can need; it is refused before it is read"
            )
        raw = file.read(length)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        raise ModelLoadError(f"{path.name} is damaged or not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise ModelLoadError(f"{path.name} is damaged or not a safetensors file (its header is not an object)")
    entries = {name: entry for name, entry in header.items() if name != "__metadata__"}
    if len(entries) > budget.tensors:
        raise ModelLoadError(
            f"{path.name} lists {len(entries):,} tensors, more than the {budget.tensors:,} {budget.why} allow; "
            "it is refused before any is read"
        )
    data = size - 8 - length
    for name, entry in entries.items():
        if (why := _entry_fault(entry, data)) is not None:
            raise ModelLoadError(f"{path.name} is damaged: its tensor {name[:200]!r} {why}")
    return len(entries), data


def _entry_fault(entry: object, data: int) -> str | None:
    """Why a header entry does not describe data inside the file's `data` bytes, or None when it does."""
    if not isinstance(entry, dict):
        return "is not described by an object"
    shape, offsets, dtype = entry.get("shape"), entry.get("data_offsets"), entry.get("dtype")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        return "has no valid shape"
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(n, int) for n in offsets):
        return "has no valid data offsets"
    begin, end = offsets
    if not 0 <= begin <= end <= data:
        return f"lies outside the file's {data:,} bytes of data"
    if dtype in _ELEMENT_BYTES and math.prod(shape) * _ELEMENT_BYTES[dtype] != end - begin:
        return f"has shape {tuple(shape)} of {dtype} but {end - begin:,} bytes"
    return None
