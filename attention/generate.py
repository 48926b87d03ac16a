"""Text written by our own model: a causal decoder (GPT-2, Llama, Mistral, Qwen2, Qwen3, GPT-NeoX, OPT, OLMo2)
continues a prompt token by token, greedily or by sampling, as transformers' `generate` does.

The LM head is read from the checkpoint the model came from (its own `lm_head.weight`, GPT-NeoX's
`embed_out.weight`, or, when the checkpoint ties it and saves none, the word embeddings). Each new token
costs one position: the layers keep the keys and values of the positions before it (mha.KeyValueCache,
Transformer.decode). The attention maps of the whole written sequence come from one forward at the end.

At each step the next-token scores pass, in transformers' order, the checkpoint's generation config
(repetition penalty, no-repeat n-grams), then temperature, top-k and top-p; greedy search takes the most
probable token, sampling draws from the same probabilities. The checkpoint's end-of-sequence ids stop it.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path

import torch

from .checkpoint import read_checkpoint
from .config import read_json
from .errors import ModelLoadError
from .inputs import on_model_device, within_positions
from .mha import KeyValueCache
from .models import FAMILIES, Transformer


class LMHead:
    """Last hidden states (..., E) -> next-token logits (..., V) as float32: weight (V, E), bias (V,) or None."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        self.weight, self.bias = weight, bias

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = hidden @ self.weight.T  # (..., E) x (E, V) -> (..., V), in the model's dtype
        if self.bias is not None:
            logits = logits + self.bias
        return logits.float()


def load_lm_head(model: Transformer) -> LMHead:
    """The LM head of the checkpoint `model` was loaded from (by load_model), strictly: its weight (V, E) and
    bias (V,) if saved, nothing else under the head's name; a head left out must be tied to the word embeddings
    (tie_word_embeddings not false). A ModelLoadError names what is wrong."""
    report = getattr(model, "load_report", None)
    family = FAMILIES.get(model.config.model_type)
    if report is None or family is None or not family.tied or not model.config.causal:
        raise ModelLoadError("only a causal decoder loaded by load_model has an LM head to read")
    name = family.tied[0][1]  # "lm_head.weight", GPT-NeoX's "embed_out.weight"
    root = name.removesuffix("weight")
    checkpoint = read_checkpoint(Path(report.path))[0]
    extra = [n for n in checkpoint if n.startswith(root) and n not in (name, root + "bias")]
    if extra:
        raise ModelLoadError(f"the checkpoint's LM head has tensors this model does not use: {', '.join(extra)}")
    embeddings = model.embeddings.word_embeddings.weight  # (V, E)
    if name in checkpoint:
        weight = checkpoint[name].to(dtype=embeddings.dtype, device=embeddings.device)
    elif read_json(Path(report.path) / "config.json").get("tie_word_embeddings") is False:
        raise ModelLoadError(f"the checkpoint has no '{name}' and does not tie it to the word embeddings")
    else:
        weight = embeddings  # tied: the checkpoint saved the matrix once, as the word embeddings
    if weight.shape != embeddings.shape:
        raise ModelLoadError(f"'{name}' is {tuple(weight.shape)}, expected {tuple(embeddings.shape)}")
    bias = checkpoint.get(root + "bias")
    if bias is not None:
        if tuple(bias.shape) != (embeddings.size(0),):
            raise ModelLoadError(f"'{root}bias' is {tuple(bias.shape)}, expected {(embeddings.size(0),)}")
        bias = bias.to(dtype=embeddings.dtype, device=embeddings.device)
    return LMHead(weight, bias)


@dataclass(frozen=True)
class Settings:
    """What the checkpoint's generation_config.json (else its config.json) sets that this search follows."""

    eos_ids: tuple[int, ...] = ()
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0


def read_settings(folder: Path) -> Settings:
    """The checkpoint's generation settings; beam search (num_beams > 1) is refused."""
    path = folder / "generation_config.json"
    values = read_json(path) if path.is_file() else read_json(folder / "config.json")
    if (values.get("num_beams") or 1) > 1:
        raise ValueError(f"beam search (num_beams={values['num_beams']}) is not supported: only greedy and sampling")
    eos = values.get("eos_token_id")
    eos_ids = () if eos is None else (eos,) if isinstance(eos, int) else tuple(eos)
    return Settings(
        eos_ids, float(values.get("repetition_penalty") or 1.0), int(values.get("no_repeat_ngram_size") or 0)
    )


def banned_by_ngrams(ids: list[int], n: int) -> list[int]:
    """The tokens that would repeat an n-gram already in `ids` (transformers' no_repeat_ngram_size)."""
    if n <= 0 or len(ids) + 1 < n:
        return []
    prefix = ids[len(ids) - n + 1 :]
    return [ids[i + n - 1] for i in range(len(ids) - n + 1) if ids[i : i + n - 1] == prefix]


def process(
    logits: torch.Tensor,
    ids: torch.Tensor,
    settings: Settings,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> torch.Tensor:
    """Next-token logits (1, V) -> the scores (1, V) the token is chosen from, -inf for tokens ruled out."""
    scores = logits.clone()
    if settings.repetition_penalty != 1.0:  # the tokens already there: positive scores divided, negative multiplied
        seen = scores.gather(1, ids)  # (1, T)
        seen = torch.where(seen < 0, seen * settings.repetition_penalty, seen / settings.repetition_penalty)
        scores.scatter_(1, ids, seen)
    banned = banned_by_ngrams(ids[0].tolist(), settings.no_repeat_ngram_size)
    if banned:
        scores[0, banned] = float("-inf")
    scores = scores / temperature
    if top_k is not None:  # keep the k best (ties at the k-th kept)
        kth = scores.topk(min(int(top_k), scores.size(-1))).values[..., -1:]  # (1, 1)
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p is not None:  # keep the fewest best tokens whose probabilities reach top_p
        ascending, order = scores.sort(dim=-1)  # (1, V)
        drop = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p  # (1, V)
        drop[..., -1] = False  # the best token always stays
        scores = scores.masked_fill(drop.scatter(1, order, drop), float("-inf"))
    return scores


@dataclass(frozen=True)
class Generation:
    ids: torch.Tensor  # (1, T): the prompt's ids, then the new ones
    new_ids: torch.Tensor  # (1, n_new)
    tokens: list[str]  # the T tokens
    top_ids: torch.Tensor  # (n_new, top): at each step the most probable next tokens, best first
    top_probs: torch.Tensor  # (n_new, top): their probabilities, those the choice was made from
    attentions: tuple[torch.Tensor, ...]  # n_layers maps (1, H, T, T) of the whole sequence


def check_options(max_new_tokens, temperature, top_k, top_p, top) -> None:
    def whole(value) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1

    if not whole(max_new_tokens) or not whole(top) or (top_k is not None and not whole(top_k)):
        raise ValueError("max_new_tokens, top and top_k must be integers of at least 1")
    if not temperature > 0 or (top_p is not None and not 0 < top_p <= 1):
        raise ValueError(f"temperature must be above 0 and top_p in (0, 1], got {temperature!r} and {top_p!r}")


def generate(
    model: Transformer,
    tokenizer,
    text: str,
    max_new_tokens: int = 20,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    top: int = 5,
) -> Generation:
    """`text` continued by up to `max_new_tokens` tokens (fewer when an end-of-sequence token comes): greedy,
    or sampled (do_sample) with a torch generator seeded by `seed`. See the module's docstring."""
    check_options(max_new_tokens, temperature, top_k, top_p, top)
    positions = model.config.max_position_embeddings
    settings = read_settings(Path(model.load_report.path))
    head = load_lm_head(model)
    (prompt,) = within_positions(positions, text)
    (ids,) = on_model_device(model, tokenizer(prompt, return_tensors="pt")["input_ids"])  # (1, L)
    assert ids is not None
    if ids.size(1) + max_new_tokens > positions:
        raise ValueError(f"{ids.size(1)} prompt tokens and {max_new_tokens} new ones exceed {positions} positions")
    generator = torch.Generator(ids.device)
    if seed is not None:
        generator.manual_seed(seed)
    else:
        generator.seed()
    top = min(int(top), head.weight.size(0))
    cache = [KeyValueCache() for _ in model.layers]
    tops: list[tuple[torch.Tensor, torch.Tensor]] = []
    with torch.inference_mode():
        hidden = model.decode(ids, cache)  # (1, L, E): the prompt, every position once
        for _ in range(max_new_tokens):
            scores = process(head(hidden[:, -1]), ids, settings, temperature, top_k, top_p)  # (1, V)
            probs = scores.softmax(dim=-1)  # (1, V)
            token = torch.multinomial(probs, 1, generator=generator) if do_sample else scores.argmax(-1, keepdim=True)
            tops.append(probs[0].topk(top))
            ids = torch.cat((ids, token), dim=1)  # (1, T)
            if int(token) in settings.eos_ids or len(tops) == max_new_tokens:
                break
            hidden = model.decode(token, cache)  # (1, 1, E): one new position
        attentions = model(ids).attentions
    n_new = len(tops)
    return Generation(
        ids=ids,
        new_ids=ids[:, -n_new:],
        tokens=tokenizer.convert_ids_to_tokens(ids[0].tolist()),
        top_ids=torch.stack([i for _, i in tops]),
        top_probs=torch.stack([p for p, _ in tops]),
        attentions=tuple(a for a in attentions if a is not None),
    )
