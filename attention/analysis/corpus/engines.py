"""Where a corpus's batches run: here, one after the other ("local"), or as a Ray Data job ("ray").

Both take the (index, text, line) triples in scoring.length_order and give scoring.score_batch's rows, batch by
batch; the per-batch function is the same one. With Ray, `map_batches` runs it in actors that each hold the
model: one actor on this machine by default (Ray started with 2 CPUs and no dashboard), or `workers` actors,
each with `gpus` GPUs, on the cluster at `address`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np

from ...models import Transformer
from .scoring import length_order, score_batch

ENGINES = ("local", "ray")


def batches(
    engine: str,
    model,
    tokenizer,
    numbered: Iterable[tuple[int, str, int]],
    batch_size: int = 32,
    measures: tuple[str, ...] = (),
    **ray_options,
) -> Iterator[dict[str, np.ndarray]]:
    """score_batch's rows of the (index, text, line) triples, batch by batch, in order of length (read as they go:
    only a window of texts is held at a time by the local engine), with the columns `measures` add."""
    check_engine(engine)
    if not isinstance(model, Transformer):
        raise ValueError(f"corpus statistics take an encoder or a causal decoder of ours, not {type(model).__name__}")
    ordered = length_order(tokenizer, numbered, batch_size, model.config.max_position_embeddings)
    if engine == "local":
        return local_batches(model, tokenizer, ordered, batch_size, measures)
    return ray_batches(model, tokenizer, ordered, batch_size, measures=measures, **ray_options)


def check_engine(engine: str) -> None:
    """A ValueError naming `engine` unless it is one of ENGINES."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def start_ray(address: str | None = None):
    """Ray, started unless it already runs: joining the cluster at `address`, or without one on this machine
    (2 CPUs, no dashboard). Returns the ray module."""
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address)
        else:
            ray.init(num_cpus=2, include_dashboard=False)
    return ray


def local_batches(
    model, tokenizer, ordered: Iterable[tuple[int, str, int]], batch_size: int, measures: tuple[str, ...] = ()
):
    ordered = iter(ordered)
    while batch := list(islice(ordered, batch_size)):
        index, texts, lines = zip(*batch)
        yield score_batch(model, tokenizer, index, texts, lines, measures)


class BatchScorer:
    """score_batch as a Ray Data callable class: each actor holds one model, given or loaded from `source`."""

    def __init__(
        self, model=None, tokenizer=None, source: str | None = None, device: str = "cpu", measures: tuple = ()
    ):
        self.measures = measures
        if model is None:
            from ... import load_model

            model, tokenizer = load_model(source, device=device)
        self.model, self.tokenizer = model, tokenizer

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        index, texts, lines = (batch[name].tolist() for name in ("index", "text", "line"))
        return score_batch(self.model, self.tokenizer, index, texts, lines, self.measures)


def ray_batches(
    model,
    tokenizer,
    ordered: Iterable[tuple[int, str, int]],
    batch_size: int,
    *,
    address: str | None = None,
    source: str | None = None,
    workers: int = 1,
    gpus: float = 0,
    measures: tuple[str, ...] = (),
) -> Iterator[dict[str, np.ndarray]]:
    """The same batches as a Ray Data job. Without `address`, Ray starts on this machine (2 CPUs, no
    dashboard) unless it already runs; with one, it joins that cluster. The actors get `model` and
    `tokenizer` (shipped through Ray's object store) or, with `source`, load it themselves (on a GPU
    when `gpus`)."""
    ray = start_ray(address)
    items = [{"index": i, "text": text, "line": line} for i, text, line in ordered]
    if not items:
        return
    args = (None, None, source, "cuda" if gpus else "cpu") if source is not None else (model, tokenizer, None, "cpu")
    args = (*args, tuple(measures))
    blocks = -(-len(items) // batch_size)  # a block per batch, in length order
    scored = ray.data.from_items(items, override_num_blocks=blocks).map_batches(
        BatchScorer,
        fn_constructor_args=args,
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_gpus=gpus or None,
    )
    yield from scored.iter_batches(batch_size=None, batch_format="numpy")
