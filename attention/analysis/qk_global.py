"""The global view of a head: the queries and keys of many sentences in one plane (AttentionViz,
Yeh et al. 2023).

`collect` runs a corpus through the model in batches, up to one layer (no later layer runs, no map is
kept), and keeps each token's query and key of that layer's heads: the vectors the scores were made
of, after rotary for rotary families and with shared key heads repeated for grouped-query models.
`head_points` normalises one head's (attention/analysis/qk_project.py) and lays them out in 2-D as a
table of points; `write_folder` and `read_folder` keep those tables as Parquet.

    python -m attention.analysis.qk_global FILE --model SOURCE --layer L [--head H] --out DIR
        [--tokens 20000] [--method umap|tsne|pca]

writes DIR/qk-L{L}-H{H}.parquet for the head (every head of the layer without --head), each with
the columns x, y, kind (query or key), text (the text's index), position, token, token_kind, context,
layer, head; DIR/texts.parquet with each text by its index; and DIR/run.json, what the points are of
(model, corpus with its size and SHA-256, field, tokens: runs.py). A DIR holding another run's points is
refused; one of the same run takes more heads or layers beside its own.

Letters: B batch, T tokens of a batch, H heads, d head width, N tokens kept.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.request import MapRequest
from ..runs.inputs import on_model_device, within_positions
from .points_table import MAX_ROWS, TableError, TooManyRows, read_table
from .qk_project import joint_plane

BATCH = 16  # texts per forward pass
CONTEXT_WORDS = 6  # words either side of a token in its hover
COLUMNS = ("x", "y", "kind", "text", "position", "token", "token_kind", "context", "layer", "head")
TEXTS_FILE = "texts.parquet"
Q_STEPS = ("q_heads", "q_norm", "q_rot")  # the query after each step that makes it; the last one seen is used
K_STEPS = ("k_heads", "k_norm", "k_rot", "k_shared")


@dataclass(frozen=True)
class Sample:
    """One layer's queries and keys of N corpus tokens, and where each token is."""

    layer: int
    heads: tuple[int, ...]
    q: np.ndarray  # (len(heads), N, d) float32
    k: np.ndarray  # (len(heads), N, d) float32
    text: np.ndarray  # (N,) index of the token's text in `texts`
    position: np.ndarray  # (N,) the token's position in its text
    tokens: list[str]  # (N,)
    token_kind: list[str]  # (N,) special, punctuation, word or piece
    context: list[str]  # (N,) a few words either side, the token marked
    texts: list[str]  # the texts read, in order


def layer_vectors(model, batch: dict, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch run up to `layer`'s attention map and no further: its queries and keys, (B, H, T, d) each."""
    kept: dict[str, torch.Tensor] = {}

    def recorder(name, tensor):
        if tensor is not None and tensor.dim() == 4:  # (B, H, T, d) after the heads are split
            if name in Q_STEPS:
                kept["q"] = tensor
            elif name in K_STEPS:
                kept["k"] = tensor
        return tensor

    inputs = on_model_device(model, batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
    with torch.inference_mode():
        model(*inputs, recorders={layer: recorder}, request=MapRequest({layer}, stop=True))
    return kept["q"], kept["k"]


def collect(
    model,
    tokenizer,
    texts: Iterable[str],
    layer: int,
    heads: Iterable[int] | None = None,
    max_tokens: int = 20_000,
    progress: Callable[[int, int], None] | None = None,
) -> Sample:
    """The first `max_tokens` tokens of `texts` (each text cut at the model's positions), `layer`'s queries
    and keys for `heads` (all by default), BATCH texts per forward pass; progress(tokens kept, max_tokens)
    after each batch."""
    if not hasattr(model, "layers"):
        raise ValueError("the global view reads an encoder's or a decoder's layers; this model has both")
    n_layers, n_heads = len(model.layers), model.config.num_attention_heads
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer must be from 0 to {n_layers - 1}, got {layer}")
    heads = tuple(range(n_heads)) if heads is None else tuple(heads)
    if not heads or not all(0 <= h < n_heads for h in heads):
        raise ValueError(f"heads must be from 0 to {n_heads - 1}, got {heads}")
    chosen = torch.tensor(heads)
    batch_size = BATCH if tokenizer.pad_token is not None else 1  # GPT-2's tokenizer cannot pad
    parts: dict[str, list] = {name: [] for name in ("q", "k", "text", "position", "tokens", "kind", "context")}
    kept_texts: list[str] = []
    done = 0
    for chunk in _chunks(texts, batch_size):
        batch = _encode(tokenizer, chunk, model.config.max_position_embeddings)
        q, k = layer_vectors(model, batch, layer)  # (B, H, T, d) each
        for b, text in enumerate(chunk):
            length = min(int(batch["attention_mask"][b].sum()), max_tokens - done)  # right-padded: real tokens first
            if length <= 0:
                break
            index = len(kept_texts)
            kept_texts.append(text)
            parts["q"].append(q[b, chosen, :length].float().cpu().numpy())  # (h, n, d)
            parts["k"].append(k[b, chosen, :length].float().cpu().numpy())  # (h, n, d)
            parts["text"].append(np.full(length, index))
            parts["position"].append(np.arange(length))
            _describe(batch, b, length, text, parts)
            done += length
        if progress is not None:
            progress(done, max_tokens)
        if done >= max_tokens:
            break
    if not done:
        raise ValueError("the corpus has no tokens")
    return Sample(
        layer,
        heads,
        np.concatenate(parts["q"], axis=1),
        np.concatenate(parts["k"], axis=1),
        np.concatenate(parts["text"]),
        np.concatenate(parts["position"]),
        parts["tokens"],
        parts["kind"],
        parts["context"],
        kept_texts,
    )


def _chunks(texts: Iterable[str], size: int) -> Iterable[list[str]]:
    chunk: list[str] = []
    for text in texts:
        if text.strip():
            chunk.append(text)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _encode(tokenizer, texts: list[str], max_length: int):
    return tokenizer(
        list(within_positions(max_length, *texts)),
        padding=len(texts) > 1,  # a tokenizer without a pad token (GPT-2's) is given one text at a time
        padding_side="right",
        truncation=True,
        max_length=max_length,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )


def _describe(batch, b: int, length: int, text: str, parts: dict[str, list]) -> None:
    """Each of the first `length` tokens of batch item `b`: its string, its kind and its context."""
    tokens = batch.tokens(b)[:length]
    words = batch.word_ids(b)[:length]
    special = batch["special_tokens_mask"][b, :length].tolist()
    offsets = batch["offset_mapping"][b, :length].tolist()
    for i, (token, (start, end)) in enumerate(zip(tokens, offsets)):
        is_special = bool(special[i]) or words[i] is None
        parts["tokens"].append(token)
        parts["kind"].append(token_kind(token, is_special, i > 0 and words[i] == words[i - 1]))
        parts["context"].append(context(text, start, end, token if is_special else None, at_end=i > 0))


def token_kind(token: str, special: bool, continues_word: bool) -> str:
    """special ([CLS], <s> ...), punctuation (no letter or digit), piece (the rest of a word) or word."""
    if special:
        return "special"
    if not any(ch.isalnum() for ch in token):
        return "punctuation"
    return "piece" if continues_word else "word"


def context(
    text: str, start: int, end: int, special: str | None = None, at_end: bool = False, words: int = CONTEXT_WORDS
) -> str:
    """The token at text[start:end] between «», with `words` words either side; a special token (no span
    of its own) before the text's first words, or `at_end` after its last ones."""
    if special is not None:
        every = text.split()
        if at_end:
            return ("… " if len(every) > 2 * words else "") + " ".join(every[-2 * words :]) + f" «{special}»"
        return f"«{special}» " + " ".join(every[: 2 * words]) + (" …" if len(every) > 2 * words else "")
    before, after = re.findall(r"\S+", text[:start]), re.findall(r"\S+", text[end:])
    glued_left = start > 0 and not text[start - 1].isspace()  # a word piece: the word's start stays attached
    glued_right = end < len(text) and not text[end].isspace()
    left = " ".join(before[-words:]) + ("" if glued_left else " ")
    right = ("" if glued_right else " ") + " ".join(after[:words])
    return (
        ("… " if len(before) > words else "")
        + left.lstrip()
        + f"«{text[start:end]}»"
        + right.rstrip()
        + (" …" if len(after) > words else "")
    )


def head_points(sample: Sample, head: int, method: str = "umap", seed: int = 0) -> pd.DataFrame:
    """One head's queries then keys as a table of 2·N points (COLUMNS), normalised and laid out together."""
    h = sample.heads.index(head)
    q_xy, k_xy = joint_plane(sample.q[h], sample.k[h], method, seed)  # (N, 2) each
    n = len(sample.tokens)

    def twice(values: np.ndarray) -> np.ndarray:  # queries, then keys
        return np.concatenate([values, values])

    return pd.DataFrame(
        {
            "x": np.concatenate([q_xy[:, 0], k_xy[:, 0]]),
            "y": np.concatenate([q_xy[:, 1], k_xy[:, 1]]),
            "kind": ["query"] * n + ["key"] * n,
            "text": twice(sample.text).astype(np.int32),
            "position": twice(sample.position).astype(np.int32),
            "token": sample.tokens * 2,
            "token_kind": sample.token_kind * 2,
            "context": sample.context * 2,
            "layer": np.full(2 * n, sample.layer, dtype=np.int16),
            "head": np.full(2 * n, head, dtype=np.int16),
        }
    )


def points_file(layer: int, head: int) -> str:
    return f"qk-L{layer}-H{head}.parquet"


def write_folder(frames: list[pd.DataFrame], texts: list[str], out: str | Path) -> list[Path]:
    """Each head's table as out/qk-L{layer}-H{head}.parquet and the texts as out/texts.parquet."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for frame in frames:
        path = out / points_file(int(frame["layer"].iloc[0]), int(frame["head"].iloc[0]))
        frame.to_parquet(path, engine="pyarrow", index=False)
        written.append(path)
    pd.DataFrame({"text": np.arange(len(texts), dtype=np.int32), "content": texts}).to_parquet(
        out / TEXTS_FILE, engine="pyarrow", index=False
    )
    return written


class FolderError(ValueError):
    """A folder that does not hold readable point tables; the message says which file and why."""


MAX_FILE_BYTES = 64 * 1024 * 1024  # one head's table: 40,000 points take about 2 MB
MAX_FILES = 128  # the heads of a folder
MAX_FOLDER_ROWS = 1_000_000  # the rows of a folder's point tables together: about 150 MB as read


def read_folder(
    folder: str | Path, opener: Callable[[Path, int], int] = os.open
) -> tuple[dict[tuple[int, int], pd.DataFrame], list[str]]:
    """The point tables of a folder write_folder wrote, by (layer, head), and its texts by index; each
    table's rows bounded before they are read and its values checked (points_table.py), each file opened
    by `opener` (the page's: ui/serve/sources.py's open_under, no link followed on the way)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FolderError(f"{folder}: no such folder")
    paths = sorted(folder.glob("qk-L*-H*.parquet"))
    if not paths:
        raise FolderError(f"{folder}: no qk-L*-H*.parquet files in it")
    if len(paths) > MAX_FILES:
        raise FolderError(f"{folder}: {len(paths)} point files; at most {MAX_FILES} are read")
    frames, rows = {}, 0
    for path in paths:
        frame = _read_table(path, COLUMNS, min(MAX_ROWS, MAX_FOLDER_ROWS - rows), opener)
        rows += len(frame)
        layer, head = frame["layer"].iloc[0], frame["head"].iloc[0]
        if (frame["layer"] != layer).any() or (frame["head"] != head).any():
            raise FolderError(f"{path}: points of several heads in one head's table")
        frames[int(layer), int(head)] = frame
    texts = _read_table(folder / TEXTS_FILE, ("text", "content"), MAX_ROWS, opener)
    texts = texts.sort_values("text")["content"].tolist()
    if any(int(f["text"].max()) >= len(texts) for f in frames.values()):
        raise FolderError(f"{folder}: the points name texts that {TEXTS_FILE} lacks")
    return frames, texts


def _read_table(
    path: Path, columns: tuple[str, ...], max_rows: int = MAX_ROWS, opener: Callable[[Path, int], int] = os.open
) -> pd.DataFrame:
    if not path.is_file():
        raise FolderError(f"{path}: no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise FolderError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MB")
    try:
        return read_table(path, columns, max_rows, opener)
    except TooManyRows as err:
        together = f" (a folder's tables together: at most {MAX_FOLDER_ROWS:,})" if max_rows < MAX_ROWS else ""
        raise FolderError(f"{err}{together}") from None
    except TableError as err:
        raise FolderError(str(err)) from None


def command_line():
    """The command line's parser: bad arguments are one line and exit status 2."""
    from .qk_project import METHODS
    from .runs import OneLineParser, positive

    ap = OneLineParser(
        prog="python -m attention.analysis.qk_global",
        description="Lay out one head's (or every head's of a layer) queries and keys over a corpus in 2-D.",
    )
    ap.add_argument("file", help="the corpus: a text file (one text per line), JSON Lines or a saved dataset")
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: the bundled MiniLM)")
    ap.add_argument("--layer", type=int, required=True)
    ap.add_argument("--head", type=int, default=None, help="one head (default: every head of the layer)")
    ap.add_argument(
        "--out", required=True, help="the folder the Parquet files are written to; one holding another run's is refused"
    )
    ap.add_argument("--tokens", type=positive, default=20_000, help="how many tokens of the corpus (default 20000)")
    ap.add_argument("--method", choices=METHODS, default="umap")
    ap.add_argument("--field", default="text", help="the JSON field or dataset column of the texts")
    return ap


def main(argv: list[str] | None = None) -> int:
    import time

    from ..errors import ModelLoadError
    from ..load.loading import load_model
    from .runs import RUN, RunError, check_folder, fail, fingerprint, write_json
    from .texts import CorpusError, iter_texts

    ap = command_line()
    args = ap.parse_args(argv)
    out = Path(args.out)
    try:  # the texts of the folder's points are those of its run: same model, corpus, field and tokens
        run = {"model": args.model, "file": str(Path(args.file).resolve()), "field": args.field}
        run |= {"tokens": args.tokens, "input": fingerprint(args.file)}
        points = sorted(path.name for path in out.glob("qk-L*-H*.parquet"))
        recorded = check_folder(out, run, output=(TEXTS_FILE, *points)) is not None
        model, tokenizer = load_model(args.model)
        start = time.perf_counter()
        heads = None if args.head is None else [args.head]
        sample = collect(model, tokenizer, iter_texts(args.file, args.field), args.layer, heads, args.tokens)
        read_s = time.perf_counter() - start
        frames = [head_points(sample, h, args.method) for h in sample.heads]
        if not recorded:
            out.mkdir(parents=True, exist_ok=True)
            write_json(out / RUN, run)
        written = write_folder(frames, sample.texts, out)
    except (CorpusError, ModelLoadError, RunError, ValueError, OSError) as err:
        return fail(ap.prog, err)
    print(
        f"{len(sample.tokens)} tokens of {len(sample.texts)} texts read in {read_s:.1f} s; {len(written)} "
        f"head(s) of layer {args.layer} laid out by {args.method} in {time.perf_counter() - start - read_s:.1f} s; "
        f"written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
