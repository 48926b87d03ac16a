"""Reading one Parquet table of a points folder (attention/analysis/qk_global.py's read_folder) within
bounds known before anything is materialised: a Parquet file says in its footer how many rows it has and
how large its columns are uncompressed, and a text column is read as its dictionary (each distinct text
once) and measured as it would expand, so a small file that would become millions of rows or gigabytes
of text is refused from those figures. Then each value is checked: the whole numbers (layer, head, text,
position) whole, finite and in range, the coordinates finite, `kind` query or key.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

MAX_ROWS = 400_000  # one table: 200,000 tokens' queries and keys (the command line writes 40,000 by default)
MAX_BYTES = 256 * 2**20  # its columns uncompressed, as the file's footer says
MAX_TEXT_BYTES = 128 * 2**20  # its text columns as they expand (repeats written once in the file)
WHOLE = {"layer": 9_999, "head": 9_999, "text": 2**31 - 1, "position": 2**31 - 1}  # the largest each may be
FINITE = ("x", "y")
KINDS = frozenset({"query", "key"})
TEXTS = ("kind", "token", "token_kind", "context", "content")


class TableError(ValueError):
    """A table past its bounds or holding a value it may not; the message says which and why."""


class TooManyRows(TableError):
    """A table with more rows than the reader takes."""


def read_table(
    path: Path, columns: tuple[str, ...], max_rows: int = MAX_ROWS, opener: Callable[[Path, int], int] = os.open
) -> pd.DataFrame:
    """`columns` of the Parquet file `path` (a regular file, opened by `opener` without following a link: the
    page's opens each folder on the way without following one too, ui/serve/sources.py's open_under), each value
    checked; TableError past a bound or for a bad value, before the rows are made."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = opener(path, flags)
    except OSError as err:
        raise TableError(f"{path}: cannot be read ({err.strerror})") from None
    texts = [c for c in columns if c in TEXTS]
    with os.fdopen(fd, "rb") as raw:
        if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
            raise TableError(f"{path}: not a regular file")
        try:  # each text column as its dictionary: every distinct text once, however often it repeats
            parquet = pq.ParquetFile(raw, read_dictionary=texts)
        except Exception as err:  # noqa: BLE001  (pyarrow raises several kinds for a file that is not Parquet)
            raise TableError(f"{path}: not a Parquet file ({type(err).__name__})") from None
        meta, schema = parquet.metadata, parquet.schema_arrow
        if missing := [c for c in columns if c not in schema.names]:
            raise TableError(f"{path}: no column {', '.join(missing)}")
        if meta.num_rows > max_rows:
            raise TooManyRows(f"{path}: {meta.num_rows:,} rows, more than the {max_rows:,} read")
        wanted = {schema.get_field_index(c) for c in columns}
        size = sum(
            meta.row_group(g).column(c).total_uncompressed_size for g in range(meta.num_row_groups) for c in wanted
        )
        if size > MAX_BYTES:
            raise TableError(f"{path}: {size / 2**20:,.0f} MB uncompressed; at most {MAX_BYTES // 2**20} MB are read")
        if bad := [c for c in texts if not _dictionary_of_text(schema.field(c).type)]:
            raise TableError(f"{path}: column {', '.join(bad)} is not text")
        try:
            table = parquet.read(columns=list(columns))
        except Exception as err:  # noqa: BLE001
            raise TableError(f"{path}: not a readable Parquet file ({type(err).__name__})") from None
    if nulls := [c for c in columns if table.column(c).null_count]:
        raise TableError(f"{path}: column {', '.join(nulls)} holds missing values (NaN or empty)")
    expanded = 0
    for name in texts:
        for chunk in table.column(name).chunks:
            lengths = pc.binary_length(chunk.dictionary)
            expanded += pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0
    if expanded > MAX_TEXT_BYTES:
        raise TableError(f"{path}: {expanded / 2**20:,.0f} MB of text; at most {MAX_TEXT_BYTES // 2**20} MB are read")
    table = table.cast(pa.schema([pa.field(f.name, f.type.value_type) if f.name in texts else f for f in table.schema]))
    frame = table.to_pandas()
    if frame.empty:
        raise TableError(f"{path}: no rows")
    return _checked(path, frame)


def _dictionary_of_text(kind) -> bool:
    import pyarrow as pa

    return pa.types.is_dictionary(kind) and (
        pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
    )


def _checked(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its whole-number columns as integers; TableError for a value out of place."""
    for name in frame.columns.intersection(list(WHOLE)):
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(values).all() or (values != np.floor(values)).any():
            raise TableError(f"{path}: column {name} holds values that are not whole numbers")
        if values.min() < 0 or values.max() > WHOLE[name]:
            raise TableError(f"{path}: column {name} holds values outside 0 to {WHOLE[name]:,}")
        frame[name] = values.astype(np.int64)
    for name in frame.columns.intersection(list(FINITE)):
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(values).all():
            raise TableError(f"{path}: column {name} holds values that are not finite numbers")
        frame[name] = values
    if "kind" in frame.columns and not set(frame["kind"].unique()) <= KINDS:
        raise TableError(f"{path}: column kind holds values other than query and key")
    return frame
