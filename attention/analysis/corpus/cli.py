"""The command line: per-head statistics of a corpus written as Parquet, resumable.

    python -m attention.analysis.corpus FILE --model SOURCE --out DIR [--engine ray] [--address ADDR]
        [--batch-size N] [--limit N] [--field NAME] [--workers N] [--gpus G] [--measures sinks,weighted]

FILE is read by attention.analysis.texts.iter_texts. DIR receives:
  texts/part-<first text>.parquet  one file per batch: a row per (text, layer, head), its text indices
                                   in column `text`, its line in FILE in `line`, its first 500 characters
                                   in `content` (scoring.score_batch's columns)
  heads.parquet                    the aggregate, a row per (layer, head) (scoring.finish), made from the parts
  run.json                         the model (the bundled one by its package's name), the file (its size
                                   and SHA-256) and the field the parts are of, and the parts written,
                                   each with its SHA-256 (runs.py)
At the end the TOP heads of each pattern (the largest shares of texts) are printed, one line a pattern.
A run that stops (killed, interrupted) leaves whole parts only (each is written beside, as a hidden
.part-*, and renamed into place); run again, it scores only the texts its listed parts do not hold, and
the aggregate counts each text once. Only parts run.json lists are read: one it does not list (written as the
run was killed, before it was listed, or copied in) is moved aside as a hidden .unlisted-*; a listed part
that has changed, or two holding the same text, stop the run. A folder holding a run of another model,
file or field, or a file changed since its run began, is refused. Bad input is one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from ...errors import ModelLoadError
from ...load.sources import DEFAULT_PACKAGE
from ..runs import RUN, OneLineParser, RunError, check_folder, fail, fingerprint, positive, read_run, write_json
from ..stats import PATTERNS
from ..texts import CorpusError, iter_numbered, iter_texts
from .engines import ENGINES, batches
from .measures import check_measures
from .scoring import SHARES, add_sums, finish, head_sums

PARTS, AGGREGATE = "texts", "heads.parquet"
PART_NAME = re.compile(r"part-\d{9,}\.parquet")
LIST_EVERY_S = 1.0  # run.json is rewritten with the parts written at most this often, and when a run ends
TOP = 3  # heads printed per pattern at the end of a run


def listed_parts(out: Path) -> dict[str, str]:
    """The parts run.json lists, by file name, with their SHA-256 (a RunError for a name no part has)."""
    run = read_run(out)
    parts = run.get("parts", {}) if run else {}
    if not isinstance(parts, dict) or not all(PART_NAME.fullmatch(str(name)) for name in parts):
        raise RunError(f"{out / RUN} lists parts that are not part-<digits>.parquet files: choose another --out")
    return parts


def part_texts(out: Path) -> dict[str, set[int]]:
    """The text indices of each part run.json lists: a RunError for a part that has changed since it was
    written, or a text two parts hold."""
    held: dict[int, str] = {}
    texts: dict[str, set[int]] = {}
    for name, digest in sorted(listed_parts(out).items()):
        path = out / PARTS / name
        if not path.is_file() or _digest(path) != digest:
            raise RunError(f"{path} is not the part this run wrote (missing or changed): choose another --out")
        texts[name] = set(pq.read_table(path, columns=["text"]).column("text").to_numpy().tolist())
        if twice := texts[name] & held.keys():
            first = min(twice)
            raise RunError(f"{path} holds text {first}, which {held[first]} holds too: choose another --out")
        held.update(dict.fromkeys(texts[name], name))
    return texts


def done_texts(out: Path) -> set[int]:
    """The text indices the parts run.json lists hold."""
    return set().union(*part_texts(out).values())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def set_aside_unlisted(out: Path) -> None:
    """Move every part run.json does not list aside, as a hidden .unlisted-* (readers of the folder skip it)."""
    listed = listed_parts(out)
    unlisted = [p for p in (out / PARTS).glob("part-*.parquet") if p.name not in listed]  # none: no folder
    for path in unlisted:
        os.replace(path, path.with_name(".unlisted-" + path.name))
    if unlisted:
        print(f"{len(unlisted)} part(s) run.json does not list set aside as .unlisted-*", file=sys.stderr)


def write_part(out: Path, rows: dict) -> tuple[str, str]:
    """One batch's rows as texts/part-<first text index>.parquet, written beside and renamed into place;
    its file name and SHA-256."""
    table = pa.table(rows)
    path = out / PARTS / f"part-{min(rows['text']):09d}.parquet"
    partial = path.with_name("." + path.name)  # hidden: readers of the folder (pyarrow, pandas) skip it
    pq.write_table(table, partial)
    os.replace(partial, path)
    return path.name, _digest(path)


def write_aggregate(out: Path) -> None:
    """heads.parquet from every listed part: each part's sums added up, then made into means and shares."""
    total = None
    for name in sorted(part_texts(out)):
        total = add_sums(total, head_sums(pq.read_table(out / PARTS / name).to_pandas()))
    if total is not None:
        pq.write_table(pa.Table.from_pandas(finish(total), preserve_index=False), out / AGGREGATE)


def check_run(out: Path, model: str | None, file: str, field: str, measures: tuple = ()) -> tuple[dict, bool]:
    """The record of the run in `out`, and whether it is new (nothing written yet): a RunError for a folder
    holding a run of another model, file or field, or of this file before it changed. A run of the bundled
    model recorded as null (before records named it) is resumed, its record naming the model from then on. A run
    with --measures records them (one without records none), so that a run is resumed with the same columns."""
    name = DEFAULT_PACKAGE if model is None else model
    run = {"model": name, "file": str(Path(file).resolve()), "field": field, "input": fingerprint(file)}
    run |= {"measures": list(measures)} if measures else {}
    old = read_run(out)
    unnamed = model is None and old is not None and "model" in old and old["model"] is None
    before = check_folder(out, run | {"model": None} if unnamed else run, output=(PARTS, AGGREGATE), kept=("parts",))
    return (run | {"parts": {}}, True) if before is None else (before | {"model": name}, False)


def run(args: argparse.Namespace, stop_after: int | None = None) -> Path:
    """Score the texts no listed part holds yet, a part per batch, then write the aggregate. `stop_after`
    stops after that many batches without the aggregate, as a killed run would (for tests)."""
    from ... import load_model

    out = Path(args.out)
    total = sum(1 for _ in iter_texts(args.file, args.field, args.limit))  # a bad line is found before any work
    if not total:
        raise RunError(f"{args.file} holds no texts")
    record, fresh = check_run(out, args.model, args.file, args.field, args.measures)
    if not fresh:
        set_aside_unlisted(out)
    done = set() if fresh else done_texts(out)
    model, tokenizer = load_model(args.model, device="auto" if args.gpus else "cpu")
    numbered = enumerate(iter_numbered(args.file, args.field, args.limit))
    todo = ((i, text, line) for i, (line, text) in numbered if i not in done)
    options = {"address": args.address, "workers": args.workers, "gpus": args.gpus}
    if args.address or args.gpus:  # a cluster's workers read the checkpoint themselves
        options["source"] = args.model
    scored = batches(
        args.engine,
        model,
        tokenizer,
        todo,
        args.batch_size,
        args.measures,
        **(options if args.engine == "ray" else {}),
    )
    listed, listed_at = record["parts"], time.monotonic()
    try:
        with tqdm(total=total, initial=len(done), unit="text", desc="texts") as bar:
            for count, rows in enumerate(scored, 1):
                if fresh:  # the folder is claimed before its first part
                    (out / PARTS).mkdir(parents=True, exist_ok=True)
                    write_json(out / RUN, record)
                    fresh = False
                listed.update([write_part(out, rows)])
                if time.monotonic() - listed_at >= LIST_EVERY_S:
                    write_json(out / RUN, record)
                    listed_at = time.monotonic()
                bar.update(len(set(rows["text"].tolist())))
                if stop_after is not None and count >= stop_after:
                    return out
    finally:
        if not fresh:
            write_json(out / RUN, record)
    write_aggregate(out)
    return out


def parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="python -m attention.analysis.corpus", description="Per-head statistics of a corpus, as Parquet."
    )
    ap.add_argument("file", help="text file (a text per line), JSON Lines, or a folder a dataset was saved to")
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: the bundled MiniLM)")
    ap.add_argument("--out", required=True, help="folder for the Parquet files; a run there is resumed")
    ap.add_argument("--engine", choices=ENGINES, default="local")
    ap.add_argument("--address", default=None, help="a Ray cluster's address (default: start Ray here)")
    ap.add_argument("--batch-size", type=positive, default=32)
    ap.add_argument("--limit", type=positive, default=None, help="only the first N texts")
    ap.add_argument("--field", default="text", help="the JSON Lines field or dataset column (default: text)")
    ap.add_argument("--workers", type=positive, default=1, help="Ray actors, each holding the model (default: 1)")
    ap.add_argument("--gpus", type=float, default=0, help="GPUs per Ray actor (default: 0, the CPU)")
    ap.add_argument(
        "--measures",
        type=measure_list,
        default=(),
        help="comma-separated, added per head: sinks (the first token's share, raw and value-weighted), weighted "
        "(the statistics of the value-weighted maps); one more forward pass a text (default: none)",
    )
    return ap


def measure_list(text: str) -> tuple[str, ...]:
    """--measures' value: the named measures, each once (argparse says a bad one in one line)."""
    try:
        return check_measures(text.split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if not args.gpus >= 0:
        ap.error(f"argument --gpus: {args.gpus} is less than 0")
    try:
        out = run(args)
    except (CorpusError, ModelLoadError, RunError, ValueError, OSError) as err:
        return fail(ap.prog, err)
    print(f"{out / AGGREGATE}: one row per head; {out / PARTS}: one row per text and head")
    print(f"The {TOP} heads with the largest share of texts, per pattern (layer, head, share):")
    print("\n".join(top_lines(pq.read_table(out / AGGREGATE).to_pandas())))
    return 0


def top_heads(frame, k: int = TOP) -> dict[str, list[tuple[int, int, float]]]:
    """Per pattern label, the `k` heads of the aggregate `frame` (corpus.finish's) with the largest share of
    texts, largest first (ties: the lower layer, then head), as (layer, head, share); heads of share 0 left out."""
    top = {}
    for label, share in zip(PATTERNS, SHARES):
        ranked = frame[frame[share] > 0].sort_values([share, "layer", "head"], ascending=[False, True, True])
        best = ranked.head(k)
        top[label] = [(int(a), int(b), float(v)) for a, b, v in zip(best.layer, best["head"], best[share])]
    return top


def top_lines(frame, k: int = TOP) -> list[str]:
    """top_heads as one line per pattern: "diagonal: L2 H3 0.61, L0 H1 0.40, ..." ("no head" where none)."""
    return [
        f"{label}: " + (", ".join(f"L{layer} H{head} {share:.2f}" for layer, head, share in heads) or "no head")
        for label, heads in top_heads(frame, k).items()
    ]
