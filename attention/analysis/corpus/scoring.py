"""What each head does over a whole corpus: attention.analysis.stats.head_stats of every text, batched.

Texts are tokenized one by one as the app does (attention.encode, truncated at the model's positions), put in
order of length within windows of the corpus, and run in batches of similar length, padded on the right with
the padding masked. Each layer's maps are reduced as the forward pass makes them: every text's own square
(its tokens only) goes through stats.head_stats and stats.pattern_labels, so a text scores exactly as it
would alone, and no map outlives its layer. What a batch gives is one row per (text, layer, head)
(`score_batch`); the corpus's figures are sums of those rows (`head_sums`), added up batch by batch and
finished into means (`finish`), so memory stays flat however long the corpus is.

    head_stats(model, tokenizer, texts, engine="local" | "ray", batch_size=32) -> DataFrame per (layer, head)
    (heads.py, through the engines of engines.py, which take score_batch from here)
    python -m attention.analysis.corpus FILE --model SOURCE --out DIR [--engine ray] ...   (cli.py)

The texts travel as (index, text, line) triples: `line` is where the text is in its file (texts.iter_numbered),
kept in the rows with the text's first CONTENT_CHARS characters (`content`), so a row can be traced back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

import numpy as np
import pandas as pd
import torch

from ...runs.bigrun import layer_hooks
from ...runs.inputs import Encoded, encode, on_model_device, within_positions
from ..stats import PATTERNS, pattern_labels, punctuation_mask
from ..stats import head_stats as text_head_stats
from .columns import MEASURED, STATS

SHARES = tuple(f"share_{label}" for label in PATTERNS)
WINDOW_BATCHES = 16  # texts are put in order of length within windows of this many batches
CONTENT_CHARS = 500  # of each text, kept in its rows (`content`)


def length_order(tokenizer, numbered: Iterable[tuple], batch_size: int, max_length: int) -> Iterator[tuple]:
    """The (index, text, ...) items, shortest text first within each window of WINDOW_BATCHES batches:
    consecutive batches then hold texts of similar length, and only one window is ever read ahead."""
    numbered = iter(numbered)
    while window := list(islice(numbered, batch_size * WINDOW_BATCHES)):
        cut = [within_positions(max_length, item[1])[0] for item in window]
        lengths = [min(len(ids), max_length) for ids in tokenizer(cut, verbose=False)["input_ids"]]
        yield from (window[k] for k in np.argsort(lengths, kind="stable"))


def padded(encoded: Sequence[Encoded]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids, attention_mask and token_type_ids (B, S) of the texts, padded on the right with masked zeros."""
    S = max(len(e.tokens) for e in encoded)
    ids = torch.zeros((len(encoded), S), dtype=torch.long)  # (B, S)
    mask, types = torch.zeros_like(ids), torch.zeros_like(ids)
    for b, e in enumerate(encoded):
        L = len(e.tokens)
        ids[b, :L], mask[b, :L], types[b, :L] = e.input_ids[0], 1, e.token_type_ids[0]
    return ids, mask, types


def _on_cpu(probs: torch.Tensor) -> np.ndarray:
    """A layer's (B, H, S, S) maps on the CPU: float32 for half weights, the model's own float otherwise."""
    return (probs.float() if probs.element_size() < 4 else probs).cpu().numpy()


def score_batch(
    model,
    tokenizer,
    index: Sequence[int],
    texts: Sequence[str],
    lines: Sequence[int] | None = None,
    measures: Sequence[str] = (),
) -> dict[str, np.ndarray]:
    """One row per (text, layer, head) of a batch of texts: `text` (the text's index), `line` (its line in
    its file; by default index + 1), `layer`, `head`, `tokens` (the text's length), the STATS of
    stats.head_stats, its stats.pattern_labels label (`pattern`) and the text's first CONTENT_CHARS
    characters (`content`). One forward pass; each layer's maps are reduced text by text, each on its own
    tokens, and let go. `measures` (measures.MEASURES) add their columns after the STATS, one more pass a text."""
    from .measures import check_measures, measure_columns, text_measures  # mixing's torch code: only when asked

    measures = check_measures(measures)
    encoded = [encode(tokenizer, text, max_length=model.config.max_position_embeddings) for text in texts]
    n_layers, H = model.config.num_hidden_layers, model.config.num_attention_heads
    per_layer: list[list[dict[str, np.ndarray]]] = [[] for _ in encoded]  # [text][layer] -> {stat: (1, H)}

    def reduce(layer: int, maps: np.ndarray) -> None:  # maps (B, H, S, S)
        for b, e in enumerate(encoded):
            L = len(e.tokens)
            square = maps[b, :, :L, :L][None]  # (1, H, L, L): this text's tokens only
            per_layer[b].append(text_head_stats(square, e.special, e.sequence_ids, punctuation_mask(e.tokens)))

    inputs = on_model_device(model, *padded(encoded))
    with torch.inference_mode(), layer_hooks(model, reduce, convert=_on_cpu):
        model(*inputs)
    added = measure_columns(measures)
    names = ("text", "line", "layer", "head", "tokens", *STATS, *added, "pattern", "content")
    columns: dict[str, list[np.ndarray]] = {name: [] for name in names}
    layer, head = np.divmod(np.arange(n_layers * H), H)
    lines = [i + 1 for i in index] if lines is None else lines
    for i, line, text, e, layers in zip(index, lines, texts, encoded, per_layer):
        stats = {name: np.concatenate([s[name] for s in layers]) for name in layers[0]}  # (n_layers, H)
        each = (("text", i), ("line", line), ("layer", layer), ("head", head), ("tokens", len(e.tokens)))
        for name, value in each:
            columns[name].append(np.broadcast_to(np.int64(value) if np.ndim(value) == 0 else value, layer.shape))
        for name in STATS:
            columns[name].append(stats[name].ravel())
        if added:
            measured = text_measures(model, e, measures)
            for name in added:
                columns[name].append(measured[name].ravel())
        columns["pattern"].append(pattern_labels(stats, len(e.tokens)).ravel())
        columns["content"].append(np.full(layer.shape, text[:CONTENT_CHARS], dtype=object))
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def means_of(frame: pd.DataFrame) -> list[str]:
    """The columns of `frame` that are means over query positions: the STATS, then any a run's measures added."""
    return [*STATS, *(c for c in frame.columns if c in MEASURED)]


def head_sums(rows: pd.DataFrame | dict[str, np.ndarray]) -> pd.DataFrame:
    """Per (layer, head), what the means and shares are made of: `tokens` (summed), each STAT (and measure) times
    its text's tokens (summed: a sum over query positions), `texts` and a count per pattern label (`share_*`)."""
    rows = pd.DataFrame(rows)
    weighted = rows[means_of(rows)].mul(rows["tokens"], axis=0)
    labels = pd.get_dummies(rows["pattern"]).reindex(columns=list(PATTERNS), fill_value=0).astype(np.int64)
    labels.columns = list(SHARES)
    frame = pd.concat([rows[["layer", "head", "tokens"]], weighted, labels], axis=1).assign(texts=1)
    return frame.groupby(["layer", "head"]).sum()


def add_sums(total: pd.DataFrame | None, sums: pd.DataFrame) -> pd.DataFrame:
    return sums if total is None else total.add(sums, fill_value=0)


def finish(sums: pd.DataFrame) -> pd.DataFrame:
    """head_sums of a whole corpus as its means: one row per (layer, head) with `layer`, `head`, `tokens`,
    each STAT as the mean over every query position of every text, and each label's share of the texts."""
    out, means = sums.copy(), means_of(sums)
    out[means] = sums[means].div(sums["tokens"], axis=0)
    out[list(SHARES)] = sums[list(SHARES)].div(sums["texts"], axis=0)
    out["tokens"] = out["tokens"].astype(np.int64)
    return out.reset_index()[["layer", "head", "tokens", *means, *SHARES]]
