"""The logit lens: what each layer would say next, were it the last.

Every layer's output goes through what follows the model's last layer (its final norm, OPT's project_out:
Transformer.finish) and the LM head the model writes with (writing/generate.lm_head, Gemma2's logit cap and T5's
scale included), then a softmax over the vocabulary; the `top` most probable ids and their probabilities are kept.
The softmax is never written out: the head reads the states a tile at a time, ROW_TILE states by VOCAB_TILE ids,
and each tile's logsumexp and top logits are taken while its logits are in the cache; a row's top logits are the
best of its tiles' (exp is increasing), each one's probability exp(logit − logsumexp), the logsumexp that of its
tiles'. The head's cost, n_layers · L · D · V multiply-adds, is the lens's floor; products in tiles run faster than
one product writing every logit out (bench/analysis.py times both). The last layer's are read from the model's
own last hidden state, so they are exactly the model's next-token distribution. A causal decoder is read on its
input; an encoder-decoder's decoder on `decoder_input_ids`, reading the encoder's output of `input_ids`. An
encoder has no LM head to read: refused before any work.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from ..core.request import MapRequest
from ..errors import ModelLoadError
from ..models import EncoderDecoder, Transformer
from ..runs.inputs import on_model_device
from ..runs.run import read_only
from ..writing.generate import lm_head

# the LM head's tiles: ROW_TILE states by VOCAB_TILE ids, 4 MiB of float32 logits, within a CPU's last-level cache.
# At 200 tokens of SmolLM2 (6,000 states, V = 49,152; two cores) the products alone took 1.98 s in these tiles,
# 2.31 s as one; top_tokens 2.07 s, against 2.90-3.27 s when it wrote 256 MiB of logits at a time
VOCAB_TILE = 1024
ROW_TILE = 1024


@dataclass(frozen=True)
class Lens:
    """`ids` (n_layers, L, top) int64: at each layer and position the most probable next tokens, best first;
    `probs` (n_layers, L, top) float32: their probabilities."""

    ids: np.ndarray
    probs: np.ndarray


def layer_outputs(
    model: Transformer | EncoderDecoder,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    decoder_input_ids: torch.Tensor | None = None,
) -> tuple[Transformer, tuple[torch.Tensor, ...]]:
    """The stack the lens reads and each of its layers' outputs (B, L, D), the last after the stack's finish."""
    if isinstance(model, EncoderDecoder):
        if decoder_input_ids is None:
            raise ValueError("an encoder-decoder's logit lens reads its decoder: give decoder_input_ids")
        out = model(input_ids, attention_mask, decoder_input_ids)
        return model.decoder, out.decoder_hidden_states[1:]
    if decoder_input_ids is not None:
        raise ValueError("decoder_input_ids are an encoder-decoder's: a causal decoder reads input_ids alone")
    return model, model(input_ids, attention_mask, request=MapRequest(layers=())).hidden_states[1:]


def logit_lens(
    model: Transformer | EncoderDecoder,
    input_ids: torch.Tensor,
    top: int = 5,
    attention_mask: torch.Tensor | None = None,
    decoder_input_ids: torch.Tensor | None = None,
) -> Lens:
    """The logit lens of one sequence (1, L) (see the module's docstring): Lens of (n_layers, L, top) arrays, L the
    decoder's length for an encoder-decoder. Padded positions (attention_mask 0) are read as the model leaves them.
    `top` is bounded by the vocabulary; a model with no LM head raises ModelLoadError before any forward pass."""
    if isinstance(model, Transformer) and not model.config.attention.causal:
        raise ModelLoadError(
            f"the logit lens reads an LM head, and this {model.config.model_type} is an encoder with none: "
            "choose a causal decoder or an encoder-decoder"
        )
    head = lm_head(model)  # ModelLoadError where the checkpoint has none
    vocab = head.weight.size(0)
    if isinstance(top, bool) or not isinstance(top, numbers.Integral) or not 1 <= top <= vocab:
        raise ValueError(f"top must be an integer from 1 to {vocab}, got {top!r}")
    if input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise ValueError(f"input_ids must be one sequence, (1, L); got {tuple(input_ids.shape)}")
    input_ids, attention_mask, decoder_input_ids = on_model_device(model, input_ids, attention_mask, decoder_input_ids)
    with torch.inference_mode():
        stack, states = layer_outputs(model, input_ids, attention_mask, decoder_input_ids)
        # (n_layers, L, D): the last already finished by the model itself, the others through the stack's finish
        finished = torch.cat([stack.finish(torch.cat(states[:-1])), states[-1]]) if len(states) > 1 else states[0]
        ids, probs = top_tokens(head, finished.flatten(0, 1), int(top))  # (n_layers · L, top) each
    shape = (len(states), finished.size(1), int(top))
    return Lens(read_only(ids.view(shape).numpy()), read_only(probs.view(shape).numpy()))


def top_tokens(head, hidden: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `top` most probable next tokens of each hidden state (N, D) through `head` (an LMHead) and their
    probabilities, (N, top) int64 and float32 on the CPU: softmax(head(hidden)).topk(top), read a tile at a time
    (the module's docstring). The vocabulary's tiles run outermost, so that each tile's slice of the head's weight
    is read from memory once; a row's best so far are kept, and a tile's own best are sought only in the rows
    whose largest logit there beats the last of them."""
    n_tiles = len(range(0, head.weight.size(0), VOCAB_TILE))
    sums = torch.empty(hidden.size(0), n_tiles, device=hidden.device)  # (N, tiles): each tile's logsumexp
    values = torch.full((hidden.size(0), top), -torch.inf, device=hidden.device)  # (N, top): the best logits so far
    ids = torch.zeros(hidden.size(0), top, dtype=torch.int64, device=hidden.device)  # (N, top): their ids
    for c, start, rows, logits in tiles(head, hidden):
        largest = logits.amax(dim=-1)  # (R,)
        # log Σ exp(logit) = largest − log(the largest's probability): softmax's exp is the faster
        sums[rows, c] = largest - torch.softmax(logits, dim=-1).amax(dim=-1).log_()
        better = (largest > values[rows, -1]).nonzero()[:, 0]  # the rows whose best this tile may change
        if len(better):
            keep(values[rows], ids[rows], better, logits[better].topk(min(top, logits.size(1)), dim=-1), start)
    return ids.cpu(), values.sub_(sums.logsumexp(-1, keepdim=True)).exp_().cpu()  # exp(logit − logsumexp)


def tiles(head, hidden: torch.Tensor) -> Iterator[tuple[int, int, slice, torch.Tensor]]:
    """The logits of `hidden` (N, D) through `head` (an LMHead), ROW_TILE states by VOCAB_TILE ids at a time, the
    vocabulary's tiles outermost: (the vocabulary tile's index, its first id, the rows, their logits (R, W) float32)
    for each tile."""
    for c, start in enumerate(range(0, head.weight.size(0), VOCAB_TILE)):
        part = head.part(slice(start, start + VOCAB_TILE))
        for first in range(0, hidden.size(0), ROW_TILE):
            rows = slice(first, first + ROW_TILE)
            yield c, start, rows, part(hidden[rows])


def keep(values: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor, best, start: int) -> None:
    """Rows `rows` of the best logits so far `values` and their `ids` (R, top) each, merged with a tile's best
    (torch.topk's values and indices, (len(rows), k)), the tile's first id `start`: in place."""
    merged = torch.cat([values[rows], best.values], dim=1)  # (r, top + k)
    chosen = merged.topk(values.size(1), dim=-1)  # (r, top): the largest logits are the largest probabilities
    values[rows] = chosen.values
    ids[rows] = torch.cat([ids[rows], best.indices.add_(start)], dim=1).gather(1, chosen.indices)
