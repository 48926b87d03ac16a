"""What attention mixes, not only where it looks: each head's weights scaled by the size of what it moves.

    norm_maps(model, input_ids)              ‖a_ij · f_h(x_j)‖ per head and ‖Σ_h a_ij · f_h(x_j)‖ per layer
    value_zeroing(model, input_ids, layer)   how much token i's layer output moves with token j's values zeroed
    sink_shares(model, input_ids)            each head's share of attention to the first token, raw and weighted

f_h(x_j) is head h's value of token j through head h's slice of the output projection, its bias left out:
v_hj · W_O[:, h·d:(h+1)·d]ᵀ, (D,) (Kobayashi et al., EMNLP 2020, "Attention is not only a weight"). Value
zeroing (Mohebbi et al., EACL 2023) zeroes token j's value vectors in every head: the probabilities read only q
and k, so each query's attention output loses exactly Σ_h a_ij f_h(x_j), and the layer's output with token j's
values zeroed is the rest of the block (residual, norms, feed-forward) applied to that output: one pass of the
layer's position-wise part per token (a causal layer's: over the tokens at and after it), never the whole model
again. ALTI, for post-norm encoders, is alti.py's.

Every function takes one sentence, input_ids (1, L), and an optional attention_mask (1, L): the results are
over its n real tokens only, (…, n, n), padding left out as ablation.ablate leaves it. A model is one stack
(models.Transformer): an encoder, a causal decoder, or an encoder-decoder's `.encoder`. Each layer's probs and
values are read by a recorder on the layer (core/request.py's Call.record), from the model's own forward pass.
Letters: H query heads, G key/value heads, L tokens, D model width, d head width.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..core.dot_product import Recorder
from ..core.request import MapRequest
from ..models import Transformer
from ..models.blocks import Block
from ..runs.bigrun import BIG_RUN_BYTES, maps_bytes, within_bound
from ..runs.inputs import on_model_device
from ..runs.run import read_only
from .stats import first_share

# value zeroing runs a layer's position-wise part (its norms and feed-forward block) over L tokens once per token:
# L² token passes, 17.7 s at 200 tokens of SmolLM2 on two busy cores (bench/analysis.py), so 256 tokens at most
VALUE_ZEROING_MAX_TOKENS = 256
ZEROED_PER_PASS = 16  # tokens whose zeroed values go through the layer's rest at once: (16, L, D) at a time
# one layer's mixing, read while the forward pass runs: (layer, probs (H, n, n), f (H, n, D) float64, records)
OnLayer = Callable[[int, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]], None]


@dataclass(frozen=True)
class NormMaps:
    """Value-weighted maps of one sentence: `heads[i]` (H, n, n) float32, ‖a_ij · f_h(x_j)‖ of each head of layer
    i; `layers[i]` (n, n) float32, ‖Σ_h a_ij · f_h(x_j)‖, the layer's heads together (not their norms' sum)."""

    heads: tuple[np.ndarray, ...]
    layers: tuple[np.ndarray, ...]


def _one_sentence(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The real tokens' positions (n,) of one sentence, after checking the inputs; a clear ValueError if wrong."""
    if not isinstance(model, Transformer):
        raise ValueError("mixing measures read one stack of layers: give an encoder-decoder's .encoder")
    if input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise ValueError(f"input_ids must be one sentence, (1, L); got {tuple(input_ids.shape)}")
    if attention_mask is None:
        return torch.arange(input_ids.size(1))
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask must be {tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}")
    real = attention_mask[0].bool().nonzero()[:, 0].cpu()  # (n,)
    if not len(real):
        raise ValueError("the attention mask has no real token")
    return real


def head_values(attention, v: torch.Tensor) -> torch.Tensor:
    """f_h(x_j) of every head and token: v (1, G, L, d), a layer's values as recorded ("v_heads"), shared over each
    group of query heads, through each head's slice of o_proj's weight, bias left out: (H, L, D) float64, a view of
    an (L, H, D) tensor, each token's heads together as mixed_norms' Gram matrices read them. The product is taken in
    float32 (or the model's wider float), as the model's own o_proj takes it, on o_proj's weight as it lies; one copy
    then widens it and lays it out by token (in float64, or in two copies, it was most of what value-weighted maps
    cost beyond the forward pass). mixed_norms sums its squares in float64."""
    H, d = attention.num_heads, attention.head_dim
    dtype = torch.promote_types(v.dtype, torch.float32)
    v = v[0].to(dtype).repeat_interleave(H // v.size(1), dim=0)  # (G, L, d) -> (H, L, d)
    W = attention.o_proj.weight.to(dtype)  # (D, H·d)
    W = W.view(W.size(0), H, d).permute(1, 0, 2)  # (H, D, d): head h's slice, each row-major in place
    f = torch.matmul(v, W.transpose(1, 2))  # (H, L, d) x (H, d, D) -> (H, L, D)
    by_token = torch.empty(f.size(1), H, f.size(2), dtype=torch.float64, device=f.device)  # (L, H, D)
    return by_token.copy_(f.transpose(0, 1)).transpose(0, 1)  # (H, L, D)


def each_layer(
    model: Transformer,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    on_layer: OnLayer,
    layers: list[int] | None = None,
    names: tuple[str, ...] = (),
) -> None:
    """One forward pass of the sentence that hands each of `layers` (all by default) to on_layer as it runs:
    its probs (H, n, n) and f_h(x_j) (H, n, D) float64 over the n real tokens, and the steps `names` recorded. The
    pass ends once the last of them is read: no later layer runs."""
    real = _one_sentence(model, input_ids, attention_mask)
    (ids, mask) = on_model_device(model, input_ids, attention_mask)
    layers = list(range(len(model.layers))) if layers is None else layers

    def recorder(i: int) -> Recorder:
        kept: dict[str, torch.Tensor] = {}

        def record(name, tensor):
            if name in ("v_heads", "v_norm", *names):
                kept[name] = tensor
            if name == "probs":  # the last step that reads the values' weights: the layer is read here
                on = slice(None) if mask is None else real.to(tensor.device)  # every token, or the real ones
                probs = tensor[0][:, on][:, :, on]  # (H, L, L) -> (H, n, n)
                v = kept.get("v_norm", kept["v_heads"])  # the values as read: Gemma 4's normed
                f = head_values(model.layers[i].attention, v)[:, on]  # (H, n, D)
                on_layer(i, probs, f, {k: t[:, on] for k, t in kept.items() if k not in ("v_heads", "v_norm")})
                if i == max(layers):
                    raise _AllRead  # the layers after it have nothing to give
            return tensor

        return record

    with torch.inference_mode():
        request = MapRequest(layers=(), keep_hidden=False)  # the recorded layers run their explicit steps
        with contextlib.suppress(_AllRead):
            model(ids, mask, recorders={i: recorder(i) for i in layers}, request=request)


class _AllRead(Exception):
    """Raised by each_layer's recorder once the last layer asked for is read, to end the forward pass there."""


def mixed_norms(probs: torch.Tensor, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """probs (H, L, S) and f (H, S, D) float64 -> (‖a_ij f_h(x_j)‖ (H, L, S), ‖Σ_h a_ij f_h(x_j)‖ (L, S)), float64.

    The layer's norm without its (L, S, D) vectors: ‖Σ_h a_h f_h‖² = aᵀ G_j a, G_j (H, H) the Gram matrix of the
    heads' f_h(x_j); in float64, so that cancelling heads leave no float32 rounding under the square root. Batched
    matrix products throughout: torch.einsum of the three took up to seconds a layer at 200 tokens."""
    H, L, S = probs.shape
    by_key = f.transpose(0, 1).contiguous()  # (S, H, D): a view where f is head_values' own
    gram = torch.bmm(by_key, by_key.transpose(1, 2))  # (S, H, D) x (S, D, H) -> (S, H, H)
    A = torch.empty(S, H, L, dtype=torch.float64, device=probs.device)  # each key's weights a_ij, a column a head
    A.copy_(probs.permute(2, 0, 1))  # one copy widens them and lays them out by key
    heads = A.permute(1, 2, 0) * gram.diagonal(dim1=1, dim2=2).T.sqrt()[:, None, :]  # (H, L, S) x (H, 1, S)
    squared = torch.bmm(gram, A).mul_(A).sum(1).T  # (S, H, H) x (S, H, L) -> (S, H, L) -> (L, S): aᵀ G_j a
    return heads, squared.clamp_min(0).sqrt()


def head_norms(probs: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """‖a_ij f_h(x_j)‖ = a_ij · ‖f_h(x_j)‖ of probs (H, L, S) and f (H, S, D): (H, L, S) float64, the heads alone,
    without mixed_norms' Gram matrices (what the layer's norm needs, half of what it costs)."""
    return probs.double() * f.norm(dim=-1).double()[:, None, :]  # (H, L, S) x (H, 1, S)


def norm_maps(model: Transformer, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> NormMaps:
    """Value-weighted maps of every layer (NormMaps), from one forward pass. Sized before the work: maps past
    the server's bound (bigrun.BIG_RUN_BYTES, every layer's (H + 1) maps) raise bigrun.KeepsTooMuch."""
    n = int(_one_sentence(model, input_ids, attention_mask).numel())
    config = model.config
    n_bytes = maps_bytes(len(model.layers), config.num_attention_heads + 1, n)
    within_bound("Value-weighted maps", n_bytes, "Try a shorter input.", BIG_RUN_BYTES)
    heads: list[np.ndarray] = []
    layers: list[np.ndarray] = []

    def keep(i: int, probs: torch.Tensor, f: torch.Tensor, records: dict) -> None:
        by_head, together = mixed_norms(probs, f)
        heads.append(read_only(by_head.float().cpu().numpy()))  # (H, n, n)
        layers.append(read_only(together.float().cpu().numpy()))  # (n, n)

    each_layer(model, input_ids, attention_mask, keep)
    return NormMaps(tuple(heads), tuple(layers))


def sink_shares(
    model: Transformer, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> dict[str, np.ndarray]:
    """Each head's share of attention to the first (real) token, mean over the query rows, (n_layers, H) each:
    `to_first` of the probabilities as they are, `to_first_weighted` of the value-weighted maps ‖a_ij f_h(x_j)‖,
    each row divided by its sum (stats.first_share; stats.head_stats gives both from maps held already)."""
    shares: dict[str, list[np.ndarray]] = {"to_first": [], "to_first_weighted": []}

    def keep(i: int, probs: torch.Tensor, f: torch.Tensor, records: dict) -> None:
        by_head = head_norms(probs, f)
        shares["to_first"].append(first_share(probs.double().cpu().numpy(), shares=False))  # (H,)
        shares["to_first_weighted"].append(first_share(by_head.cpu().numpy()))  # (H,)

    each_layer(model, input_ids, attention_mask, keep)
    return {name: read_only(np.stack(rows)) for name, rows in shares.items()}


def _check_layer(model: Transformer, layer) -> int:
    n_layers = len(model.layers)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
        raise ValueError(f"layer must be an integer from 0 to {n_layers - 1}, got {layer!r}")
    if hasattr(model.layers[layer], "cross_attention"):
        raise ValueError("value zeroing reads a layer with self-attention alone: an encoder's or a decoder's")
    return layer


def value_zeroing(
    model: Transformer, input_ids: torch.Tensor, layer: int, attention_mask: torch.Tensor | None = None
) -> np.ndarray:
    """(n, n) float64: row i, column j the cosine distance between token i's output of `layer` and the same output
    with token j's value vectors zeroed in every head, each row divided by its sum (Mohebbi et al., EACL 2023).

    One forward pass reads the layer's input x, probs and f_h(x_j); then, ZEROED_PER_PASS tokens at a time, the
    layer's rest runs on its attention output less Σ_h a_ij f_h(x_j) (the module's docstring says why that is the
    layer with those values zeroed). The distance is ½‖ŷ − ŷ′‖² of the unit vectors, in float64: 1 − cos without
    cancelling. A row whose every distance is 0 stays 0. More than VALUE_ZEROING_MAX_TOKENS real tokens is refused
    before any work, as is a layer that is not one of the model's."""
    real = _one_sentence(model, input_ids, attention_mask)
    n = int(real.numel())
    if n > VALUE_ZEROING_MAX_TOKENS:
        raise ValueError(
            f"value zeroing runs a layer once per token and reads {VALUE_ZEROING_MAX_TOKENS} tokens at most; this "
            f"input has {n}: shorten it to {VALUE_ZEROING_MAX_TOKENS} tokens or fewer"
        )
    block = model.layers[_check_layer(model, layer)]
    assert isinstance(block, Block)
    causal = model.config.attention.causal
    read: dict[str, torch.Tensor] = {}

    def keep(i: int, probs: torch.Tensor, f: torch.Tensor, records: dict) -> None:
        read.update(records, probs=probs.double(), f=f)

    each_layer(model, input_ids, attention_mask, keep, [layer], names=("block_input", "input"))
    x = read.get("block_input", read["input"])  # (1, n, D): the block's input (before its norm if pre-norm)
    a, f = read["probs"], read["f"]  # (H, n, n), (H, n, D)
    bias = block.attention.o_proj.bias
    out = torch.bmm(a, f).sum(0) + (0 if bias is None else bias.double())  # (H, n, n) x (H, n, D) -> (n, D)
    with torch.inference_mode():
        ids = input_ids[:, real.to(input_ids.device)].to(x.device)  # (1, n): the real tokens
        extra = model.layer_inputs.inputs(model, ids, model.embeddings(ids, None))[layer]  # (1, n, P) or None

        def output(x: torch.Tensor, attended: torch.Tensor, rows: slice) -> torch.Tensor:
            """The block's output, unit length, once its attention gave `attended` ((C or 1, n', D)): the feed-forward
            sub-block and what the layer adds last (Gemma 4's per-layer input and scalar)."""
            y = block.residual.after_attention(block, x, block.join(x, attended))  # (C or 1, n', D)
            return _unit(block.layer_part.finish(block, y, None if extra is None else extra[:, rows]))

        base = output(x, out[None].to(x.dtype), slice(None))  # (1, n, D)
        d = torch.zeros(n, n, dtype=torch.float64, device=x.device)  # row i (query), column j (zeroed)
        for start in range(0, n, ZEROED_PER_PASS):
            zeroed = slice(start, min(start + ZEROED_PER_PASS, n))  # C tokens
            rows = slice(start if causal else 0, n)  # a causal layer's earlier tokens never read token j's values
            # (C, n', H) x (C, H, D) -> (C, n', D): Σ_h a_ij f_h(x_j) for each zeroed j, of the rows that read it
            moved = torch.bmm(a[:, rows, zeroed].permute(2, 1, 0), f[:, zeroed].transpose(0, 1))
            less = (out[None, rows] - moved).to(x.dtype)  # (C, n', D): attention outputs with token j's values zeroed
            y = output(x[:, rows], less, rows)  # (C, n', D)
            d[rows, zeroed] = 0.5 * (base[:, rows] - y).square().sum(-1).T  # (n', C): ½‖ŷ_i − ŷ′_ij‖² = 1 − cos
    distances = d.cpu().numpy()  # (n, n)
    sums = distances.sum(axis=1, keepdims=True)
    return read_only(np.divide(distances, sums, out=np.zeros_like(distances), where=sums > 0))


def _unit(y: torch.Tensor) -> torch.Tensor:
    """Each vector of y (..., D) divided by its length, in float64."""
    y = y.double()
    return y / y.norm(dim=-1, keepdim=True)
