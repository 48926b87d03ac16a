"""A checkpoint's tokenizer: transformers' fast tokenizer for its folder (`load_tokenizer`), and for the
bundled model the same, built at its first use (`FirstUseTokenizer`).

A fast tokenizer wraps a `tokenizers` tokenizer, its `backend_tokenizer`, and `tokenizer(text)` runs it;
`attention.runs.inputs.encode` runs it directly. The bundled model's backend is read from its tokenizer.json
at once, and the rest of transformers' tokenizer only when something other than `encode` asks for it:
importing transformers takes 0.6-0.7 s here (`python -X importtime -c "from transformers import
AutoTokenizer"`), a fifth of the cold start bench/render.py measures. tests/unit/test_tokenizer.py checks that
transformers builds that same backend.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from ..config import read_json
from ..errors import ModelLoadError


def load_tokenizer(folder: Path, vocab_size: int, gguf_file: str | None = None, direct: bool = False):
    """transformers' fast tokenizer for the checkpoint, whatever its kind, or the one inside the GGUF file
    `gguf_file` in `folder` (which transformers builds from the file's vocabulary and merges); its ids must fit the
    model's vocabulary. It returns token_type_ids, zeros if it has no token types, and pads (GPT-2's with
    its end-of-text token). `direct`: a GGUF file's tokenizer is built by TokenizersBackend at once, the class
    AutoTokenizer picks for a byte-level BPE: AutoTokenizer would first read the whole file again to make a model
    config (6-7 s for SmolLM2's on a busy 2-core machine, against 0.6 s), which it cannot for an architecture
    transformers does not load (Gemma 1's)."""
    from transformers import AutoTokenizer

    if direct:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend as AutoTokenizer  # type: ignore[assignment]

    files = ("tokenizer.json", "vocab.txt")
    if gguf_file is None and not any((folder / name).is_file() for name in files):
        raise ModelLoadError(f"no tokenizer files in {folder} (expected tokenizer.json or vocab.txt)")
    where = folder if gguf_file is None else folder / gguf_file
    try:
        with _alone(folder, gguf_file) as read_from:
            tokenizer = AutoTokenizer.from_pretrained(str(read_from), use_fast=True, gguf_file=gguf_file)
        tokenizer.name_or_path = tokenizer.init_kwargs["name_or_path"] = str(folder)  # not the link's folder
    except Exception as err:  # noqa: BLE001  (transformers raises many types for missing or broken tokenizer files)
        raise ModelLoadError(f"no usable tokenizer in {where} ({type(err).__name__})") from None
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(f"the tokenizer in {folder} has no fast version (needed for word offsets)")
    _check_fits(len(tokenizer), vocab_size)
    # every model here takes token_type_ids (zeros where the family has none), so every tokenizer gives them
    if "token_type_ids" not in tokenizer.model_input_names:
        tokenizer.model_input_names = [*tokenizer.model_input_names, "token_type_ids"]
    # a tokenizer without a padding token (GPT-2's) pads batches with its end-of-text token; the
    # attention mask keeps those positions out
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


@contextlib.contextmanager
def _alone(folder: Path, gguf_file: str | None) -> Iterator[Path]:
    """The folder transformers reads the tokenizer from: `folder`, or for a GGUF file a new folder holding a link
    to that file alone, so that the file's own tokenizer is read and never a tokenizer.json (or its settings)
    lying beside it, which transformers would read first. Where no link can be made, `folder` itself."""
    if gguf_file is None:
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="gguf-tokenizer-") as alone:
        try:
            os.symlink((folder / gguf_file).resolve(), Path(alone) / gguf_file)
        except OSError:
            yield folder
            return
        yield Path(alone)


def panicked(err: BaseException) -> bool:
    """Whether `err` is a Rust library's panic surfacing in Python (pyo3's PanicException, a BaseException that
    `except Exception` lets through): a tokenizer's pattern hitting Oniguruma's retry limit on some text raises
    one from tokenizer(text)."""
    return type(err).__name__ == "PanicException" and type(err).__module__ == "pyo3_runtime"


def _check_fits(size: int, vocab_size: int) -> None:
    if size > vocab_size:
        raise ModelLoadError(
            f"the tokenizer knows {size} tokens but the model only {vocab_size}: they do not belong together"
        )


class FirstUseTokenizer:
    """transformers' fast tokenizer for `folder` (`load_tokenizer`), built when first used: any attribute or
    call but `backend_tokenizer` and `truncation_side`, which are read from the folder's tokenizer.json and
    tokenizer_config.json at once. For a checkpoint whose tokenizer transformers builds as the file has it
    (the bundled one's; not, for instance, one whose tokenizer_config.json changes its special tokens)."""

    def __init__(self, folder: Path, vocab_size: int):
        from tokenizers import Tokenizer

        self._folder, self._vocab_size = folder, vocab_size
        self._lock = threading.Lock()
        self._tokenizer = None
        try:
            backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
            config = folder / "tokenizer_config.json"
            settings = read_json(config) if config.is_file() else {}
        except Exception as err:  # noqa: BLE001  (tokenizers raises its own Exception for a broken file)
            raise ModelLoadError(f"no usable tokenizer files in {folder} ({type(err).__name__})") from None
        _check_fits(backend.get_vocab_size(with_added_tokens=True), vocab_size)
        backend.no_padding()  # as transformers' tokenizer(text) runs it: no padding, no truncation
        backend.no_truncation()
        self.backend_tokenizer = backend
        self.truncation_side = settings.get("truncation_side", "right")

    @property
    def loaded(self):
        """transformers' tokenizer, built now if it was not yet."""
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = load_tokenizer(self._folder, self._vocab_size)
        return self._tokenizer

    def __getattr__(self, name: str):  # what this object does not hold itself
        if name.startswith("__") or name in ("_folder", "_vocab_size", "_lock", "_tokenizer"):
            raise AttributeError(name)  # (copy and pickle look for these before __init__ has run)
        return getattr(self.loaded, name)

    def __call__(self, *args, **kwargs):
        return self.loaded(*args, **kwargs)

    def __len__(self) -> int:
        return len(self.loaded)

    def __reduce__(self):
        return type(self), (self._folder, self._vocab_size)

    def __repr__(self) -> str:
        return f"FirstUseTokenizer({str(self._folder)!r}, built: {self._tokenizer is not None})"
