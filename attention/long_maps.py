"""Exact attention maps of long inputs, past the memory an (H, L, L) map per layer would take: one forward pass
through the fused kernel keeps, per layer, what recomputing a map needs (attention/core/long.py: q and k after
positions, the mask, each row's log-sum-exp), never a whole map. Then any rectangle of any head is
exp(scores - lse) for its rows (`LongMaps.tile`), and a pooled overview reduces a head's map block by block in
one pass of row tiles (`LongMaps.blocks`). Memory: the kept q and k, O(layers · L · d), plus one tile of rows.

    maps = long_maps(model, input_ids)            # a Transformer, or an EncoderDecoder with part=
    maps.blocks(layer, head, 256)                 # (256, 256): the map's mean over each block
    maps = long_maps(model, input_ids, pool=256)  # every head's blocks made in the pass, read by blocks()
    maps.tile(layer, head, slice(0, 512), slice(1024, 1536))  # map[0:512, 1024:1536], exact

The numbers are the explicit maps' (Transformer.forward's attentions) to float32 rounding: the same scores,
mask, soft-cap and score terms, made a tile at a time. Letters as in attention/core/mha.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import torch

from .core import pooling
from .core.long import LongKeep, LongLayer, Progress, tile_rows
from .core.request import NO_MAP, MapRequest
from .models.blocks import Transformer
from .models.seq2seq import EncoderDecoder

# a block's sum (divided by its size afterwards) or its max
REDUCTIONS: dict[str, Callable[..., torch.Tensor]] = {"mean": torch.sum, "max": torch.amax}
TILE_CELLS = 2**24  # the most cells one tile may hold: 64 MiB of float32 (4,096 × 4,096)
PARTS = ("encoder", "decoder")  # an encoder-decoder's self-attention stacks


def long_maps(
    model: Transformer | EncoderDecoder,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    batch: int = 0,
    part: str = "encoder",
    decoder_input_ids: torch.Tensor | None = None,
    decoder_attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    pool: int | None = None,
    progress: Progress | None = None,
    every: int | None = None,
    on_layer: Callable[[LongMaps, int], None] | None = None,
) -> LongMaps:
    """One forward pass of `model` over input_ids (B, L) with its attention_mask (B, L) (1 token, 0 padding),
    keeping what batch element `batch`'s maps need. An EncoderDecoder: `part` "encoder" (the encoder's
    self-attention over input_ids) or "decoder" (the decoder's self-attention over decoder_input_ids (B, L_dec),
    with its decoder_attention_mask, after the encoder's fused pass); cross-attention maps are not kept. A
    Transformer with token types reads token_type_ids (B, L) as its forward does (None: none added). With `pool`
    n, every head's (n, n) blocks (mean and max) are made in the pass itself, from the scores its output is made
    of (`blocks` and `pooled` at that n then read them), and `progress`(heads done) is called after each head.
    `on_layer`(maps, layer) is called as soon as a layer is kept, while the pass runs.

    With `every` k (a Transformer, or an EncoderDecoder's encoder), the pass keeps the input of every k-th layer
    instead of each layer's q and k (attention/core/long.py: LongKeep): a layer's maps are then made from q and k
    made again by the layers from the kept input before it, the same numbers to the bit, and the last k layers
    made are kept until another is asked for. Kept: (layers / k) layer inputs and k layers' q and k, not every
    layer's; a tile of a layer not among them costs the forward of up to k layers."""
    if input_ids.dim() != 2 or not 0 <= batch < input_ids.size(0):
        raise ValueError(
            f"input_ids must be (batch, length) with batch element {batch} in it: {tuple(input_ids.shape)}"
        )
    if every is not None and (every < 1 or (isinstance(model, EncoderDecoder) and part != "encoder")):
        raise ValueError(f"every must be a positive number of layers, for a decoder-only model or an encoder: {every}")
    keep = LongKeep(batch, pool, progress, every=every)
    maps = LongMaps(keep.layers, keep)
    if on_layer is not None:
        keep.on_layer = lambda layer: on_layer(maps, layer)
    with torch.inference_mode():
        if isinstance(model, EncoderDecoder):
            _encoder_decoder(model, input_ids, attention_mask, keep, part, decoder_input_ids, decoder_attention_mask)
        else:
            model(input_ids, attention_mask, token_type_ids, request=MapRequest(keep_hidden=False, keep=keep))
    if every is not None:
        runner = model.encoder if isinstance(model, EncoderDecoder) else model
        maps.again = _again(runner, (input_ids, attention_mask, token_type_ids), keep)
    return maps


def _again(model: Transformer, args: tuple, keep: LongKeep) -> Callable[[int], dict[int, LongLayer]]:
    """again(layer): the layers of `layer`'s run of keep.every, made by the pass resumed at the kept input of the
    run's first layer (from the embeddings for the first run), with the pass's own pooling so that every layer
    takes the same steps, to the bit; {layer: LongLayer} of the run."""
    assert keep.every is not None
    every, n_layers = keep.every, len(model.layers)

    def again(layer: int) -> dict[int, LongLayer]:
        first = layer // every * every
        last = min(first + every, n_layers) - 1
        resumed = LongKeep(keep.batch, keep.pool, start=first, inputs=keep.inputs)
        with torch.inference_mode():
            model(*args, request=MapRequest(layers=(last,), stop=True, keep_hidden=False, keep=resumed))
        return {first + i: kept for i, kept in enumerate(resumed.layers) if kept is not None}

    return again


def _encoder_decoder(model: EncoderDecoder, input_ids, attention_mask, keep, part, decoder_ids, decoder_mask):
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if part == "encoder":
        model.encoder(input_ids, attention_mask, request=MapRequest(keep_hidden=False, keep=keep))
        return
    if decoder_ids is None or decoder_ids.dim() != 2 or decoder_ids.size(0) != input_ids.size(0):
        raise ValueError("the decoder's maps need decoder_input_ids, (batch, length) with the encoder's batch")
    memory = model.encoder(input_ids, attention_mask, request=NO_MAP).last_hidden_state  # (B, S, D)
    assert memory is not None
    model.decode(decoder_ids, decoder_mask, memory, attention_mask, request=MapRequest(keep=keep))


class LongMaps:
    """Each layer's kept tensors (attention/core/long.py): any head's map, or any part of it, made on demand."""

    def __init__(self, layers: list[LongLayer | None], keep: LongKeep | None = None):
        self.layers, self.keep = layers, keep  # a None layer: made again by `again` (long_maps' `every`)
        self.again: Callable[[int], dict[int, LongLayer]] | None = None
        self.live: dict[int, LongLayer] = {}  # the last run of layers made again
        self._lock = threading.Lock()  # one run made again at a time, however many pages ask

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(layers, H, L, S): the maps' shape, as transformers' attentions stacked."""
        H, L, S = self.keep.shape if self.keep is not None and self.keep.shape else (0, 0, 0)
        return len(self.layers), H, L, S

    @property
    def nbytes(self) -> int:
        """The bytes the kept tensors hold, each storage once (the layers share the model's mask), with the kept
        layer inputs and the layers made again."""
        storages = {}
        for kept in (*(kept for kept in self.layers if kept is not None), *self.live.values()):
            for x in (kept.q, kept.k, kept.mask, kept.largest, kept.log_sum, *(kept.blocks or ())):
                if x is not None:
                    storages[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
        for x in () if self.keep is None else self.keep.inputs.values():
            storages[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
        return sum(storages.values())

    def made_again(self, layer: int) -> bool:
        """Whether asking for `layer` makes its q and k again (neither kept nor among the last made)."""
        return self.layers[layer] is None and layer not in self.live

    def _layer(self, layer: int, head: int) -> LongLayer:
        n_layers, H, _, _ = self.shape
        if not (0 <= layer < n_layers and 0 <= head < H):
            raise ValueError(f"no layer {layer}, head {head}: {n_layers} layers of {H} heads")
        kept = self.layers[layer]
        if kept is not None:
            return kept
        assert self.again is not None
        with self._lock:
            if layer not in self.live:
                self.live = {}  # the last run let go before the next is made
                self.live = self.again(layer)
            return self.live[layer]

    def tile(self, layer: int, head: int, rows: slice, cols: slice) -> np.ndarray:
        """map[rows, cols] of `head` in `layer`, float32 (P, C), exact: rows and cols are Python slices (a
        positive step or none), P · C at most TILE_CELLS."""
        kept = self._layer(layer, head)
        _, L, S = kept.shape
        picked_rows, picked_cols = _positions(rows, L, "rows"), _positions(cols, S, "cols")
        if len(picked_rows) * len(picked_cols) > TILE_CELLS:
            raise ValueError(f"a tile holds at most {TILE_CELLS:,} cells: ask for a smaller one, or for blocks")
        out = np.empty((len(picked_rows), len(picked_cols)), dtype=np.float32)
        for window, first, count in _windows(picked_rows, kept.span):
            probs = kept.probs(head, window, cols)  # (P, C): the window's rows, every key's scores made
            out[first : first + count] = probs[picked_rows[first] - window.start :: picked_rows.step][:count].cpu()
        return out

    def blocks(self, layer: int, head: int, n: int, reduce: str = "mean") -> np.ndarray:
        """(n, n) float32: the mean (or "max") of `head`'s map in `layer` over each block, its rows and columns
        cut into n contiguous ranges as numpy.array_split cuts them; 1 <= n <= L. One pass of row tiles, each a
        whole number of row blocks."""
        return self.pooled(layer, head, n, (reduce,))[0]

    def pooled(self, layer: int, head: int, n: int, reduces: tuple[str, ...] = ("mean", "max")) -> list[np.ndarray]:
        """`blocks` for each of `reduces`, (n, n) float32 each, from the one pass of row tiles."""
        kept = self._layer(layer, head)
        _, L, S = kept.shape
        if not 1 <= n <= min(L, S):
            raise ValueError(f"n must be from 1 to {min(L, S)}, the map's length, got {n}")
        for reduce in reduces:
            if reduce not in REDUCTIONS:
                raise ValueError(f"reduce must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
        if kept.blocks is not None and kept.blocks[0].size(-1) == n:  # pooled in the pass
            made = dict(zip(REDUCTIONS, kept.blocks))
            return [made[reduce][head].cpu().numpy() for reduce in reduces]
        ops = [REDUCTIONS[reduce] for reduce in reduces]
        outs = [torch.empty(n, n, dtype=torch.float32, device=kept.q.device) for _ in ops]
        for first, count, size in pooling.uniform_runs(L, n):  # row blocks of one size at a time
            per = max(1, tile_rows(S) // size)  # whole blocks per tile
            for block in range(first, first + count, per):
                k = min(per, first + count - block)
                start = pooling.start(L, n, block)
                probs = kept.probs(head, slice(start, start + k * size))  # (k·size, S)
                for op, out in zip(ops, outs):
                    out[block : block + k] = op(pooling.reduce_last(probs, n, op).view(k, size, n), 1)  # (k, n)
        for reduce, out in zip(reduces, outs):
            if reduce == "mean":
                out /= torch.outer(pooling.sizes(L, n), pooling.sizes(S, n)).to(out)  # each block's sum over its cells
        return [out.cpu().numpy() for out in outs]

    def row(self, layer: int, head: int, query: int) -> np.ndarray:
        """(S,) float32: query `query`'s whole row of `head`'s map in `layer`, over every key."""
        _, _, L, _ = self.shape
        if not 0 <= query < L:
            raise ValueError(f"query must be from 0 to {L - 1}, got {query}")
        return self.tile(layer, head, slice(query, query + 1), slice(None))[0]


def _positions(picked: slice, length: int, name: str) -> range:
    if not isinstance(picked, slice):
        raise ValueError(f"{name} must be a slice, got {type(picked).__name__}")
    positions = range(length)[picked]
    if positions.step < 1:
        raise ValueError(f"{name} must run forwards (a positive step), got step {positions.step}")
    return positions


def _windows(rows: range, span: int) -> list[tuple[slice, int, int]]:
    """The row tiles that hold `rows`: (window, first, count) for each tile of `span` rows (from row 0 on, as the
    log-sum-exps were taken: the same scores to the bit) that holds some, rows[first : first + count] in it."""
    found = []
    for start in range(rows[0] // span * span, rows[-1] + 1, span) if rows else ():
        first = max(0, -(-(start - rows.start) // rows.step))  # the first of `rows` at or after `start`
        stop = min(len(rows), -(-(start + span - rows.start) // rows.step))  # and after the last before its end
        if first < stop:
            found.append((slice(start, start + span), first, stop - first))
    return found
