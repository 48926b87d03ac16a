"""The "long" implementation (implementations.py): each layer's output, and beside it what an exact map needs,
never the map itself. Kept per layer, for one batch element (a `LongKeep`'s `batch`): q after positions
(H, L, d), k per key/value group (G, S, d), the layer's mask (a view of the one the model built), the attention
module (its scaling, soft-cap and score terms) and each query row's log-sum-exp of its scores, (H, L), in two
parts: the row's largest score and the log of the sum of exp(score - largest). Head h's map over any rectangle is
then exp((scores - largest) - log_sum) for its rows (`LongLayer.probs`), its scores made one head and one row tile
at a time; attention/long_maps.py reads them. The two parts keep float32's precision where a probability is near
1: scores minus their largest are those the explicit softmax exponentiates, and log_sum is small, where a float32
log-sum-exp of scores of 30 is off by 2e-6 (its last bit) and so is every probability.

The output: torch's fused kernel, a tile of query rows at a time (no more than a tile's rows of the mask made
additive), when the mask is all the scores need, the log-sum-exps then taken one head and one row tile at a time;
otherwise (a soft-cap, DeBERTa's position terms) the explicit steps a row tile at a time (`tiled`), the
log-sum-exps taken from the same scores. A boolean mask's tile of rows is scored against only the keys some of its
rows may see (`seen`: a causal tile sees none past its last row). T5's relative bias is never an (H, L, L) mask
here: the model hands the keep a RowBias (models/position_parts.py), each tile's bias read from one head's bias
over every distance, and the explicit steps add it. Letters as in mha.py; P query rows of a tile,
W the keys it sees, C columns asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import torch

from .dot_product import no_record
from .pooling import Pooled
from .score_parts import Sinks

if TYPE_CHECKING:
    from .mha import MultiHeadAttention

Progress = Callable[[int], None]  # progress(heads done): called after each head of a pooling pass
TILE_BYTES = 2**24  # one head's float32 scores for a tile of query rows, (P, S): 16 MiB at most
CAUSAL_TILES, MIN_PASS_ROWS = 8, 64  # pass_rows: a masked pass's tiles


def tile_rows(keys: int) -> int:
    """How many query rows one tile of scores against `keys` keys holds within TILE_BYTES."""
    return max(1, TILE_BYTES // (4 * keys))


def pass_rows(queries: int, keys: int, mask: torch.Tensor | None) -> int:
    """The query rows of a tile of the explicit steps' pass (`tiled`): tile_rows, and where a boolean mask may
    hide the keys past a tile's rows (causal), at most an eighth of the queries (CAUSAL_TILES tiles at least), so
    that `seen` leaves out most of the hidden half. bench/long.py, 2,048 tokens (one tile before): the pass with
    every head's blocks 1.99× the fused forward's time, 1.64× in eighths; 8,192 tokens: 1.14× (tiles of 512)."""
    rows = tile_rows(keys)
    if mask is not None and mask.dtype == torch.bool and mask.size(-2) > 1:
        rows = min(rows, max(MIN_PASS_ROWS, -(-queries // CAUSAL_TILES)))
    return rows


@dataclass(frozen=True, eq=False)
class LongLayer:
    """One layer's kept tensors, of one batch element: q (H, L, d) after positions, k (G, S, d) after positions,
    `mask` None or (1 or H, L or 1, S) boolean (True may attend) or additive; each row's log-sum-exp in two parts,
    `largest` and `log_sum`, (H, L) float32 each (both 0 for a row with no key left)."""

    attention: MultiHeadAttention
    q: torch.Tensor
    k: torch.Tensor
    mask: torch.Tensor | None
    largest: torch.Tensor
    log_sum: torch.Tensor
    blocks: tuple[torch.Tensor, torch.Tensor] | None = None  # (means, maxima), (H, n, n) each: the pass's pooling
    bias: Callable[..., torch.Tensor] | None = None  # T5's bias a tile of rows at a time (position_parts.RowBias)
    span: int = 1  # the query rows of the tiles the log-sum-exps were taken in, from row 0 on

    @property
    def lse(self) -> torch.Tensor:
        """(H, L) each row's log-sum-exp, float64."""
        return self.largest.double() + self.log_sum.double()

    @property
    def shape(self) -> tuple[int, int, int]:
        """(H, L, S): the layer's maps' shape."""
        return self.q.size(0), self.q.size(1), self.k.size(1)

    def probs(self, head: int, rows: slice, cols: slice = slice(None)) -> torch.Tensor:
        """map[rows, cols] of head `head`: exp((scores - largest) - log_sum), float32 (P, C); 0 where the mask
        hides a key. The scores are made against every key the rows may see, as the log-sum-exps were."""
        mask = None if self.mask is None else self.mask[None]  # (1, 1 or H, L or 1, S)
        q, k = self.q[None, head : head + 1], self.k[None]
        scores, lo = _scores(self.attention, q, k, mask, head, rows, self.bias)
        shifted = scores[0, 0].sub_(self.largest[head, rows, None]).sub_(self.log_sum[head, rows, None])  # (P, W)
        if shifted.size(1) == self.k.size(1):  # every key seen by some row
            return shifted.exp_()[:, cols]  # (P, C)
        probs = shifted.new_zeros(shifted.size(0), self.k.size(1))  # (P, S)
        probs[:, lo : lo + shifted.size(1)] = shifted.exp_()
        return probs[:, cols]  # (P, C)


def _scores(
    attention: MultiHeadAttention,
    q: torch.Tensor,
    k: torch.Tensor,
    mask: torch.Tensor | None,
    head: int,
    rows: slice,
    bias: Callable[..., torch.Tensor] | None = None,
    window: Window | None = None,
) -> tuple[torch.Tensor, int]:
    """q (B, 1, L, d) one head's for every query, k (B or 1, G, S, d) grouped, mask broadcastable to (B, H, L, S):
    that head's scores of `rows`, float32 (B, 1, P, W), the steps of dot_product.attention_probs, against the keys
    lo ... lo + W - 1 that some of the rows may see (a boolean mask's; every key with no mask or an additive
    one), and lo: the keys outside are -inf, as the mask makes them. `window`: these rows' Window where it was
    found once for every head (`tiled`); else found here."""
    group = attention.num_heads // attention.num_kv_heads
    q = q[:, :, rows]  # (B, 1, P, d)
    k = k[:, head // group : head // group + 1]  # (B, 1, S, d): the head's key/value group
    if mask is not None:
        mask = mask if mask.size(-3) == 1 else mask[..., head : head + 1, :, :]  # (B or 1, 1, L or 1, S)
        mask = mask if mask.size(-2) == 1 else mask[..., rows, :]  # (B or 1, 1, P or 1, S)
    lo, hi = seen(mask, k.size(2)) if window is None else window[:2]
    if attention.terms:  # DeBERTa's position terms, these rows' alone, against every key (p2c reads them all)
        mask = attention.add_terms(q, k, mask, no_record, head=head, rows=rows)  # (B, 1, P, S)
    k, mask = k[:, :, lo:hi], None if mask is None else mask[..., lo:hi]  # (B, 1, W, d), (B or 1, 1, P or 1, W)
    if math.frexp(attention.scaling)[0] == 0.5:  # a power of two (d = 64: 1/8) scales q · k to the bit: scale q
        scores = torch.matmul(q * attention.scaling, k.transpose(-2, -1))  # (B,1,P,d) x (B,1,d,W) -> (B,1,P,W)
    else:
        scores = torch.matmul(q, k.transpose(-2, -1)).mul_(attention.scaling)  # (B, 1, P, W)
    if attention.cap is not None:  # a score part that bends the scores (score_parts.py: Gemma 2's soft-cap)
        scores = attention.cap(scores, no_record)  # (B, 1, P, W)
    if bias is not None:  # T5's, these rows' against the keys seen, added as its mask adds it
        scores = scores + bias(head, rows, lo, lo + scores.size(-1))  # (B, 1, P, W)
    if mask is not None:  # a boolean one as adding 0 / -inf, to the bit (in place: no copy of the scores)
        scores = scores.masked_fill_(mask.logical_not(), float("-inf")) if mask.dtype == torch.bool else scores + mask
    return scores.float(), lo  # (B, 1, P, W)


class Window(NamedTuple):
    """A tile of rows' keys: lo ... hi - 1 hold every one some row may see (`seen`); `blind`, whether a row may see
    none (its probabilities then 0, its softmax NaN)."""

    lo: int
    hi: int
    blind: bool


def seen(mask: torch.Tensor | None, keys: int) -> tuple[int, int]:
    """(lo, hi): the keys lo ... hi - 1 hold every one a boolean `mask` (..., P or 1, S) lets some row see (a causal
    tile of rows sees none past its last row); (0, keys) for another mask, or none, or one that hides them all."""
    if mask is None or mask.dtype != torch.bool:
        return 0, keys
    index = mask.reshape(-1, mask.size(-1)).any(dim=0).nonzero()  # (n, 1): the keys some row sees
    return (int(index[0]), int(index[-1]) + 1) if len(index) else (0, keys)


def _stats(scores: torch.Tensor, sink: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(largest, log_sum) of each row of `scores` (..., S) float32: its largest score and log Σ exp(s - largest),
    (...,) each; both 0 for a row with no key left, whose probabilities are then exp(-inf) = 0, as the explicit
    steps make them. `sink`, the head's learned sink logit (gpt-oss: score_parts.Sinks), joins every row's sum."""
    largest = scores.amax(dim=-1)  # (...,)
    if sink is not None:
        largest = torch.maximum(largest, sink)
    largest = largest.nan_to_num_(neginf=0.0)
    total = (scores - largest[..., None]).exp_().sum(dim=-1)  # (...,), one buffer of the scores' size
    if sink is not None:
        total = total + (sink - largest).exp()
    return largest, total.log_().nan_to_num_(neginf=0.0)


def _sink(attention, head: int) -> torch.Tensor | None:
    """Head `head`'s learned sink logit, float32, () (None without sinks)."""
    return None if attention.sink is None else attention.sinks[head].detach().float()


class LongKeep:
    """Where a "long" pass keeps each layer's tensors (request.MapRequest.keep): `layers`, in the order the
    layers ran, of batch element `batch`. With `pool` n, each layer's every head is also pooled into (n, n)
    blocks in the pass itself (`tiled`: the scores made once for the output, the log-sum-exps and the blocks);
    `progress`(heads done) is called after each head of the pass then (it may raise to stop it).

    With `every` k, the pass keeps the input (B, L, D) of every k-th layer from layer k on (`inputs`), and lets
    each layer's q and k go once `on_layer`(its index) has read them: its entry in `layers` is then None, and the
    layer is made again by a pass resumed at `start`, the first layer of its k, from its kept input (long_maps.py).
    """

    def __init__(
        self,
        batch: int = 0,
        pool: int | None = None,
        progress: Progress | None = None,
        *,
        every: int | None = None,
        on_layer: Callable[[int], None] | None = None,
        start: int = 0,
        inputs: dict[int, torch.Tensor] | None = None,
    ):
        self.batch, self.pool, self.progress = batch, pool, progress
        self.every, self.on_layer, self.start = every, on_layer, start
        self.inputs = {} if inputs is None else inputs  # layer -> its input (B, L, D), kept every `every` layers
        self.bias: Callable[..., torch.Tensor] | None = None  # set by the model: T5's bias, never an (H, L, L) mask
        self.layers: list[LongLayer | None] = []
        self.shape: tuple[int, int, int] | None = None  # (H, L, S) of the layers' maps, once one is kept
        self.heads_done = 0

    def skips(self, layer: int) -> bool:
        """Whether a resumed pass leaves out `layer` (one before its start)."""
        return layer < self.start

    def layer_input(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """`layer`'s input: the kept one where the pass resumes at it; else x (B, L, D), kept where the pass keeps
        every `every`-th layer's."""
        if layer == self.start and layer in self.inputs:
            return self.inputs[layer]
        if self.every is not None and layer and layer % self.every == 0:
            self.inputs[layer] = x.detach().clone()
        return x

    def pooled(self, q: torch.Tensor, k: torch.Tensor) -> Pooled | None:
        """A layer's Pooled for q (B, H, L, d) and k (B, G, S, d), or None without `pool`."""
        return None if self.pool is None else Pooled(q.size(1), q.size(2), k.size(2), self.pool, q.device)

    def head_done(self) -> None:
        self.heads_done += 1
        if self.progress is not None:
            self.progress(self.heads_done)

    def add(self, attention, q, k, mask, stats: tuple[torch.Tensor, torch.Tensor] | None, pooled=None) -> None:
        """q (B, H, L, d), k (B, G, S, d), `mask` broadcastable to (B, H, L, S), stats (largest, log_sum), each
        (B, H, L), or None (then computed here, a row tile at a time), `pooled` the layer's Pooled or None: the
        kept batch element's, as LongLayer."""
        b = self.batch
        q, k = q[b].detach(), k[b].detach()  # (H, L, d), (G, S, d)
        if q.size(0) > 1:  # copies, so that the batch's tensors are let go
            q, k = q.clone(), k.clone()
        if mask is not None:
            mask = mask[b if mask.size(0) > 1 else 0]  # (1 or H, L or 1, S): a view of the model's one
        largest, log_sum = _rows_stats(attention, q, k, mask, self.bias) if stats is None else (s[b] for s in stats)
        blocks = None if pooled is None else (pooled.means(), pooled.maxima)
        span = tile_rows(k.size(1)) if stats is None else pass_rows(q.size(1), k.size(1), mask)  # as they were made
        kept = LongLayer(attention, q, k, mask, largest, log_sum, blocks, self.bias, span)
        self.layers.append(kept)
        self.shape = kept.shape
        if self.on_layer is not None:
            self.on_layer(self.start + len(self.layers) - 1)
        if self.every is not None:  # made again from the kept inputs when asked for
            self.layers[-1] = None


def _rows_stats(attention, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, bias=None):
    """(largest, log_sum) (H, L) of each head's scores, one head and one tile of rows at a time."""
    H, L, _ = q.shape
    largest, log_sum = (torch.empty(H, L, dtype=torch.float32, device=q.device) for _ in range(2))
    step = tile_rows(k.size(1))
    mask = None if mask is None else mask[None]  # (1, 1 or H, L or 1, S)
    for h in range(H):
        for start in range(0, L, step):
            rows = slice(start, start + step)
            scores, _ = _scores(attention, q[None, h : h + 1], k[None], mask, h, rows, bias)  # (1, 1, P, W)
            largest[h, rows], log_sum[h, rows] = _stats(scores[0, 0], _sink(attention, h))
    return largest, log_sum


def fused_in_tiles(fused: Callable[..., torch.Tensor], q, k, v, mask) -> torch.Tensor:
    """`fused`(q, k, v, mask), the fused kernel's output (B, H, L, d) (implementations.py's), a tile of query rows
    at a time when the mask has rows (the kernel makes the rows it reads additive), each tile against the keys some
    of its rows may see."""
    if mask is None or mask.size(-2) == 1:
        return fused(q, k, v, mask)
    B, H, L, _ = q.shape
    heads, step = q.new_empty(B, H, L, v.size(-1)), tile_rows(k.size(2))
    for start in range(0, L, step):
        rows = slice(start, start + step)
        lo, hi = seen(mask[..., rows, :], k.size(2))
        keys = slice(lo, hi)
        heads[:, :, rows] = fused(q[:, :, rows], k[:, :, keys], v[:, :, keys], mask[..., rows, keys])  # (B,H,P,d)
    return heads


def tiled(attention, q, k, v, mask, keep: LongKeep | None = None) -> tuple[torch.Tensor, tuple, Pooled | None]:
    """The explicit steps one batch element, head and tile of query rows at a time: (heads (B, H, L, d),
    (largest, log_sum) (B, H, L) float32, the kept batch element's Pooled or None), no more than a tile's scores
    made at once; each tile's probabilities pooled into `keep`'s blocks where it pools."""
    B, H, L, _ = q.shape
    heads = q.new_empty(B, H, L, v.size(-1))  # (B, H, L, d)
    largest, log_sum = (torch.empty(B, H, L, dtype=torch.float32, device=q.device) for _ in range(2))
    group, step = H // k.size(1), pass_rows(L, k.size(2), mask)
    pooled = None if keep is None else keep.pooled(q, k)
    bias = None if keep is None else keep.bias
    starts = range(0, L, step)
    for b, h in ((b, h) for b in range(B) for h in range(H)):
        pooling = pooled if keep is not None and b == keep.batch else None  # the kept element's rows alone
        own = None if mask is None else mask[b : b + 1] if mask.size(0) > 1 else mask  # (1, ·, ·, S)
        if h == 0:  # each tile's window once for the heads, where they share the mask
            windows = _shared_windows(attention, own, starts, step, k.size(2))
        values = v[b : b + 1, h // group : h // group + 1]  # (1, 1, S, d)
        sink = _sink(attention, h)
        for start, window in zip(starts, windows):
            rows = slice(start, start + step)
            scores, lo = _scores(attention, q[b : b + 1, h : h + 1], k[b : b + 1], own, h, rows, bias, window)
            blind = window is None or window.blind
            probs, (largest[b, h, rows], log_sum[b, h, rows]) = _softmax(scores[0, 0], sink, blind)  # (P, W)
            heads[b, h, rows] = torch.matmul(probs.to(v.dtype), values[0, 0, lo : lo + probs.size(-1)])
            if pooling is not None:
                pooling.add(h, rows, lo, probs)
        if pooling is not None and keep is not None:
            keep.head_done()
    return heads, (largest, log_sum), pooled


def _shared_windows(attention, mask: torch.Tensor | None, starts: range, step: int, keys: int) -> list:
    """Each tile of rows' Window (`starts`, `step` rows each) where every head shares the mask and no score term
    reads it, else None for each (each head's made in _scores): one pass over a tile's mask for all the heads."""
    if attention.terms or (mask is not None and mask.size(-3) > 1):
        return [None] * len(starts)
    windows = []
    for start in starts:
        tile = None if mask is None else mask if mask.size(-2) == 1 else mask[..., start : start + step, :]
        boolean = tile is not None and tile.dtype == torch.bool
        blind = tile is not None and (not boolean or not bool(tile.any(dim=-1).all()))  # an additive one: may be
        windows.append(Window(*seen(tile, keys), blind))
    return windows


def _softmax(scores: torch.Tensor, sink: torch.Tensor | None, blind: bool = True) -> tuple[torch.Tensor, tuple]:
    """scores (P, W) float32 -> (probabilities (P, W), (largest, log_sum) (P,) each): torch's softmax, as the
    explicit steps take it (a row with no key 0; a sink keeps its share, score_parts.Sinks), and its row
    statistics read from it: the largest score's probability is exp(0) / Σ exp(s - largest), so log_sum is minus
    its log (to float32 rounding of that sum), with no second exp of the scores. `blind`: some row may see no
    key (its softmax NaN, made 0); False where none does, a pass over the probabilities saved."""
    probs = torch.softmax(scores, dim=-1)  # (P, W)
    if blind:
        probs = probs.nan_to_num_(nan=0.0)
    if sink is not None:
        probs = probs.mul_(Sinks.kept(scores[None, None], sink.view(1, 1, 1, 1), None)[0, 0])
        return probs, _stats(scores, sink)
    largest = scores.amax(dim=-1).nan_to_num_(neginf=0.0)  # (P,)
    top = probs.amax(dim=-1)  # (P,): 1 / Σ exp(s - largest); 0 for a row with no key
    return probs, (largest, torch.where(top > 0, top.log().neg_(), 0.0))
