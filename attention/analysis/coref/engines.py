"""Where coreference scoring's batches run: here, one after the other ("local"), or as a Ray Data job ("ray").

Both run attend.attend_batch on the same length buckets and give, bucket by bucket, its indices and their
(b, n_layers, H, K) pronoun -> candidate attention. With Ray, `map_batches` runs it in one actor holding the
model (shipped through Ray's object store with the encoded examples), a bucket per call; Ray starts as
corpus.engines.start_ray starts it (on this machine with 2 CPUs and no dashboard unless given `address`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from ..corpus.engines import ENGINES, check_engine, start_ray
from .attend import attend_batch

__all__ = ["ENGINES", "attended", "check_engine"]

Attended = Iterator[tuple[list[int], np.ndarray]]


def attended(
    engine: str,
    model,
    enc,
    chunks: list[list[int]],
    located: dict,
    forward: Callable,
    pad_id: int,
    address: str | None = None,
) -> Attended:
    """(chunk, attend_batch of it) for every chunk of example indices; Ray's may come in another order."""
    check_engine(engine)
    inputs = {key: enc[key] for key in ("input_ids", "token_type_ids") if key in enc}  # all attend_batch reads
    if engine == "local":
        return local_attended(model, inputs, chunks, located, forward, pad_id)
    return ray_attended(model, inputs, chunks, located, forward, pad_id, address)


def local_attended(model, inputs: dict, chunks: list[list[int]], located: dict, forward, pad_id: int) -> Attended:
    for chunk in chunks:
        yield chunk, attend_batch(model, inputs, chunk, located, forward, pad_id)


class ChunkScorer:
    """attend_batch as a Ray Data callable class: each actor holds the model and the encoded examples;
    a batch is rows of chunk numbers, each answered with its (1, b, n_layers, H, K) attention."""

    def __init__(self, model, inputs: dict, chunks: list[list[int]], located: dict, forward, pad_id: int):
        self.model, self.inputs, self.chunks = model, inputs, chunks
        self.located, self.forward, self.pad_id = located, forward, pad_id

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        (k,) = batch["chunk"].tolist()
        attention = attend_batch(self.model, self.inputs, self.chunks[k], self.located, self.forward, self.pad_id)
        return {"chunk": batch["chunk"], "attention": attention[None]}


def ray_attended(
    model, inputs: dict, chunks: list[list[int]], located: dict, forward, pad_id: int, address: str | None
) -> Attended:
    """The same chunks as a Ray Data job: a block and a call per chunk, so each keeps its own padding."""
    ray = start_ray(address)
    if not chunks:
        return
    scored = ray.data.from_items([{"chunk": k} for k in range(len(chunks))], override_num_blocks=len(chunks))
    scored = scored.map_batches(
        ChunkScorer,
        fn_constructor_args=(model, inputs, chunks, located, forward, pad_id),
        batch_size=1,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=1),
    )
    for batch in scored.iter_batches(batch_size=None, batch_format="numpy"):
        for k, attention in zip(batch["chunk"].tolist(), batch["attention"]):
            yield chunks[k], np.asarray(attention, dtype=np.float32)
