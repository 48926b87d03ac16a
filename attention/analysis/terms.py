"""DeBERTa's scores term by term: content to content, content to position and position to content, read from a
traced layer (attention/tracing/trace.py); the layer records "c2p" and "p2c" beside the content-only "scores"
(attention/models/disentangled.py)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..models.blocks import Transformer
from ..tracing.trace import trace_layer


class Terms(NamedTuple):
    """One layer's scores, term by term, each (B, H, L, S) float32: total = c2c + c2p + p2c (before the mask);
    a term the model does not add is zeros. probs: the softmax of the masked total, as the layer used it."""

    c2c: torch.Tensor
    c2p: torch.Tensor
    p2c: torch.Tensor
    total: torch.Tensor
    probs: torch.Tensor


def trace_terms(trace) -> Terms:
    """A DeBERTa layer's terms from its recorded forward pass (attention/tracing/trace.py's Trace): the content-only
    "scores", "c2p" and "p2c" as recorded; ValueError for a trace of a model without them."""
    if "c2p" not in trace and "p2c" not in trace:
        raise ValueError("this model has no disentangled attention: only DeBERTa's scores have position terms")
    c2c = trace.tensor("scores").float()  # (B, H, L, S)
    c2p, p2c = (trace.tensor(n).float() if n in trace else torch.zeros_like(c2c) for n in ("c2p", "p2c"))
    return Terms(c2c, c2p, p2c, c2c + c2p + p2c, trace.tensor("probs").float())


def layer_terms(
    model: Transformer, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, layer: int = 0
) -> Terms:
    """Run `model` (a DeBERTa) once and keep layer `layer`'s content-to-content, content-to-position and
    position-to-content scores, their total and the attention map; ValueError for a model without them."""
    if model.config.positions.position_embedding_type != "disentangled":
        raise ValueError(f"a {model.config.model_type} model has no disentangled attention: DeBERTa's only")
    return trace_terms(trace_layer(model, input_ids, attention_mask, layer=layer))
