"""What the next-token scores pass before a token is chosen, as transformers' `generate` takes them: the
checkpoint's generation config (generation_config.json, else config.json), then temperature, top-k and top-p.

The generation config is read once, when the model is loaded (`attach`, called by loading.load_model): each
writing reads the settings the model carries (`settings_of`), whatever the folder holds by then.

The config's processors run in transformers' order: repetition penalty, no-repeat n-grams, bad words
(Marian bans its padding token this way), minimum length (total and new tokens), forced first token
(mBART's language code) and forced last token (BART's and Marian's end of sequence at max length).
Beam search is not here: one sequence is written, greedily or by sampling (see generate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import ConfigError, ModelConfig, read_json


def _ids(value) -> tuple[int, ...]:
    return () if value is None else (value,) if isinstance(value, int) else tuple(value)


@dataclass(frozen=True)
class Settings:
    """What the checkpoint's generation config sets that this search follows."""

    eos_ids: tuple[int, ...] = ()
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    bad_words_ids: tuple[tuple[int, ...], ...] = ()
    min_length: int = 0
    min_new_tokens: int = 0
    forced_bos_token_id: int | None = None
    forced_eos_ids: tuple[int, ...] = ()
    decoder_start_token_id: int | None = None
    bos_token_id: int | None = None
    num_beams: int = 1  # what the checkpoint asks for; one beam is what runs (generate.py decides)

    @classmethod
    def of_config(cls, config: ModelConfig) -> Settings:
        """The settings of a model built from `config` alone, with no folder to read: its decoder start token."""
        return cls(decoder_start_token_id=config.encoder_decoder.decoder_start_token_id)


def attach(model, folder: Path | None = None, settings: Settings | None = None) -> Settings:
    """Give `model` its generation settings once, as `model.generation`: those of the checkpoint in `folder` (or
    `settings`, read already) for a model that writes (a causal decoder or an encoder-decoder), else its config's
    (Settings.of_config)."""
    config = model.config
    if not (config.attention.causal or config.encoder_decoder.is_encoder_decoder):
        settings = Settings.of_config(config)
    elif settings is None:
        settings = read_settings(folder) if folder is not None else Settings.of_config(config)
    model.generation = settings
    return settings


def settings_of(model) -> Settings:
    """The generation settings `model` carries (`attach`); a model built from its class alone, without them, has
    its config's."""
    settings = getattr(model, "generation", None)
    return settings if isinstance(settings, Settings) else Settings.of_config(model.config)


def read_settings(folder: Path) -> Settings:
    """The checkpoint's generation settings, from generation_config.json or, without one, config.json;
    ConfigError names the file when it cannot be read or sets a value of the wrong kind."""
    path = folder / "generation_config.json"
    if not path.is_file():
        path = folder / "config.json"
    return settings_from_values(read_json(path), str(path))


def settings_from_values(values: dict, where: str) -> Settings:
    """The generation settings config values give (a GGUF file's metadata read as a config: gguf.py);
    ConfigError names `where` they came from when one is of the wrong kind."""
    try:
        return _settings(values)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: a generation setting of the wrong kind ({err})") from None


def _settings(values: dict) -> Settings:
    eos_ids = _ids(values.get("eos_token_id"))
    bad = tuple(tuple(seq) for seq in values.get("bad_words_ids") or ())
    return Settings(
        eos_ids=eos_ids,
        repetition_penalty=float(values.get("repetition_penalty") or 1.0),
        no_repeat_ngram_size=int(values.get("no_repeat_ngram_size") or 0),
        bad_words_ids=tuple(seq for seq in bad if not (len(seq) == 1 and seq[0] in eos_ids)),  # as transformers
        min_length=int(values.get("min_length") or 0),
        min_new_tokens=int(values.get("min_new_tokens") or 0),
        forced_bos_token_id=values.get("forced_bos_token_id"),
        forced_eos_ids=_ids(values.get("forced_eos_token_id")),
        decoder_start_token_id=values.get("decoder_start_token_id"),
        bos_token_id=values.get("bos_token_id"),
        num_beams=int(values.get("num_beams") or 1),
    )


def banned_by_ngrams(ids: list[int], n: int) -> list[int]:
    """The tokens that would repeat an n-gram already in `ids` (transformers' no_repeat_ngram_size)."""
    if n <= 0 or len(ids) + 1 < n:
        return []
    prefix = ids[len(ids) - n + 1 :]
    return [ids[i + n - 1] for i in range(len(ids) - n + 1) if ids[i : i + n - 1] == prefix]


def banned_words(ids: list[int], bad_words: tuple[tuple[int, ...], ...]) -> list[int]:
    """The last token of each bad word whose earlier tokens end `ids` (a one-token word: always banned)."""
    return [seq[-1] for seq in bad_words if len(seq) == 1 or ids[len(ids) - len(seq) + 1 :] == list(seq[:-1])]


def force(scores: torch.Tensor, tokens: tuple[int, ...]) -> torch.Tensor:
    """Only `tokens` left possible: -inf everywhere else, 0 on them (transformers' forced tokens)."""
    forced = torch.full_like(scores, float("-inf"))
    forced[:, list(tokens)] = 0.0
    return forced


def apply_config(
    scores: torch.Tensor, ids: torch.Tensor, settings: Settings, start: int, end: int | None
) -> torch.Tensor:
    """The generation config's processors over scores (1, V), given the sequence so far ids (1, T) of which
    the first `start` were there before any was written, and the length `end` it may reach (None: unknown)."""
    T = ids.size(1)
    if settings.repetition_penalty != 1.0:  # the tokens already there: positive scores divided, negative multiplied
        seen = scores.gather(1, ids)  # (1, T)
        seen = torch.where(seen < 0, seen * settings.repetition_penalty, seen / settings.repetition_penalty)
        scores.scatter_(1, ids, seen)
    history = ids[0].tolist()
    banned = banned_by_ngrams(history, settings.no_repeat_ngram_size) + banned_words(history, settings.bad_words_ids)
    if banned:
        scores[0, banned] = float("-inf")
    if settings.eos_ids and (T < settings.min_length or T - start < settings.min_new_tokens):
        scores[0, list(settings.eos_ids)] = float("-inf")
    if settings.forced_bos_token_id is not None and T == 1:
        scores = force(scores, (settings.forced_bos_token_id,))
    if settings.forced_eos_ids and end is not None and T == end - 1:
        scores = force(scores, settings.forced_eos_ids)
    return scores


def process(
    logits: torch.Tensor,
    ids: torch.Tensor,
    settings: Settings,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    start: int | None = None,
    end: int | None = None,
) -> torch.Tensor:
    """Next-token logits (1, V) -> the scores (1, V) the token is chosen from, -inf for tokens ruled out.
    `start`: the length of ids before the first new token (default: all of them); `end`: the most it may reach."""
    T = ids.size(1)
    scores = apply_config(logits.clone(), ids, settings, T if start is None else start, end)
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
