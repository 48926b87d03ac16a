"""What a family declares: how to read its config.json, and its tensor names.

A family's file fills one `Family`: a function from its config.json to a ModelConfig, the map
from its checkpoint's tensor names to ours, and the names of what sits beside the model in task
checkpoints (heads, buffers). convert.convert_checkpoint applies it; nothing else is per family.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..config import ConfigError, ModelConfig

Rules = tuple[tuple[str, str], ...]  # (checkpoint-name pattern, our name with \1 ... groups)
IN_A_LAYER = r"layers.\1."  # how a rule's target begins when its pattern's group 1 is the layer's index


@dataclass(frozen=True)
class MaskedLMNames:
    """Where a masked-LM head's parts sit in a task checkpoint, relative to `root`.

    The head is dense (D -> E), activation, norm, then a decoder to the vocabulary whose weight is
    the word embedding matrix (tied) plus a bias; E is the embedding width.
    """

    root: str  # every tensor whose name starts with it belongs to the head
    dense: str
    norm: str
    decoder: str  # its weight, if saved at all, equals the word embeddings; its bias repeats `bias`
    bias: str
    activation: str | None = None  # None: the config's hidden_act


@dataclass(frozen=True)
class Family:
    model_type: str
    title: str  # as people write it: "BERT", "GPT-2"
    read_config: Callable[[dict], ModelConfig]  # config.json values -> ModelConfig
    prefix: str  # where the base model sits in task checkpoints ("bert.")
    rules: Rules  # the base model's tensor names (after the prefix) -> ours
    heads: tuple[str, ...] = ()  # beginnings of task-head names: read, then listed as ignored
    skipped: tuple[str, ...] = ()  # patterns of saved buffers that are not weights (listed as ignored)
    transposed: tuple[str, ...] = ()  # patterns of weights stored (in, out), as GPT-2's Conv1D
    tied: tuple[tuple[str, str], ...] = ()  # (our name, head tensor holding the same weights) if ours is left out
    shared: tuple[tuple[str, str], ...] = ()  # (our name, our other name): one tensor used in both places
    # (an encoder-decoder's word embeddings, read by its encoder and its decoder)
    masked_lm: MaskedLMNames | None = None

    def rename(self, key: str) -> str | None:
        """Our name for a base-model tensor name (prefix removed), or None if it is not one."""
        for pattern, target in self.rules:
            if re.fullmatch(pattern, key):
                return re.sub(pattern, target, key)
        return None

    def name_in_layer(self, name: str) -> str:
        """A checkpoint tensor's name as its layer knows it, without a task model's prefix and, for a tensor
        inside a layer, without the layer's own path (the text up to the layer index its rule matches):
        BERT's "bert.encoder.layer.3.attention.self.query.weight" is "attention.self.query.weight", GPT-2's
        "h.3.attn.c_attn.weight" is "attn.c_attn.weight". A name outside the layers keeps the rest."""
        key = name.removeprefix(self.prefix)
        for pattern, target in self.rules:
            found = re.fullmatch(pattern, key)
            if found:
                return key[found.end(1) + 1 :] if target.startswith(IN_A_LAYER) else key
        return key

    def is_transposed(self, key: str) -> bool:
        return any(re.fullmatch(pattern, key) for pattern in self.transposed)

    def is_ignored(self, key: str) -> bool:
        return key.startswith(self.heads) or any(re.fullmatch(pattern, key) for pattern in self.skipped)


def config_values(values: dict, names: dict[str, str], defaults: dict) -> dict:
    """ModelConfig fields from config.json `values`: names maps our field -> the family's key;
    a key missing from config.json takes the family's default (transformers' own)."""
    return {
        ours: values.get(theirs, defaults.get(ours))
        for ours, theirs in names.items()
        if theirs in values or ours in defaults
    }


def integer(fields: dict, name: str) -> int:
    """fields[name], which a family computes with before ModelConfig checks it: ConfigError unless an int."""
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} should be an int, not {value!r}")
    return value
