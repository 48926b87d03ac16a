"""A batch's pronoun -> candidate attention, the one computation a suite's engines run (engines.py): the
pronoun pieces' rows of each layer's maps (only those rows computed, with our model), reduced as they come."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import numpy as np
import torch

from ...core.masks import pick_rows
from ...core.request import MapRequest
from ...runs.inputs import on_model_device
from .mentions import Located


def model_attentions(model, input_ids, attention_mask, token_type_ids, rows=None) -> Iterable[torch.Tensor]:
    """The per-layer attention probabilities of one forward pass of our model: (B, H, L, L) each, or
    with `rows` (B, P) only those query rows of each map, (B, H, P, L), the rest run fused. Only the
    maps are computed: the last layer stops at its map (maps_only)."""
    return model(
        input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        request=MapRequest(rows=rows, stop=True),
    ).attentions


def reduce_layer(picked: torch.Tensor, weights: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """One layer's pronoun rows to pronoun -> candidate attention: the mean of the pronoun pieces' rows, the
    sum of each candidate's columns. picked (B, H, P, S) the rows of the pronoun's pieces (repeated to P)
    with weights (B, P) 1/|pronoun| (0 on repeats); cols (B, S, K) ones on each candidate's pieces."""
    from_pronoun = (weights[:, None, None, :] @ picked).squeeze(2)  # (B,1,1,P) x (B,H,P,S) -> (B,H,S)
    return from_pronoun @ cols  # (B,H,S) x (B,S,K) -> (B,H,K)


def attend_batch(model, enc, chunk: list[int], located: dict[int, Located], forward, pad_id: int) -> np.ndarray:
    """(b, n_layers, H, K) pronoun -> candidate attention for a batch. With our model (`forward` is
    model_attentions) only the pronoun pieces' rows of each map are computed; another `forward` returns
    full maps, whose rows are picked one layer at a time."""
    S = max(len(enc["input_ids"][i]) for i in chunk)
    K = max(len(located[i].candidates) for i in chunk)
    P = max(len(located[i].pronoun) for i in chunk)
    ids = torch.full((len(chunk), S), pad_id, dtype=torch.long)
    mask = torch.zeros((len(chunk), S), dtype=torch.long)
    types = torch.zeros((len(chunk), S), dtype=torch.long) if "token_type_ids" in enc else None
    rows, weights = torch.zeros((len(chunk), P), dtype=torch.long), torch.zeros((len(chunk), P))
    cols = torch.zeros((len(chunk), S, K))
    for r, i in enumerate(chunk):
        n, pronoun = len(enc["input_ids"][i]), located[i].pronoun
        ids[r, :n] = torch.tensor(enc["input_ids"][i])
        mask[r, :n] = 1
        if types is not None:
            types[r, :n] = torch.tensor(enc["token_type_ids"][i])
        rows[r] = torch.tensor(pronoun + [pronoun[0]] * (P - len(pronoun)))
        weights[r, : len(pronoun)] = 1.0 / len(pronoun)
        for k, pieces in enumerate(located[i].candidates):
            cols[r, pieces, k] = 1.0
    moved = on_model_device(model, ids, mask, rows, weights, cols)  # none of them None, so none comes back None
    ids, mask, rows, weights, cols = cast(tuple[torch.Tensor, ...], moved)
    (types,) = on_model_device(model, types)  # None where the tokenizer gives no token types
    with torch.inference_mode():
        if forward is model_attentions:
            maps = list(model_attentions(model, ids, mask, types, rows=rows))  # (B, H, P, S) each
        else:
            maps = list(forward(model, ids, mask, types))  # (B, H, S, S) each
        reduced = []
        for layer in range(len(maps)):
            picked = maps[layer] if forward is model_attentions else pick_rows(maps[layer], rows)  # (B, H, P, S)
            reduced.append(reduce_layer(picked.float(), weights, cols))
            maps[layer] = None  # this layer's maps are no longer held
    return torch.stack(reduced, dim=1).cpu().numpy()  # (b, n_layers, H, K)
