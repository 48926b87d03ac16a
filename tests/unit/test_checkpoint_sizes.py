"""Hostile weight files are measured before they are read: a 1 MB pytorch_model.bin that would unpack to
1 GB, a safetensors header of a million entries, an archive of a thousand entries, headers whose shapes do
not fit the file, and a legacy-format .bin whose pickles declare storages its data does not hold are each
refused with one sentence, quickly, without the memory reading them would take (the peak resident memory of
this process, measured around the load)."""

from __future__ import annotations

import collections
import io
import json
import math
import pickle
import sys
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from conftest import make_tiny
from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION

from attention import ModelLoadError, load_bert
from attention.load import checkpoint_sizes

STATUS = Path("/proc/self/status")


def status_mb(field: str) -> float:
    with STATUS.open() as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(field + ":")) / 1024


@contextmanager
def peak_growth():
    """{"mb": how far this process's peak resident memory rose above its memory at the start, "s": seconds}:
    the peak (VmHWM) is reset to the resident memory first, through /proc/self/clear_refs."""
    Path("/proc/self/clear_refs").write_text("5")
    before, began, measured = status_mb("VmRSS"), time.perf_counter(), {}
    try:
        yield measured
    finally:
        measured.update(mb=status_mb("VmHWM") - before, s=time.perf_counter() - began)


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")


@pytest.fixture(scope="module")
def need(tiny_dir) -> tuple[int, str, int]:
    """What the tiny config's model can need: its tensors, their size at 8 bytes an element with 16 MB over,
    and how many tensors its files may hold (twice its own and 64 more: buffers, heads)."""
    state = load_bert(tiny_dir)[0].state_dict()
    mb = (8 * sum(t.numel() for t in state.values()) + 16 * 2**20) / 2**20
    return len(state), f"{mb:.1f} MB", 2 * len(state) + 64


class _Storage:
    """Pickled as torch.save's reference to the float32 storage of `numel` elements under `key` (entry data/0)."""

    def __init__(self, numel: int, key: str = "0"):
        self.numel, self.key = numel, key


class _Tensor:
    """A contiguous float32 tensor of `shape` (`numel` elements by default) over a storage of `numel` elements."""

    def __init__(self, numel: int, shape: tuple[int, ...] | None = None, key: str = "0"):
        self.storage, self.shape = _Storage(numel, key), shape or (numel,)

    def __reduce__(self):
        stride = tuple(math.prod(self.shape[i + 1 :]) for i in range(len(self.shape)))
        args = (self.storage, 0, self.shape, stride, False, collections.OrderedDict())
        return (torch._utils._rebuild_tensor_v2, args)


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, "0", "cpu", obj.numel) if isinstance(obj, _Storage) else None


class _LegacyPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel, None) if isinstance(obj, _Storage) else None


def deflated_bin(path: Path, unpacked: int) -> None:
    """A torch.save archive of one float32 tensor of `unpacked` bytes, all zeros, its data deflated:
    written 1 MB at a time, so the file is about 1/1000 of that and nothing of that size is held."""
    data = io.BytesIO()
    _Pickler(data, protocol=2).dump({"embeddings.word_embeddings.weight": _Tensor(unpacked // 4)})
    with zipfile.ZipFile(path, "w", compresslevel=1) as archive:
        archive.writestr("archive/data.pkl", data.getvalue())
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
        entry = zipfile.ZipInfo("archive/data/0")
        entry.compress_type = zipfile.ZIP_DEFLATED
        zeros = bytes(2**20)
        with archive.open(entry, "w", force_zip64=True) as data_file:
            for _ in range(unpacked // len(zeros)):
                data_file.write(zeros)


def test_a_1mb_bin_that_unpacks_to_1gb_is_refused_from_its_zip_directory(tmp_path, need):
    folder = make_tiny(tmp_path / "bomb", safe=False)
    deflated_bin(folder / "pytorch_model.bin", 2**30)
    assert (folder / "pytorch_model.bin").stat().st_size < 5 * 2**20
    with peak_growth() as cost, pytest.raises(ModelLoadError) as refused:
        load_bert(folder)
    assert cost["mb"] < 64 and cost["s"] < 5, cost  # read: +1.3 GB at the peak, in 5 s
    assert str(refused.value) == (
        f"pytorch_model.bin would take 1.0 GB once read, more than the {need[1]} its config.json's {need[0]} "
        "tensors allow; it is refused before it is read"
    )


def safetensors_file(path: Path, header: dict, data: bytes = b"") -> None:
    raw = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)


def test_a_header_of_a_million_entries_is_refused_before_it_is_parsed(tmp_path, need):
    folder = make_tiny(tmp_path / "entries")
    entry = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    safetensors_file(folder / "model.safetensors", {f"t{i}": entry for i in range(1_000_000)})
    header_mb = (folder / "model.safetensors").stat().st_size / 2**20
    with peak_growth() as cost, pytest.raises(ModelLoadError) as refused:
        load_bert(folder)
    assert cost["mb"] < 32 and cost["s"] < 1, cost  # parsed: 20 s and +1.5 GB
    said = f"has a header of {header_mb:.1f} MB, more than the 0.1 MB its config.json's {need[0]} tensors can need"
    assert said in str(refused.value)


def test_a_header_of_more_entries_than_the_config_can_need_is_refused(tmp_path, need):
    folder = make_tiny(tmp_path / "count")
    entry = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    safetensors_file(folder / "model.safetensors", {f"t{i}": entry for i in range(1000)})  # 43 KB: within bytes
    said = f"lists 1,000 tensors, more than the {need[2]} its config.json's {need[0]} tensors allow"
    with pytest.raises(ModelLoadError, match=said):
        load_bert(folder)


def test_an_archive_of_a_thousand_entries_is_refused_from_its_end_record(tmp_path, need):
    folder = make_tiny(tmp_path / "many", safe=False)
    with zipfile.ZipFile(folder / "pytorch_model.bin", "w") as archive:
        for i in range(1000):
            archive.writestr(f"archive/data/{i}", b"")
    with pytest.raises(
        ModelLoadError, match=rf"an archive of 1,000 entries \(.* of directory\), more than the {need[2]} "
    ):
        load_bert(folder)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}, "lies outside the file's 16 bytes of data"),
        ({"dtype": "F32", "shape": [1000, 1000], "data_offsets": [0, 16]}, r"has shape \(1000, 1000\) of F32 but 16"),
        ({"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}, "has no valid shape"),
    ],
)
def test_a_header_whose_shapes_do_not_fit_the_file_is_refused(tmp_path, entry, said):
    folder = make_tiny(tmp_path / "shapes")
    safetensors_file(folder / "model.safetensors", {"embeddings.word_embeddings.weight": entry}, bytes(16))
    with pytest.raises(ModelLoadError, match=f"is damaged: its tensor 'embeddings.word_embeddings.weight' {said}"):
        load_bert(folder)


def test_a_legacy_bin_larger_than_the_config_can_need_is_refused_and_a_fitting_one_loads(tmp_path, need):
    folder = make_tiny(tmp_path / "legacy", safe=False)
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    model, _ = load_bert(folder)  # torch's format before 1.6, not an archive: measured by its size
    assert torch.equal(model.embeddings.word_embeddings.weight, state["embeddings.word_embeddings.weight"])
    state["padding"] = torch.zeros(5 * 2**20)  # 20 MB of an unknown tensor
    torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    with pytest.raises(ModelLoadError, match=rf"would take 20\.\d MB once read, more than the {need[1]} "):
        load_bert(folder)


def legacy_bin(path: Path, state: dict[str, torch.Tensor], declared: dict[str, int], held: set[str]) -> None:
    """`state` (float32) written as torch.save(_use_new_zipfile_serialization=False) writes it: three small
    pickles, the tensors referring to their storages by key and size, the keys, then each storage's element
    count and data. A storage is declared with declared.get(name, its size) elements, and only those of `held`
    are listed and written."""
    with path.open("wb") as file:
        for small in (MAGIC_NUMBER, PROTOCOL_VERSION, {"protocol_version": PROTOCOL_VERSION, "little_endian": True}):
            pickle.dump(small, file, protocol=2)
        tensors = {name: _Tensor(declared.get(name, t.numel()), tuple(t.shape), name) for name, t in state.items()}
        _LegacyPickler(file, protocol=2).dump(tensors)
        pickle.dump([name for name in state if name in held], file, protocol=2)
        for name in (name for name in state if name in held):
            file.write(state[name].numel().to_bytes(8, "little") + state[name].contiguous().numpy().tobytes())


def test_a_legacy_bin_declaring_a_1gb_storage_it_does_not_hold_is_refused_before_torch_load(tmp_path, need):
    folder = make_tiny(tmp_path / "legacy_bomb", safe=False)
    state = {"padding": torch.zeros(4)}
    legacy_bin(folder / "pytorch_model.bin", state, {"padding": 2**28}, set())  # 1 GB declared in 300 bytes
    with peak_growth() as cost, pytest.raises(ModelLoadError) as refused:
        load_bert(folder)
    assert cost["mb"] < 32 and cost["s"] < 5, cost
    assert str(refused.value) == (
        f"pytorch_model.bin would take 1.0 GB once read, more than the {need[1]} its config.json's {need[0]} "
        "tensors allow; it is refused before it is read"
    )  # loaded, the storage of 1 GB was allocated whole and left uninitialized by torch.load


@pytest.mark.parametrize(
    ("declared", "held", "said"),
    [  # torch.load makes a storage it holds no data for uninitialized: the model gets whatever memory held
        ({}, "all but one", "the storages its tensors use are not the ones it holds data for"),
        ({"pooler.dense.bias": 64}, "all", r"it declares [\d,]+ bytes of tensor data but holds [\d,]+;"),
    ],
)
def test_a_legacy_bin_whose_declarations_are_not_its_data_is_refused_before_torch_load(
    tmp_path, monkeypatch, declared, held, said
):
    folder = make_tiny(tmp_path / "legacy_damaged", safe=False)
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    legacy_bin(folder / "pytorch_model.bin", state, {}, set(state))
    assert load_bert(folder)[0].load_report.weights_file == "pytorch_model.bin"  # the writer's format loads
    names = set(state) - ({"pooler.dense.bias"} if held == "all but one" else set())
    legacy_bin(folder / "pytorch_model.bin", state, declared, names)
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: pytest.fail("torch.load was called"))
    with pytest.raises(ModelLoadError, match=f"pytorch_model.bin is damaged: {said}"):
        load_bert(folder)


def test_a_bin_larger_than_this_machines_memory_is_refused_before_torch_load(tmp_path, monkeypatch):
    folder = make_tiny(tmp_path / "memory", safe=False)
    monkeypatch.setattr(checkpoint_sizes, "memory_bytes", lambda: 2**16)  # a machine of 64 KB
    with pytest.raises(ModelLoadError, match=r"more than the 0\.1 MB this machine's memory allows; it is refused"):
        load_bert(folder)
    monkeypatch.undo()
    assert load_bert(folder)[0].load_report.weights_file == "pytorch_model.bin"


def test_a_shard_index_larger_than_a_header_is_refused_before_it_is_parsed(tmp_path, need):
    folder = make_tiny(tmp_path / "index")
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        weight_map = dict.fromkeys(weights.keys(), "model.safetensors")
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"padding": "x" * 2**21}, "weight_map": weight_map}))
    top = need[2] * 512 + 64 * 1024  # what a header of as many tensors may take
    with pytest.raises(ModelLoadError, match=f"larger than the {top:,} bytes a weight index may take"):
        load_bert(folder)
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    assert load_bert(folder)[0].load_report.weights_file == "model.safetensors.index.json"
