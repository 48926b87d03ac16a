"""The shape of a model, and what its family does differently, as one frozen dataclass in groups.

ModelConfig holds the sizes, in transformers' BERT field names (hidden_size, num_hidden_layers, ...), the names the
app reads, and six groups of what a family does differently from BERT: positions, attention, norms, feed_forward,
embeddings and encoder_decoder (`config.norms.pre_norm`, `config.positions.rope_theta`). Each family's file
(attention/models/) fills one from its own config.json names, passed flat (`ModelConfig(hidden_size=768,
pre_norm=True)`): each name goes to its group. BertConfig is ModelConfig restricted to BERT checkpoints.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from .config_groups import (
    GROUP_OF,
    GROUPS,
    AttentionSettings,
    EmbeddingSettings,
    EncoderDecoderSettings,
    FeedForwardSettings,
    NormSettings,
    PositionSettings,
)

# activations the feed-forward block may use, by the names config.json gives them
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")
# rms_norm_offset: times (1 + weight) (Gemma); rms_norm_float: times weight, all in float32 (Gemma 4)
NORMS = ("layer_norm", "rms_norm", "rms_norm_offset", "rms_norm_float")
# a learned table of positions, q and k rotated by position (RoPE), a fixed table of sines and cosines
# (Marian), a learned bias per head on the scores by bucketed relative distance (T5), or DeBERTa's
# content-to-position and position-to-content terms from a shared table of relative positions
POSITIONS = ("absolute", "rotary", "sinusoidal", "relative", "disentangled")
QK_NORMS = ("head", "projection")  # a norm on each head's q and k, or on all heads' q and k at once
ROPE_TYPES = (
    "default",
    "linear",
    "dynamic",
    "llama3",
    "yarn",
    "proportional",
)  # rope_scaling types followed as transformers computes them
# field annotations (strings under `from __future__ import annotations`) -> accepted JSON types
_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "float": (int, float),
    "str": str,
    "bool": bool,
    "int | None": (int, type(None)),
    "bool | None": (bool, type(None)),
    "str | None": (str, type(None)),
    "float | None": (int, float, type(None)),
    "tuple[int, ...]": tuple,
}
_ZERO_ALLOWED = (
    "pad_token_id",
    "type_vocab_size",
    "position_offset",
    "first_sliding_layer",
    "decoder_start_token_id",
    "sliding_window_pattern",
    "first_full_layer",
    "position_buckets",
    "num_local_experts",
    "num_experts_per_tok",
    "per_layer_input_size",
)
# the sizes as BERT's config.json names them (RoBERTa and ELECTRA use the same names)
BERT_NAMES = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "pad_token_id",
    "position_embedding_type",
)


class ConfigError(ValueError):
    """A config.json this package cannot run."""


@dataclass(frozen=True, init=False)
class ModelConfig:
    """A model's shape: its sizes (transformers' BERT names, the names the app reads), then what its family does,
    in six groups. Built from flat names, as config.json gives them (`ModelConfig(hidden_size=..., pre_norm=True)`,
    each name routed to its group), or from the groups themselves; `replace` takes flat names too."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512  # how many positions a token can take: the longest input
    type_vocab_size: int = 2  # 0: the family has no token types (segments)
    pad_token_id: int | None = 0
    num_key_value_heads: int | None = None  # grouped-query attention; None: one per query head
    head_dim: int | None = None  # width of each head; None: hidden_size // num_attention_heads
    model_type: str = "bert"
    # ---- what the family does differently, in six groups ----
    positions: PositionSettings = PositionSettings()
    attention: AttentionSettings = AttentionSettings()
    norms: NormSettings = NormSettings()
    feed_forward: FeedForwardSettings = FeedForwardSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()
    encoder_decoder: EncoderDecoderSettings = EncoderDecoderSettings()

    def __init__(self, **values):
        groups: dict[str, dict] = {g: {} for g in GROUPS}
        for name, value in values.items():
            if name in GROUP_OF:
                groups[GROUP_OF[name]][name] = value
            elif name in GROUPS or name in SIZE_NAMES:
                object.__setattr__(self, name, value)
            else:
                raise TypeError(f"ModelConfig has no setting {name!r}")
        for name in SIZE_NAMES:
            if name not in values:
                object.__setattr__(self, name, getattr(type(self), name))
        for group, cls in GROUPS.items():
            given = values.get(group, cls())
            object.__setattr__(self, group, dataclasses.replace(given, **groups[group]) if groups[group] else given)
        self.__post_init__()

    def flat(self) -> dict:
        """Every setting by its flat name: the sizes and each group's."""
        out = {name: getattr(self, name) for name in SIZE_NAMES}
        for group in GROUPS:
            out.update(dataclasses.asdict(getattr(self, group)))
        return out

    def replace(self, **values) -> ModelConfig:
        """This config with some settings changed, by their flat names."""
        return type(self)(**{**self.flat(), **values})

    def __post_init__(self):
        for holder in (self, *(getattr(self, group) for group in GROUPS)):
            for field in dataclasses.fields(holder):
                if field.name in GROUPS:
                    continue
                value, kind = getattr(holder, field.name), str(field.type)  # the annotation's text
                if (isinstance(value, bool) and not kind.startswith("bool")) or not isinstance(value, _TYPES[kind]):
                    raise ConfigError(f"{field.name} should be a {kind}, not {value!r}")
                if kind.startswith("int") and isinstance(value, int) and value < (field.name not in _ZERO_ALLOWED):
                    raise ConfigError(f"{field.name} must be positive, not {value}")
        self.check()

    def check(self) -> None:
        """What the settings must agree on, each a ConfigError naming it."""
        c = SimpleNamespace(**self.flat())  # every setting by its flat name
        if c.position_embedding_type not in POSITIONS:
            raise ConfigError(
                f"position_embedding_type '{c.position_embedding_type}' is not supported: one of {', '.join(POSITIONS)}"
            )
        if c.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act '{c.hidden_act}' is not supported (one of {', '.join(ACTIVATIONS)})")
        if c.norm not in NORMS:
            raise ConfigError(f"norm '{c.norm}' is not supported (one of {', '.join(NORMS)})")
        if c.rope_type not in ROPE_TYPES:
            raise ConfigError(f"rope_scaling type '{c.rope_type}' is not supported (one of {', '.join(ROPE_TYPES)})")
        if c.head_dim is None and c.hidden_size % c.num_attention_heads:
            raise ConfigError(
                f"hidden_size {c.hidden_size} is not divisible by num_attention_heads {c.num_attention_heads}"
            )
        if c.num_attention_heads % self.kv_heads:
            raise ConfigError(
                f"num_attention_heads {c.num_attention_heads} is not divisible by num_key_value_heads {self.kv_heads}"
            )
        if c.qk_norm not in (None, *QK_NORMS):
            raise ConfigError(f"qk_norm '{c.qk_norm}' is not supported (one of {', '.join(QK_NORMS)})")
        rotary = c.position_embedding_type == "rotary"
        if not 0 < c.rotary_fraction <= 1 or rotary and (self.rotary_dim < 2 or self.rotary_dim % 2):
            raise ConfigError(
                f"a rotary fraction of {c.rotary_fraction} of {self.head_size} coordinates "
                "is not an even number of them"
            )
        if c.qkv_per_head and (not c.fused_qkv or self.kv_heads != c.num_attention_heads):
            raise ConfigError("a per-head Q·K·V layout needs a fused projection and one K/V head per query head")
        decoder_heads = c.decoder_attention_heads or c.num_attention_heads
        if c.is_encoder_decoder and c.head_dim is None and c.hidden_size % decoder_heads:
            raise ConfigError(
                f"hidden_size {c.hidden_size} is not divisible by decoder_attention_heads {c.decoder_attention_heads}"
            )
        if c.attn_logit_softcapping is not None and c.attn_logit_softcapping <= 0:
            raise ConfigError(f"attn_logit_softcapping must be positive, not {c.attn_logit_softcapping}")
        if c.query_pre_attn_scalar is not None and c.query_pre_attn_scalar <= 0:
            raise ConfigError(f"query_pre_attn_scalar must be positive, not {c.query_pre_attn_scalar}")
        if c.position_embedding_type == "disentangled" and set(c.pos_att_type.split("|")) - {"c2p", "p2c", ""}:
            raise ConfigError(f"pos_att_type '{c.pos_att_type}' is not supported: c2p and p2c only")
        if c.parallel_residual and not c.pre_norm:
            raise ConfigError("a parallel residual reads the normed input: it needs pre_norm")
        if c.one_block_norm and not c.parallel_residual:
            raise ConfigError("one norm for attention and feed-forward needs a parallel residual")
        if any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < c.num_hidden_layers for i in c.nope_layers
        ):
            raise ConfigError(f"nope_layers should name layers 0 to {c.num_hidden_layers - 1}, not {c.nope_layers}")
        if c.positions_skip_padding and c.pad_token_id is None:
            raise ConfigError("positions that skip padding need a pad_token_id")
        if not 0 < c.rope_proportion <= 1:
            raise ConfigError(f"a proportional rotary share should be in (0, 1], not {c.rope_proportion}")
        if c.full_head_dim is not None and c.full_head_dim % 2:
            raise ConfigError(f"full_head_dim {c.full_head_dim} is odd: rotary positions turn pairs of coordinates")
        if c.num_local_experts and not 0 < c.num_experts_per_tok <= c.num_local_experts:
            raise ConfigError(
                f"num_experts_per_tok should be 1 to {c.num_local_experts} (num_local_experts), "
                f"not {c.num_experts_per_tok}"
            )

    def encoder_config(self) -> ModelConfig:
        """An encoder-decoder's encoder stack: this config's sizes, not causal."""
        return self.replace(is_encoder_decoder=False, causal=False, cross_attention=False)

    def decoder_config(self) -> ModelConfig:
        """An encoder-decoder's decoder stack: its own sizes, causal, attending to the encoder's output."""
        d = self.encoder_decoder
        return self.replace(
            is_encoder_decoder=False,
            causal=True,
            cross_attention=True,
            num_hidden_layers=d.decoder_layers or self.num_hidden_layers,
            num_attention_heads=d.decoder_attention_heads or self.num_attention_heads,
            intermediate_size=d.decoder_ffn_dim or self.intermediate_size,
        )

    @property
    def head_size(self) -> int:
        """The width d of each head: head_dim if the config gives one, else hidden_size / heads."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def rotary_dim(self) -> int:
        """How many of each head's d coordinates rotary positions turn: the first ones; the rest pass."""
        return int(self.head_size * self.positions.rotary_fraction)

    @property
    def kv_head_of(self) -> tuple[int, ...]:
        """For each query head, the key/value head it reads: heads h·G/H share one (consecutive groups)."""
        group = self.num_attention_heads // self.kv_heads
        return tuple(h // group for h in range(self.num_attention_heads))

    def window_of(self, layer: int) -> int | None:
        """How many latest keys layer `layer` sees (itself included), None for all of them."""
        a = self.attention
        if a.sliding_window_pattern:
            first = a.sliding_window_pattern - 1 if a.first_full_layer is None else a.first_full_layer
            return None if (layer - first) % a.sliding_window_pattern == 0 else a.sliding_window
        return a.sliding_window if layer >= a.first_sliding_layer else None

    def for_layer(self, layer: int) -> ModelConfig:
        """Layer `layer`'s own config: this one, except that a full layer's heads are full_head_dim wide where the
        family sets one (Gemma 4); the layers are built from it (blocks.Transformer) and turn by its angles."""
        if self.attention.full_head_dim is None or self.window_of(layer) is not None:
            return self
        return _full_layer_config(self)

    @property
    def kv_heads(self) -> int:
        return self.num_attention_heads if self.num_key_value_heads is None else self.num_key_value_heads

    @property
    def embedding_width(self) -> int:
        return self.embeddings.embedding_size or self.hidden_size


@functools.lru_cache(maxsize=16)
def _full_layer_config(config: ModelConfig) -> ModelConfig:
    """A config's full layers' (ModelConfig.for_layer): its heads full_head_dim wide, made once per config."""
    return config.replace(head_dim=config.attention.full_head_dim, full_head_dim=None)


# the sizes: ModelConfig's own fields, each group's are routed by GROUP_OF
SIZE_NAMES = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.name not in GROUPS)


def read_json(path: str | Path) -> dict:
    """A config.json as a dict; ConfigError if it cannot be read or is not a JSON object."""
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"cannot read {path}: {err}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path} does not hold a JSON object")
    return values


@dataclass(frozen=True, init=False)
class BertConfig(ModelConfig):
    """A BERT checkpoint's config: its config.json names are ModelConfig's own."""

    def __post_init__(self):
        super().__post_init__()
        if self.model_type != "bert":
            raise ConfigError(f"this is a '{self.model_type}' model, not BERT: only model_type 'bert' is supported")

    @classmethod
    def from_dict(cls, values: dict) -> BertConfig:
        """Keep the fields BERT uses; a missing model_type is an error, other extra keys are ignored."""
        if "model_type" not in values:
            raise ConfigError("config.json has no model_type: cannot tell whether it is a BERT model")
        return cls(**{k: values[k] for k in BERT_NAMES + ("model_type",) if k in values})

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        return cls.from_dict(read_json(path))
