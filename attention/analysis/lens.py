"""The logit lens: what each layer would say next, were it the last.

Every layer's output goes through what follows the model's last layer (its final norm, OPT's project_out:
Transformer.finish) and the LM head the model writes with (writing/generate.lm_head, Gemma2's logit cap and T5's
scale included), then a softmax over the vocabulary; the `top` most probable ids and their probabilities are kept.
The softmax is never written out: the top logits are the top probabilities' (exp is increasing), and each one's
probability is exp(logit − logsumexp), the logsumexp taken from the top logit (the row's largest) in one pass over
the row. Every layer's states go through the head together, as many at a time as LOGITS_BYTES allows: one matrix
product per chunk, in the model's dtype (the head's cost, n_layers · L · D · V multiply-adds, is the lens's floor).
The last layer's are read from the model's own last hidden state, so they are exactly the model's next-token
distribution. A causal decoder is read on its input; an encoder-decoder's decoder on `decoder_input_ids`, reading
the encoder's output of `input_ids`. An encoder has no LM head to read: refused before any work.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import torch

from ..core.request import MapRequest
from ..errors import ModelLoadError
from ..models import EncoderDecoder, Transformer
from ..runs.inputs import on_model_device
from ..runs.run import read_only
from ..writing.generate import lm_head

# hidden states through the LM head at once: as many as keep their float32 logits within this (1,365 rows at V =
# 49,152); a product of more rows runs faster (27 GFLOP/s at 200 rows, 47 at 1,024, 56 at 2,048 on two busy cores)
LOGITS_BYTES = 256 * 2**20


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
    probabilities, (N, top) int64 and float32 on the CPU: softmax(head(hidden)).topk(top), without the softmax
    (the module's docstring), as many states at a time as keep their logits within LOGITS_BYTES."""
    ids, probs = [], []
    for chunk in hidden.split(max(1, LOGITS_BYTES // (4 * head.weight.size(0)))):
        logits = head(chunk)  # (C, D) -> (C, V) float32
        best = logits.topk(top, dim=-1)  # (C, top): the largest logits are the largest probabilities
        largest = best.values[:, :1]  # (C, 1)
        total = logits.sub_(largest).exp_().sum(dim=-1, keepdim=True)  # (C, 1): Σ exp(logit − largest), in place
        probs.append(best.values.sub(largest).sub_(total.log()).exp_().cpu())  # exp(logit − logsumexp)
        ids.append(best.indices.cpu())
    return torch.cat(ids), torch.cat(probs)
