"""Head ablation: run a sentence with and without some heads, and measure what changed.

A head mask (n_layers, H) says which heads stay (1) and which are ablated (0); "zero" ablation
silences a head, "uniform" makes it attend evenly to every token it may see (see masks.ablate_heads).
Changes are read from the attention maps, the hidden states, the sentence embedding, with an MLM
head the model's guesses for a [MASK] token, on a coreference example the pronoun → answer margin and, on a
coreference suite, the accuracy of the heads after the first ablated layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

import numpy as np
import torch
import torch.nn.functional as F

from ..core.request import MapRequest
from ..mlm import MaskedLMHead, check_top_k, mask_probabilities, top_tokens
from ..models import Transformer
from ..runs.inputs import on_model_device
from ..runs.run import read_only
from .coref import CorefExample, CorefResult, score_example, score_heads


class MaskPredictions(NamedTuple):
    position: int  # index in input_ids of the first [MASK] token
    before: list[tuple[str, float]]  # (token, probability), most probable first, all heads kept
    after: list[tuple[str, float]]  # the same with the heads ablated


class AblationResult(NamedTuple):
    base_attentions: np.ndarray  # (n_layers, H, L, L) float32, real tokens only (batch item 0)
    ablated_attentions: np.ndarray  # same
    attention_change: np.ndarray  # (n_layers, H): mean absolute difference of each head's map
    hidden_cosine: np.ndarray  # (n_layers + 1,): mean over tokens of cosine(base, ablated) per hidden state
    embedding_cosine: float  # cosine of the mean-pooled (attention-mask-weighted) last hidden states
    predictions: MaskPredictions | None  # when an MLM head is given and the input has a [MASK] token


def _real_maps(attentions: tuple[torch.Tensor, ...], real: torch.Tensor) -> np.ndarray:
    """Batch item 0 of each layer's (B, H, L, L) maps, real tokens only: (n_layers, H, n, n) float32."""
    maps = torch.stack([a[0] for a in attentions])  # (n_layers, H, L, L)
    return maps[:, :, real][:, :, :, real].float().cpu().numpy()  # (n_layers, H, n, n)


def _pooled(hidden: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Attention-mask-weighted mean of hidden (L, D) over tokens, weights (L,): (D,)."""
    return (hidden * weights[:, None]).sum(0) / weights.sum()  # (L, D) -> (D,)


def _check_inputs(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None, token_type_ids: torch.Tensor | None
) -> torch.Tensor:
    """Validate one sentence's inputs; returns the attention mask (1, L), all ones if None was given."""
    if input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise ValueError(f"ablate takes one sentence: input_ids must be (1, L), got {tuple(input_ids.shape)}")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    for name, tensor in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        if tensor is not None and tensor.shape != input_ids.shape:
            raise ValueError(f"{name} must have input_ids' shape {tuple(input_ids.shape)}, got {tuple(tensor.shape)}")
    if not bool(attention_mask.any()):
        raise ValueError("the attention mask has no real token")
    return attention_mask


def _mask_predictions(
    head: MaskedLMHead,
    tokenizer,
    input_ids: torch.Tensor,
    real: torch.Tensor,
    base: torch.Tensor,
    ablated: torch.Tensor,
    top_k: int,
) -> MaskPredictions | None:
    """Top-k guesses at the first real [MASK] token from base and ablated last hidden states (L, D)."""
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        return None
    found = ((input_ids[0] == mask_id) & real).nonzero()  # (n_masks, 1)
    if not len(found):
        return None
    position = int(found[0, 0])

    def named(hidden: torch.Tensor) -> list[tuple[str, float]]:
        guesses = top_tokens(mask_probabilities(head, hidden[position]), top_k)
        return [(tokenizer.convert_ids_to_tokens(i), p) for i, p in guesses]

    return MaskPredictions(position, named(base), named(ablated))


def ablate(
    model: Transformer,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    head_mask=None,
    ablation: str = "zero",
    mlm_head: MaskedLMHead | None = None,
    tokenizer=None,
    top_k: int = 5,
    progress: Callable[[float], None] | None = None,
) -> AblationResult:
    """Run one sentence (input_ids (1, L)) with all heads, then with `head_mask`'s heads ablated.

    head_mask (n_layers, H), bool or float: 1 keeps a head, 0 ablates it; None ablates nothing.
    ablation: "zero" or "uniform" (see Transformer.forward). With `mlm_head` (from load_mlm_head)
    and its `tokenizer`, the top_k guesses for the first [MASK] token are compared too.
    Arrays are read-only; padded positions are left out of every measure. The inputs are sent to the
    model's device; the maps come back as float32 numpy arrays whatever the model's dtype, and the
    cosines are taken in float64.
    `progress`, if given, is called with the fraction done after each forward pass and at the end:
    a caller with a time limit can stop the work there by raising from it.
    """
    attention_mask = _check_inputs(input_ids, attention_mask, token_type_ids)
    moved = on_model_device(model, input_ids, attention_mask)  # neither is None, so neither comes back None
    input_ids, attention_mask = cast(tuple[torch.Tensor, torch.Tensor], moved)
    (token_type_ids,) = on_model_device(model, token_type_ids)
    head_mask = model.check_head_mask(head_mask, ablation)  # validated before any forward pass
    if mlm_head is not None:
        if tokenizer is None:
            raise ValueError("an mlm_head needs its tokenizer, to find [MASK] and name the guessed tokens")
        check_top_k(top_k, mlm_head)
    real = attention_mask[0].bool()  # (L,)
    weights = attention_mask[0].double()  # (L,)

    def done(fraction: float) -> None:
        if progress is not None:
            progress(fraction)

    with torch.inference_mode():
        base = model(input_ids, attention_mask, token_type_ids)
        done(0.45)
        ablated = model(input_ids, attention_mask, token_type_ids, head_mask=head_mask, ablation=ablation)
        done(0.9)
        base_maps = _real_maps(base.attentions, real)  # (n_layers, H, n, n)
        ablated_maps = _real_maps(ablated.attentions, real)  # (n_layers, H, n, n)
        hidden_cosine = [  # cosine per real token in float64, then the mean over tokens
            float(F.cosine_similarity(b[0, real].double(), a[0, real].double(), dim=-1).mean())
            for b, a in zip(base.hidden_states, ablated.hidden_states)
        ]
        pooled_base = _pooled(base.last_hidden_state[0].double(), weights)  # (D,)
        pooled_ablated = _pooled(ablated.last_hidden_state[0].double(), weights)  # (D,)
        embedding_cosine = float(F.cosine_similarity(pooled_base, pooled_ablated, dim=0))
        predictions = None
        if mlm_head is not None:
            predictions = _mask_predictions(
                mlm_head, tokenizer, input_ids, real, base.last_hidden_state[0], ablated.last_hidden_state[0], top_k
            )
    done(1.0)

    return AblationResult(
        base_attentions=read_only(base_maps),
        ablated_attentions=read_only(ablated_maps),
        attention_change=read_only(np.abs(base_maps - ablated_maps).mean(axis=(2, 3))),  # (n_layers, H)
        hidden_cosine=read_only(np.array(hidden_cosine)),
        embedding_cosine=embedding_cosine,
        predictions=predictions,
    )


class MarginChange(NamedTuple):
    """The pronoun → answer margin of a coreference example (attention from the pronoun to the answer minus
    to the best other candidate; above 0: the head prefers the answer), before and after ablation."""

    best: tuple[int, int]  # (layer, head) with the largest margin before ablation
    best_before: float
    best_after: float  # the same head's margin after ablation
    mean_before: float  # over every head
    mean_after: float
    preferring_before: int  # heads whose margin is above 0
    preferring_after: int


def margin_change(result: AblationResult, example: CorefExample, tokens: list[str], word_ids, offsets) -> MarginChange:
    """What the ablation in `result` does to `example`'s margin, scored on its maps before and after
    (coref.score_example's rules; `tokens`, `word_ids` and `offsets` of the sentence ablate ran on, whose
    tokens are all real). Raises coref's ExampleError where the example's words are not in the sentence."""
    before = score_example(example, np.asarray(result.base_attentions), tokens, word_ids, offsets).margin
    after = score_example(example, np.asarray(result.ablated_attentions), tokens, word_ids, offsets).margin
    layer, head = (int(i) for i in np.unravel_index(int(np.argmax(before)), before.shape))
    return MarginChange(
        (layer, head),
        float(before[layer, head]),
        float(after[layer, head]),
        float(before.mean()),
        float(after.mean()),
        int((before > 0).sum()),
        int((after > 0).sum()),
    )


def ablated_forward(head_mask, ablation: str = "zero") -> Callable:
    """A `forward(model, input_ids, attention_mask, token_type_ids)` for coref.score_heads: the per-layer
    (B, H, L, L) maps of our model run with `head_mask`'s heads ablated (the last layer stops at its map)."""

    def forward(model, input_ids, attention_mask, token_type_ids):
        return model(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            head_mask=head_mask,
            ablation=ablation,
            request=MapRequest(stop=True),
        ).attentions

    return forward


def score_ablated(
    model: Transformer,
    tokenizer,
    examples: list[CorefExample],
    head_mask,
    ablation: str = "zero",
    progress: Callable[[int, int], None] | None = None,
) -> CorefResult:
    """coref.score_heads on `examples` with `head_mask`'s heads ablated (validated before any batch runs)."""
    head_mask = model.check_head_mask(head_mask, ablation)
    return score_heads(model, tokenizer, examples, progress=progress, forward=ablated_forward(head_mask, ablation))


class SuiteChange(NamedTuple):
    """A suite's accuracy of the heads in the layers after the first ablated one (the ablated heads left out),
    before and after ablation."""

    best: tuple[int, int]  # (layer, head) of those with the highest accuracy before ablation
    best_before: float
    best_after: float  # the same head's accuracy after ablation
    mean_before: float  # over those heads
    mean_after: float
    n_heads: int  # how many heads that is


def suite_change(before: np.ndarray, after: np.ndarray, ablated: list[tuple[int, int]]) -> SuiteChange | None:
    """Accuracies (n_layers, H) before and after ablating the `ablated` (layer, head) pairs, read over the
    heads in the layers after the first ablated one, those ablated left out; None when there are none (only
    the last layer ablated). The best head is the first in layer, then head order among equals."""
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if before.shape != after.shape or before.ndim != 2:
        raise ValueError(f"before and after must be (n_layers, H) of one shape, got {before.shape} and {after.shape}")
    if not ablated:
        raise ValueError("no ablated head: nothing comes after the first ablated layer")
    later = np.zeros(before.shape, dtype=bool)
    later[min(layer for layer, _ in ablated) + 1 :] = True
    for layer, head in ablated:
        later[layer, head] = False
    if not later.any():
        return None
    ranked = np.where(later, before, -np.inf)  # (n_layers, H): only the later heads can be best
    layer, head = (int(i) for i in np.unravel_index(int(np.argmax(ranked)), before.shape))
    return SuiteChange(
        (layer, head),
        float(before[layer, head]),
        float(after[layer, head]),
        float(before[later].mean()),
        float(after[later].mean()),
        int(later.sum()),
    )
