"""Per-head statistics over a whole corpus, the library's entry point: the engines' batches (engines.py) of
scoring.score_batch's rows, summed per head as they come and finished into means.

    head_stats(model, tokenizer, texts, engine="local" | "ray", batch_size=32) -> DataFrame per (layer, head)
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from .engines import batches
from .scoring import add_sums, finish, head_sums


def head_stats(
    model, tokenizer, texts: Iterable[str], engine: str = "local", batch_size: int = 32, measures: tuple[str, ...] = ()
) -> pd.DataFrame:
    """Per-head statistics over a corpus: one row per (layer, head) with `layer`, `head`, `tokens` (query
    positions counted), the means of stats.head_stats's STATS over every query position of every text
    (padding never counted) and the share of texts in which the head takes each label (`share_<label>`).
    `engine`: "local" (this process) or "ray" (a Ray Data job; see engines.ray_batches). `measures` (of
    measures.MEASURES: "sinks", "weighted") add their means after the STATS (measures.py)."""
    total = None
    numbered = ((i, text, i + 1) for i, text in enumerate(texts))
    for rows in batches(engine, model, tokenizer, numbered, batch_size, measures):
        total = add_sums(total, head_sums(rows))
    if total is None:
        raise ValueError("head_stats needs at least one text")
    return finish(total)
