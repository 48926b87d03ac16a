"""A finished corpus run's folder (python -m attention.analysis.corpus --out DIR), read for the Head stats
view: its run.json and its aggregate heads.parquet, each named through ui/serve/sources.py's policy (under
ATTENTION_FILE_DIRS, resolved, regular files) and read within bounds: run.json in bounded steps, the
aggregate's rows and bytes from its Parquet footer before any is read (attention/analysis/points_table.py).

A folder is a finished run when its run.json is a run's record listing its parts, every listed part is
there, and heads.parquet was written after run.json was last (a run writes its aggregate last; one that
was stopped, or is running again, has a newer run.json). Anything else is a RunFolderError, one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attention.analysis.corpus import SHARES, STATS
from attention.analysis.corpus.cli import AGGREGATE, PART_NAME, PARTS
from attention.analysis.points_table import TableError, read_table
from attention.analysis.runs import RUN

from .sources import bounded_lines, open_under, server_path

MAX_RUN_BYTES = 16 * 2**20  # run.json: about 100 bytes a part, so 160,000 parts
MAX_HEADS = 16_384  # the aggregate's rows: 128 layers of 128 heads
COLUMNS = ("layer", "head", "tokens", *STATS, *SHARES)


class RunFolderError(ValueError):
    """A folder that is not a finished corpus run, or one past the bounds; the message is one line."""


@dataclass(frozen=True)
class CorpusRun:
    record: dict  # run.json: model, file, field, input, parts
    heads: pd.DataFrame  # one row per (layer, head): COLUMNS, sorted by layer and head
    n_layers: int
    n_heads: int

    def grid(self, column: str) -> np.ndarray:
        """One column as (n_layers, n_heads)."""
        return self.heads[column].to_numpy(dtype=float).reshape(self.n_layers, self.n_heads)


def read_corpus_run(typed: str) -> CorpusRun:
    """The finished run in the folder a visitor typed. FileRefused (ui/serve/sources.py) outside the operator's
    folders; RunFolderError for a folder that is not a finished run or is past a bound."""
    folder = server_path(typed, folder=True)
    name = typed.strip()
    if not (folder / RUN).exists():
        raise RunFolderError(f"'{name}' is not a corpus run: it has no {RUN} (python -m attention.analysis.corpus)")
    record = _record(server_path(str(folder / RUN)), name)
    parts = record.get("parts")
    if not isinstance(parts, dict) or not parts or not all(PART_NAME.fullmatch(str(p)) for p in parts):
        raise RunFolderError(f"'{name}' is not a finished corpus run: its {RUN} lists no parts")
    if missing := [p for p in sorted(parts) if not (folder / PARTS / p).is_file()]:
        raise RunFolderError(f"'{name}' is not a finished corpus run: {PARTS}/{missing[0]}, listed, is not there")
    aggregate = folder / AGGREGATE
    if not aggregate.exists() or aggregate.stat().st_mtime_ns < (folder / RUN).stat().st_mtime_ns:
        raise RunFolderError(
            f"'{name}' is not a finished corpus run: its {AGGREGATE} is missing or older than its {RUN} "
            "(run the command again to finish it)"
        )
    try:
        heads = read_table(server_path(str(aggregate)), COLUMNS, max_rows=MAX_HEADS, opener=open_under)
    except TableError as err:
        raise RunFolderError(str(err)) from None
    return _checked(record, heads, aggregate)


def _record(path: Path, name: str) -> dict:
    """run.json, read in bounded steps (one line: json.dump writes no newlines)."""
    with bounded_lines(path, MAX_RUN_BYTES, MAX_RUN_BYTES) as lines:
        text = "".join(lines)
    try:
        record = json.loads(text)
    except ValueError:
        raise RunFolderError(f"'{name}': its {RUN} is damaged (not JSON)") from None
    if not isinstance(record, dict):
        raise RunFolderError(f"'{name}': its {RUN} is not a run's record")
    return record


def _checked(record: dict, heads: pd.DataFrame, path: Path) -> CorpusRun:
    """The run, once its aggregate is a whole grid of finite figures (shares within [0, 1])."""
    values = heads[list(STATS + SHARES)].to_numpy(dtype=float)
    if not np.isfinite(values).all() or not ((heads[list(SHARES)] >= 0) & (heads[list(SHARES)] <= 1)).all().all():
        raise RunFolderError(f"{path}: holds figures that are not finite, or shares outside 0 to 1")
    heads = heads.sort_values(["layer", "head"]).reset_index(drop=True)
    n_layers, n_heads = int(heads.layer.max()) + 1, int(heads["head"].max()) + 1
    whole = np.divmod(np.arange(n_layers * n_heads), n_heads)
    if len(heads) != n_layers * n_heads or not (heads.layer.eq(whole[0]).all() and heads["head"].eq(whole[1]).all()):
        raise RunFolderError(f"{path}: not one row for each head of {n_layers} layers × {n_heads} heads")
    return CorpusRun(record, heads, n_layers, n_heads)
