"""What a command line's output folder holds a run of, so that nothing from another run is mixed in.

A run's record, `run.json` in its folder, names the model, the input file and the settings, and the input's
fingerprint (its size and SHA-256, read as a stream). `check_folder`, before any work, refuses a folder whose
record is of anything else, one holding output with no record, and an input changed since the run began.
The record is written atomically (a hidden file beside it, then os.replace): a run killed while writing it
leaves the previous record whole. `OneLineParser` turns a bad argument into one line and exit status 2, as
`fail` does for any other bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

RUN = "run.json"
CHUNK = 2**20


class RunError(ValueError):
    """An output folder or input that a run cannot use; the message is one sentence naming it."""


def fingerprint(path: str | Path) -> dict[str, object]:
    """{"size": bytes, "sha256": hex} of a file, or of every file under a folder (their relative paths,
    sizes and contents, in name order), read in 1 MB chunks."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
    elif path.is_file():
        files = [path]
    else:
        raise RunError(f"{path}: no such file or folder" if not path.exists() else f"{path}: not a regular file")
    digest, size = hashlib.sha256(), 0
    for file in files:
        if file != path:
            digest.update(f"{file.relative_to(path).as_posix()}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as stream:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


def write_json(path: Path, value: object) -> None:
    """`value` as JSON at `path`, atomically: written whole beside it, then renamed over it."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        with partial.open("w", encoding="utf-8") as file:
            json.dump(value, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)  # left only where writing failed


def read_run(out: Path) -> dict | None:
    """The run.json of `out`, or None where it has none."""
    path = out / RUN
    if not path.exists():
        return None
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise RunError(f"{path} is damaged (not JSON): choose another --out") from None
    if not isinstance(run, dict):
        raise RunError(f"{path} is not a run's record: choose another --out")
    return run


def check_folder(out: Path, run: dict, output: Iterable[str], kept: Iterable[str] = ()) -> dict | None:
    """The record of `out`'s run if it is `run` (its `kept` fields, such as the parts written, aside), None
    for a folder with no record and none of the `output` names (which a run it has no record of wrote),
    else a RunError saying what differs. Nothing is written: the caller records its run once it writes."""
    before = read_run(out)
    if before is None:
        if found := [name for name in output if (out / name).exists()]:
            raise RunError(f"{out} holds {found[0]} but no {RUN} saying what it is of: choose another --out")
        return None
    kept = set(kept)
    differ = [key for key in sorted(set(run) | set(before)) if key not in kept and before.get(key) != run.get(key)]
    if differ == ["input"]:
        raise RunError(
            f"{run['file']} has changed since the run in {out} began (its size or SHA-256 differ): that run's "
            "output is of other texts; choose another --out"
        )
    if differ:
        raise RunError(f"{out} holds a run of another {', '.join(differ)}: choose another --out")
    return before


def fail(prog: str, err: Exception) -> int:
    """Print `err` as one line on stderr; the exit status of bad input (2)."""
    print(f"{prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
    return 2


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (not a usage block), with exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value
