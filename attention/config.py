"""The shape of a BERT model, read from a checkpoint's config.json (transformers' field names)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

# activations the feed-forward block may use, by the names config.json gives them
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")
# field annotations (strings under `from __future__ import annotations`) -> accepted JSON types
_TYPES = {"int": int, "float": (int, float), "str": str}


class ConfigError(ValueError):
    """A config.json this package cannot run."""


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"
    model_type: str = "bert"

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, _TYPES[field.type]):
                raise ConfigError(f"{field.name} should be a {field.type}, not {value!r}")
            if field.type == "int" and field.name != "pad_token_id" and value < 1:
                raise ConfigError(f"{field.name} must be positive, not {value}")
        if self.model_type != "bert":
            raise ConfigError(f"this is a '{self.model_type}' model, not BERT: only model_type 'bert' is supported")
        if self.position_embedding_type != "absolute":
            raise ConfigError(f"position_embedding_type '{self.position_embedding_type}' is not supported: "
                              "only absolute position embeddings")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act '{self.hidden_act}' is not supported (one of {', '.join(ACTIVATIONS)})")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"hidden_size {self.hidden_size} is not divisible by "
                              f"num_attention_heads {self.num_attention_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values: dict) -> "BertConfig":
        """Keep the fields BERT uses; a missing model_type is an error, other extra keys are ignored."""
        if "model_type" not in values:
            raise ConfigError("config.json has no model_type: cannot tell whether it is a BERT model")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    @classmethod
    def from_json(cls, path: str | Path) -> "BertConfig":
        try:
            values = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConfigError(f"cannot read {path}: {err}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path} does not hold a JSON object")
        return cls.from_dict(values)
