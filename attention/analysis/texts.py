"""Reading a corpus: the texts of a file or a local dataset, one string per text.

Three kinds of source, told apart by what the path is:

- a plain text file: one text per non-empty line;
- a JSON Lines file (``.jsonl`` or ``.json``): one object per line, its ``text`` field (or the field named);
- a folder a ``datasets`` dataset was saved to with ``save_to_disk``: its ``text`` column (or the one named).

``iter_numbered`` gives each text with its line number, 1-based, in the file (a dataset's row number, 1-based,
for a saved dataset). ``limit`` stops reading after that many texts, so a caller bounds its work before it
starts; ``open_lines`` opens a file's lines (by default as UTF-8 text), so a caller that bounds how much is
read passes its own (ui/serve/sources.py's ``bounded_lines``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

Opener = Callable[[Path], AbstractContextManager[Iterable[str]]]


def _utf8(path: Path) -> AbstractContextManager[Iterable[str]]:
    return path.open(encoding="utf-8")


class CorpusError(ValueError):
    """A corpus that cannot be read as texts; the message names the file and the line."""


def iter_texts(
    path: str | Path, field: str = "text", limit: int | None = None, open_lines: Opener = _utf8
) -> Iterator[str]:
    """The texts of ``path`` in order, at most ``limit`` of them."""
    return (text for _, text in iter_numbered(path, field, limit, open_lines))


def iter_numbered(
    path: str | Path, field: str = "text", limit: int | None = None, open_lines: Opener = _utf8
) -> Iterator[tuple[int, str]]:
    """(line, text) of each text of ``path`` in order, at most ``limit`` of them: the line is 1-based in the
    file (empty lines are skipped but counted), or the row's 1-based number in a saved dataset."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such file or folder")
    if path.is_dir():
        source = _dataset_texts(path, field)
    elif path.suffix.lower() in (".jsonl", ".json"):
        source = _jsonl_texts(path, field, open_lines)
    else:
        source = _line_texts(path, open_lines)
    for count, numbered in enumerate(source):
        if limit is not None and count >= limit:
            return
        yield numbered


def read_texts(path: str | Path, field: str = "text", limit: int | None = None) -> list[str]:
    """``iter_texts`` as a list."""
    return list(iter_texts(path, field, limit))


def _line_texts(path: Path, open_lines: Opener) -> Iterator[tuple[int, str]]:
    with open_lines(path) as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield number, line.rstrip("\n")


def _jsonl_texts(path: Path, field: str, open_lines: Opener) -> Iterator[tuple[int, str]]:
    with open_lines(path) as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorpusError(f"{path}, line {number}: not JSON ({err.msg})") from None
            text = record.get(field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                raise CorpusError(f"{path}, line {number}: no string field {field!r}")
            yield number, text


def _dataset_texts(path: Path, field: str) -> Iterator[tuple[int, str]]:
    import datasets  # only for a saved dataset: importing it costs a second

    try:
        dataset = datasets.load_from_disk(str(path))
    except FileNotFoundError as err:
        raise CorpusError(f"{path}: not a folder a dataset was saved to ({err})") from None
    if isinstance(dataset, datasets.DatasetDict):
        raise CorpusError(f"{path}: a dataset of several splits ({', '.join(dataset)}); name one split's folder")
    if field not in dataset.column_names:
        raise CorpusError(f"{path}: no column {field!r} (it has {', '.join(dataset.column_names)})")
    for number, text in enumerate(dataset[field], 1):
        if not isinstance(text, str):
            raise CorpusError(f"{path}: column {field!r} holds {type(text).__name__}, not text")
        yield number, text
