"""The command line: per-head statistics of a corpus written as Parquet, resumable.

    python -m attention.analysis.corpus FILE --model SOURCE --out DIR [--engine ray] [--address ADDR]
        [--batch-size N] [--limit N] [--field NAME] [--workers N] [--gpus G]

FILE is read by attention.analysis.texts.iter_texts. DIR receives:
  texts/part-<first text>.parquet  one file per batch: a row per (text, layer, head), its text indices
                                   in column `text` (corpus.score_batch's columns)
  heads.parquet                    the aggregate, a row per (layer, head) (corpus.finish), made from the parts
  run.json                         the model and file the parts belong to
A run that stops (killed, interrupted) leaves whole parts only (each is written beside, as a hidden
.part-*, and renamed into place); run again, it scores only the texts no part holds, and the aggregate
counts each text once.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from .corpus import add_sums, finish, head_sums
from .corpus_engines import ENGINES, batches
from .texts import iter_texts

PARTS, AGGREGATE, RUN = "texts", "heads.parquet", "run.json"


def done_texts(out: Path) -> set[int]:
    """The text indices the parts already written under `out` hold."""
    done: set[int] = set()
    for part in sorted((out / PARTS).glob("part-*.parquet")):
        done.update(pq.read_table(part, columns=["text"]).column("text").to_numpy().tolist())
    return done


def write_part(out: Path, rows: dict) -> None:
    """One batch's rows as texts/part-<first text index>.parquet, written beside and renamed into place."""
    table = pa.table(rows)
    path = out / PARTS / f"part-{min(rows['text']):09d}.parquet"
    partial = path.with_name("." + path.name)  # hidden: readers of the folder (pyarrow, pandas) skip it
    pq.write_table(table, partial)
    os.replace(partial, path)


def write_aggregate(out: Path) -> None:
    """heads.parquet from every part: each part's sums added up, then made into means and shares."""
    total = None
    for part in sorted((out / PARTS).glob("part-*.parquet")):
        total = add_sums(total, head_sums(pq.read_table(part).to_pandas()))
    if total is not None:
        pq.write_table(pa.Table.from_pandas(finish(total), preserve_index=False), out / AGGREGATE)


def check_run(out: Path, model: str, file: str, field: str) -> None:
    """Record what the parts are of, or refuse to add to parts of another model or corpus."""
    run = {"model": model, "file": str(Path(file).resolve()), "field": field}
    path = out / RUN
    if path.exists():
        before = json.loads(path.read_text(encoding="utf-8"))
        if before != run:
            raise SystemExit(f"{out} holds a run of {before}, not of {run}: choose another --out")
    else:
        (out / PARTS).mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run), encoding="utf-8")


def run(args: argparse.Namespace, stop_after: int | None = None) -> Path:
    """Score the texts no part holds yet, a part per batch, then write the aggregate. `stop_after` stops
    after that many batches without the aggregate, as a killed run would (for tests)."""
    from .. import load_model

    out = Path(args.out)
    check_run(out, args.model, args.file, args.field)
    model, tokenizer = load_model(args.model, device="auto" if args.gpus else "cpu")
    done = done_texts(out)
    total = sum(1 for _ in iter_texts(args.file, args.field, args.limit))
    todo = ((i, t) for i, t in enumerate(iter_texts(args.file, args.field, args.limit)) if i not in done)
    options = {"address": args.address, "workers": args.workers, "gpus": args.gpus}
    if args.address or args.gpus:  # a cluster's workers read the checkpoint themselves
        options["source"] = args.model
    scored = batches(
        args.engine,
        model,
        tokenizer,
        todo,
        args.batch_size,
        **(options if args.engine == "ray" else {}),
    )
    with tqdm(total=total, initial=len(done), unit="text", desc="texts") as bar:
        for count, rows in enumerate(scored, 1):
            write_part(out, rows)
            bar.update(len(set(rows["text"].tolist())))
            if stop_after is not None and count >= stop_after:
                return out
    write_aggregate(out)
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m attention.analysis.corpus", description="Per-head statistics of a corpus, as Parquet."
    )
    ap.add_argument("file", help="text file (a text per line), JSON Lines, or a folder a dataset was saved to")
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: the bundled MiniLM)")
    ap.add_argument("--out", required=True, help="folder for the Parquet files; a run there is resumed")
    ap.add_argument("--engine", choices=ENGINES, default="local")
    ap.add_argument("--address", default=None, help="a Ray cluster's address (default: start Ray here)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--limit", type=int, default=None, help="only the first N texts")
    ap.add_argument("--field", default="text", help="the JSON Lines field or dataset column (default: text)")
    ap.add_argument("--workers", type=int, default=1, help="Ray actors, each holding the model (default: 1)")
    ap.add_argument("--gpus", type=float, default=0, help="GPUs per Ray actor (default: 0, the CPU)")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    out = run(args)
    print(f"{out / AGGREGATE}: one row per head; {out / PARTS}: one row per text and head")
