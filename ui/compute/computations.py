"""The computations the views share, cached per model and input in the bounded stores (ui/compute/stores.py):
statistics and patterns, the head comparison, rollout and attention flow, ablation, the grouped-query
conversion, the masked-LM head, a coreference suite scored with heads ablated, and the head an example's pronoun
is sent from."""

from __future__ import annotations

import numpy as np
import torch

from attention import ModelLoadError
from attention.analysis.ablation import ablate, score_ablated
from attention.analysis.coref import (
    CorefExample,
    ExampleError,
    ExampleScore,
    score_example,
)
from attention.analysis.coref.heads import (
    DEFAULT_CRITERION,
    MIN_SEPARATION,
    best_head,
    column_means,
    head_values,
    margin_of,
    ranked,
    separates,
)
from attention.analysis.gqa import map_change, to_grouped
from attention.analysis.mixing import NormMaps, norm_maps, value_zeroing
from attention.analysis.rollout import as_attention_tuple, attention_flow, rollout
from attention.analysis.stats import (
    embed_heads,
    head_distances,
    head_stats,
    pattern_labels,
    punctuation_mask,
)
from attention.mlm import MaskedLMHead, load_mlm_head
from attention.runs.aggregate import pairwise_change
from attention.runs.bigrun import is_big
from attention.runs.pooling import pool_map
from attention.runs.run import run_encoded

from ..state.state import PRESET_COREF, PRESETS
from ..state.written import Text
from .limits import deadline_check
from .models import get_model
from .runs import encoded_input, get_run
from .stores import MB, kept, store
from .workers import flow_workers

CHANGE_MAX_CELLS = 256  # the head-against-head comparison of a GQA layer pools longer maps to this many cells
COMPARE_MAX_TOKENS = 128  # a longer sentence is left out of the head comparison (its cost grows with L²)


def sentence_patterns(source: str, run) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-head statistics of the run's sentence and a pattern label per head, kept in a bounded store:
    at 512 tokens they read every map (about 0.3 s), which a rerun need not do again."""
    enc = run.encoded
    key = (source, tuple(enc.input_ids[0].tolist()), tuple(enc.token_type_ids[0].tolist()))

    def compute():
        if is_big(run):  # a pass of its own, one layer's maps at a time, cached
            stats = run.stats
        else:
            stats = head_stats(run.attentions, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))
        pair = any(s == 1 for s in enc.sequence_ids)
        return stats, pattern_labels(stats, len(enc.tokens), pair=pair)

    return store("patterns", 32, 8 * MB).get_or_compute(key, compute, small=True)


def comparison_sentences(text: Text, text_b: str, n_tokens: int) -> list[tuple[Text, str]]:
    """The examples the app offers and the submitted sentence, unless it is longer than
    COMPARE_MAX_TOKENS: the set the heads are compared over."""
    pairs = [p for p in PRESETS.values() if p != (text, text_b)]
    return ([(text, text_b)] if n_tokens <= COMPARE_MAX_TOKENS else []) + pairs


def head_map_embedding(source: str, pairs: list[tuple[Text, str]], progress):
    def compute(deadline):
        progress_ = deadline.wrap(progress)
        maps = []
        for k, (text, text_b) in enumerate(pairs):
            maps.append(get_run(source, text, text_b).attentions)
            progress_(0.2 * (k + 1) / len(pairs), f"Ran {k + 1} of {len(pairs)} sentences")
        distances = head_distances(maps, progress=lambda done: progress_(0.2 + 0.8 * done, "Comparing heads…"))
        return distances, embed_heads(distances, heads_per_layer=maps[0].shape[1])

    return store("head-embeddings", 8, 20 * MB).get_or_compute_heavy((source, tuple(pairs)), "comparison", compute)


def through_layer(run, layer: int) -> tuple:
    """Layers 0..`layer` as the model's tuple of (1, H, T, T) tensors, for rollout and flow. A big run gives
    its head-averaged maps as one head each, (1, 1, T, T): both methods average the heads first, so the
    result is the same without every full map."""
    if is_big(run) and run.head_means is not None:
        return as_attention_tuple(run.head_means[: layer + 1, None])  # (layer + 1, 1, T, T)
    return as_attention_tuple(run.attentions[: layer + 1])


def rollout_at(source: str, run, text: Text, text_b: str, layer: int) -> np.ndarray:
    """Rollout through `layer` (T, T), cached: about 0.3 s at 512 tokens."""

    def compute():
        return rollout(through_layer(run, layer))[-1, 0].numpy()

    return store("rollouts", 16, 50 * MB).get_or_compute((source, text, text_b, layer), compute)


def mixing_of(source: str, run, text: Text, text_b: str) -> NormMaps:
    """Every layer's value-weighted maps of the run's sentence (attention/analysis/mixing.py), one forward pass,
    cached; sized by norm_maps itself before the work (the server's map bound)."""

    def compute() -> NormMaps:
        model, _ = get_model(source)
        return norm_maps(model, *sentence_inputs(model, run))

    return store("mixings", 8, 64 * MB).get_or_compute((source, text, text_b), compute)


def zeroing_of(source: str, run, text: Text, text_b: str, layer: int) -> np.ndarray:
    """Layer `layer`'s value zeroing (L, L) of the run's sentence, cached; the caller bounds the tokens first
    (mixing.VALUE_ZEROING_MAX_TOKENS)."""

    def compute() -> np.ndarray:
        model, _ = get_model(source)
        ids, mask = sentence_inputs(model, run)
        return value_zeroing(model, ids, layer, mask)

    return store("zeroings", 16, 16 * MB).get_or_compute((source, text, text_b, layer), compute)


def sentence_inputs(model, run) -> tuple[torch.Tensor, torch.Tensor]:
    """The run's input ids and attention mask (1, L), on the model's device."""
    device = model.embeddings.word_embeddings.weight.device
    return run.encoded.input_ids.to(device), run.encoded.attention_mask.to(device)


def flow_into(source: str, run, text: Text, text_b: str, layer: int, progress) -> np.ndarray:
    """Attention flow from the input tokens into the positions after `layer` (T, T)."""

    def compute(deadline):
        return attention_flow(
            through_layer(run, layer), progress=deadline.wrap(progress), solve_rows=flow_workers().solve_rows
        )

    return store("flows", 16, 50 * MB).get_or_compute_heavy((source, text, text_b, layer), "flow", compute)


@kept(max_entries=2)
def get_mlm_head(source: str) -> tuple[MaskedLMHead | None, str | None]:
    """The checkpoint's masked-LM head, or None and why not (no head, or one that does not load)."""
    model, _ = get_model(source)
    try:
        head = load_mlm_head(model)
    except ModelLoadError as err:
        return None, f"This checkpoint's masked-LM head does not load, so there are no [MASK] guesses: {err}"
    if head is None:
        return None, (
            "This checkpoint has no masked-language-model head, so there are no [MASK] predictions to "
            "compare. Load one that has (for example bert-base-uncased) to see them."
        )
    return head, None


@kept(max_entries=1)  # a whole model's copy: one at a time
def get_grouped_model(source: str, num_kv_heads: int, _progress=None):
    """The converted model; inside a heavy job its time limit is checked after every layer converted
    (`_progress`, or else the job's deadline). Stopped, nothing is cached."""
    model, _ = get_model(source)
    return to_grouped(model, num_kv_heads, progress=_progress or deadline_check())


def get_grouped_run(source: str, num_kv_heads: int, text: Text, text_b: str):
    def compute(deadline):
        _, enc = encoded_input(source, text, text_b)
        return run_encoded(get_grouped_model(source, num_kv_heads), enc)

    return store("grouped-runs", 16, 200 * MB).get_or_compute_heavy(
        (source, num_kv_heads, text, text_b), "gqa", compute
    )


def get_map_change(source: str, num_kv_heads: int, text: Text, text_b: str, run, grouped) -> np.ndarray:
    """Mean |Δ| of each head's map in `grouped` (get_grouped_run's) against `run`'s, (n_layers, H), kept: at
    512 tokens it reads both runs' every map, which a rerun need not do again."""

    def compute():
        return map_change(run.attentions, grouped.attentions)

    return store("gqa-changes", 32, MB).get_or_compute((source, num_kv_heads, text, text_b), compute, small=True)


def head_mask(n_layers: int, n_heads: int, heads: tuple[tuple[int, int], ...]) -> np.ndarray:
    """(n_layers, H) float32: 1 keeps a head, 0 ablates the `heads` named."""
    mask = np.ones((n_layers, n_heads), dtype=np.float32)
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask


def get_ablation(source: str, run, text: Text, text_b: str, heads: tuple[tuple[int, int], ...], mode: str):
    def compute(deadline):  # the time limit is checked after each of the two forward passes
        model, tokenizer = get_model(source)
        enc = run.encoded
        return ablate(
            model,
            enc.input_ids,
            enc.attention_mask,
            enc.token_type_ids,
            head_mask=head_mask(run.n_layers, run.n_heads, heads),
            ablation=mode,
            mlm_head=get_mlm_head(source)[0],
            tokenizer=tokenizer,
            progress=deadline.wrap(None),
        )

    return store("ablations", 16, 200 * MB).get_or_compute_heavy(
        (source, text, text_b, heads, mode), "ablation", compute
    )


def get_suite_ablation(source: str, suite, heads: tuple[tuple[int, int], ...], mode: str, progress=None):
    """A coreference suite (ui.coref.coref_data.Suite) scored with `heads` ablated, a heavy job of the "ablation" kind
    (its time limit checked after every batch), kept per model, suite, heads and mode."""

    def compute(deadline):
        model, tokenizer = get_model(source)
        mask = head_mask(model.config.num_hidden_layers, model.config.num_attention_heads, heads)
        return score_ablated(model, tokenizer, suite.examples, mask, mode, progress=deadline.wrap(progress))

    return store("suite-ablations", 8, 150 * MB).get_or_compute_heavy(
        (source, suite.cache_key, heads, mode), "ablation", compute
    )


def get_head_change(source: str, run, text: Text, text_b: str, layer: int) -> np.ndarray:
    """Mean |Δ| between every two heads' maps of one layer (H, H), cached: maps longer than
    CHANGE_MAX_CELLS tokens are pooled to that many cells a side first."""

    def compute():
        return pairwise_change(pool_map(run.attentions[layer], CHANGE_MAX_CELLS))

    return store("head-changes", 32, 8 * MB).get_or_compute((source, text, text_b, layer), compute)


def coref_values(run, example: CorefExample, criterion: str) -> tuple[ExampleScore, np.ndarray]:
    """An example on the run's own sentence: its score and every head's value under ``criterion``
    (coref.heads.CRITERIA). ExampleError where the tokenizer's words do not hold its mentions."""
    enc = run.encoded
    word_ids = [w if s == 0 else None for w, s in zip(enc.word_ids, enc.sequence_ids)]  # the first segment's
    score = score_example(example, run.attentions, enc.tokens, word_ids, enc.offsets)
    assert example.answer_index is not None, "an example with its answer"
    return score, head_values(score.attention, run.attentions, score.located, example.answer_index, criterion)


def strongest_head(run, text: Text, criterion: str | None = None) -> tuple[int, int, str] | None:
    """For an example the app offers with a known antecedent: the best head by ``criterion`` (the
    Coreference view's ranking) among those whose pronoun gives the answer more than the other candidates
    (coref.heads.best_head), and a sentence saying so with the numbers it was scored on; where no head
    qualifies, the default head (layer 0, head 0) and a sentence saying no head separates the candidates.
    None for other sentences."""
    if text not in PRESET_COREF:
        return None
    criterion = criterion or DEFAULT_CRITERION
    pronoun, candidates, answer = PRESET_COREF[text]
    example = CorefExample(text, pronoun, tuple(candidates), answer)
    try:
        score, values = coref_values(run, example, criterion)
    except ExampleError:  # a tokenizer that splits the words otherwise
        return None
    a = example.answer_index
    assert a is not None  # every preset names its answer
    found = best_head(values, margin_of(score.attention, a))
    if found is None:
        top = float(values[ranked(values, 1)[0]])
        reason = (
            f"the best {criterion} of {values.size} heads is {top:+.2f}, not above {MIN_SEPARATION}"
            if not separates(top)
            else f"no head with a {criterion} above {MIN_SEPARATION} has “{pronoun}” give “{answer}” more than "
            f"the other candidate (the best {criterion}, {top:+.2f}, comes from heads that do not)"
        )
        return (
            0,
            0,
            f"No head separates “{answer}” from the other candidate for “{pronoun}”: {reason}. Opened layer 0, head 0.",
        )
    layer, head = found
    return layer, head, f"Opened layer {layer}, head {head}, " + _scored_on(run, score, criterion, layer, head, values)


def _scored_on(run, score: ExampleScore, criterion: str, layer: int, head: int, values: np.ndarray) -> str:
    """What the head was crowned for: its value and the numbers it was computed from, the answer's and the
    other candidate's (the one the margin was taken against), each with the average token's under specificity."""
    example, a = score.example, score.example.answer_index
    pronoun, to = example.pronoun, score.attention[layer, head]  # (n_candidates,)
    means = column_means(run.attentions, score.located)[layer, head]  # (n_candidates,)
    against = to - means if criterion == "specificity" else to
    other = max((i for i in range(len(to)) if i != a), key=lambda i: against[i])
    if criterion == "specificity":
        numbers = (
            f"“{pronoun}” → “{example.answer}” {to[a]:.2f} against {means[a]:.2f} from the average token, "
            f"→ “{example.candidates[other]}” {to[other]:.2f} against {means[other]:.2f}"
        )
    else:
        numbers = f"“{pronoun}” → “{example.answer}” {to[a]:.2f}, → “{example.candidates[other]}” {to[other]:.2f}"
    # two lines at most beside the sidebar at 1280 px, so that the head map under it stays on a laptop's first screen
    among = f" where “{pronoun}” favours “{example.answer}”" if criterion != "margin" else ""
    return f"the best of {values.size} heads by {criterion}{among} ({values[layer, head]:+.2f}: {numbers})."
