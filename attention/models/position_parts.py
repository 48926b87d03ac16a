"""How positions enter a model: one part per kind, chosen once when the model is built (POSITION_PARTS, by the
config's position_embedding_type), never a branch in the shared forward.

    absolute      a learned table, one row per position, added to the embeddings
    sinusoidal    fixed sines and cosines added to the embeddings
    rotary        each layer's q and k turned by their positions' angles (rotary.py); windowed layers may turn on
                  a base of their own
    relative      a learned bias per head and bucketed distance, added to the scores as the mask is
    disentangled  content-to-position and position-to-content terms in the scores (disentangled.py)

A part answers what the embeddings add (`embed`), what each layer's q and k turn by (`layer_angles`), what the
scores' mask carries (`scores_mask`) and what the layers share (`attach`, called once the layers exist); and,
for the shape-flow diagram and the walk (attention/tracing/steps.py), what the steps it makes do in words
(`steps`, `words`) and what it adds to the scores' sentence (`scores_note`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from ..core.rotary import angles_for
from . import disentangled
from .parts import embedding_table
from .positions import position_ids, relative_buckets, sinusoids

if TYPE_CHECKING:
    from ..config import ModelConfig
    from .blocks import Transformer
    from .embeddings import Embeddings

Angles = tuple[torch.Tensor, torch.Tensor] | None  # (cos, sin), each (1, L, d), or None: q and k as they are


class Positions:
    """No positions of this kind in the embeddings, the angles or the mask: every answer leaves things as they are."""

    table = False  # the embeddings hold a learned table of positions (embeddings.position_embeddings)
    bias_in_mask = False  # the scores' mask carries a learned bias per head and distance
    steps: tuple[str, ...] = ()  # the steps of a layer's attention this part makes (recorded names)

    def attach(self, model: Transformer) -> None:
        pass

    def embed(self, embeddings: Embeddings, x: torch.Tensor, input_ids, attention_mask, start: int) -> torch.Tensor:
        return x  # (B, L, E or D)

    def layer_angles(self, model: Transformer, L: int, device: torch.device, start: int = 0) -> list[Angles]:
        return [None] * len(model.layers)

    def scores_mask(self, model: Transformer, mask, L: int, is_causal: bool, device: torch.device, start: int = 0):
        return mask

    def row_bias(self, model: Transformer, L: int, is_causal: bool, device: torch.device) -> RowBias | None:
        """Where the mask carries a bias (bias_in_mask), that bias a tile of rows at a time (a long pass's)."""
        return None

    def words(self, step: str, config: ModelConfig, layer: int) -> str:
        """What `step` (one of `steps`) does in layer `layer`, in words."""
        return ""

    def scores_note(self, config: ModelConfig, layer: int) -> str:
        """What the scores' sentence says of positions in layer `layer` ("" for nothing)."""
        return ""


class Table(Positions):
    """A learned row per position (BERT, GPT-2, OPT), added to the words; the rows a token reads count from
    position_offset and may skip padding (positions.position_ids)."""

    table = True

    def embed(self, embeddings: Embeddings, x: torch.Tensor, input_ids, attention_mask, start: int) -> torch.Tensor:
        ids = position_ids(embeddings.config, input_ids, attention_mask, start)  # (L,) or (B, L)
        return x + embeddings.position_embeddings(ids)  # (B, L, E or D)


class Sinusoid(Positions):
    """Fixed sines and cosines of each position (Marian), added to the words."""

    def embed(self, embeddings: Embeddings, x: torch.Tensor, input_ids, attention_mask, start: int) -> torch.Tensor:
        ids = position_ids(embeddings.config, input_ids, None, start)  # (L,)
        return x + sinusoids(ids, x.size(-1)).to(x.dtype)  # (B, L, E) + (L, E)


class Rotary(Positions):
    """q and k turned by their positions' angles in every layer (Llama and most decoders), computed once a pass;
    windowed layers turn on their own base where the family has one (local_rope_theta: Gemma3, ModernBERT), and
    the layers a family leaves without positions (nope_layers: SmolLM3's NoPE) are not turned."""

    def layer_angles(self, model: Transformer, L: int, device: torch.device, start: int = 0) -> list[Angles]:
        config, made = model.config, {}
        for i in range(len(model.layers)):  # the layers' own widths (Gemma 4's wider full layers) and bases
            key = (config.for_layer(i).head_size, _local(config, i))
            if key not in made:
                made[key] = angles_for(config.for_layer(i), L, device, key[1], start)  # (1, L, d) each
        angles = [made[config.for_layer(i).head_size, _local(config, i)] for i in range(len(model.layers))]
        return [None if i in config.positions.nope_layers else a for i, a in enumerate(angles)]

    steps = ("q_rot", "k_rot")

    def words(self, step: str, config: ModelConfig, layer: int) -> str:
        """RoPE's turn; with r < d (GPT-NeoX, Phi) only the first r of each head's d coordinates turn; the base
        where windowed and full layers turn on different ones (Gemma3, ModernBERT); a rescaling of the
        frequencies (linear, dynamic, llama3) where the layer turns on the scaled base."""
        config = config.for_layer(layer)  # the layer's own head width (Gemma 4's wider full layers)
        lane, d, r = step[0].upper(), config.head_size, config.rotary_dim or config.head_size
        turned = f"({lane}·cos + rotate_half({lane})·sin)"
        if r >= d:
            words = f"RoPE: coordinates i and i+d/2 turned by position·θ_i   {turned}"
        else:
            words = f"rotary on {r} of {d} dims: coordinates i and i+{r // 2} turned by position·θ_i {turned}, "
            words += f"{d - r} unturned"
        local, windowed = config.positions.local_rope_theta, config.window_of(layer) is not None
        if local is not None and windowed:
            return words + f"; base {local:g}: the windowed layers' own (local_rope_theta)"
        if local is not None:
            words += f"; base {config.positions.rope_theta:g}: the full layers'"
        return words + ("" if config.positions.rope_type == "default" else f"; {_scaling_words(config)}")

    def scores_note(self, config: ModelConfig, layer: int) -> str:
        if layer in config.positions.nope_layers:  # a rotary model's layer left without positions (SmolLM3)
            return "; no positions in this layer (NoPE): q and k meet by content alone"
        return ""


def _local(config: ModelConfig, layer: int) -> bool:
    """Whether layer `layer` turns on the windowed layers' own base (local_rope_theta)."""
    return config.window_of(layer) is not None and config.positions.local_rope_theta is not None


def _scaling_words(config: ModelConfig) -> str:
    """How rotary.inverse_frequencies rescales this config's frequencies, in words."""
    f, rope = f"{config.positions.rope_factor:g}", config.positions
    if rope.rope_type == "linear":
        return f"linear rope scaling: positions ÷ {f}"
    if rope.rope_type == "dynamic":
        return f"dynamic rope scaling (factor {f}): past {config.max_position_embeddings} positions the base grows"
    if rope.rope_type == "proportional":
        turned, half = int(rope.rope_proportion * config.rotary_dim // 2), config.rotary_dim // 2
        rest = half - turned
        return f"proportional: only pairs 0 to {turned - 1} of {half} turn (θ_i over all d), the other {rest} unturned"
    if rope.rope_type == "yarn":
        return f"yarn rope scaling (factor {f}): long wavelengths' θ_i ÷ {f}, short ones kept, cos and sin scaled"
    return f"llama3 rope scaling: long wavelengths' θ_i ÷ {f}, short ones kept, those between blended"


class Relative(Positions):
    """A learned bias per head for each bucket of (query, key) distance (T5), one table for every layer of the
    stack, added to the scores as an additive mask."""

    bias_in_mask = True

    def attach(self, model: Transformer) -> None:
        c = model.config
        model.relative_attention_bias = embedding_table(
            c.positions.relative_attention_num_buckets, c.num_attention_heads
        )

    def scores_mask(self, model: Transformer, mask, L: int, is_causal: bool, device: torch.device, start: int = 0):
        """Each head's bias for every (query, key) distance bucket, -inf where `mask` (boolean) hides a key, (B or
        1, H, L, S); `start`: the L queries are the last L of start + L positions (a decoder's new rows)."""
        c = model.config.positions
        buckets = relative_buckets(
            L, start + L, not is_causal, c.relative_attention_num_buckets, c.relative_attention_max_distance, device,
            start,
        )  # fmt: skip  # (L, S)
        table = model.relative_attention_bias
        assert isinstance(table, nn.Embedding)
        bias = table(buckets).permute(2, 0, 1)[None]  # (L, S, H) -> (1, H, L, S)
        return bias if mask is None else torch.where(mask, bias, float("-inf"))  # (B or 1, H, L, S)

    def row_bias(self, model: Transformer, L: int, is_causal: bool, device: torch.device) -> RowBias:
        c, table = model.config.positions, model.relative_attention_bias
        assert isinstance(table, nn.Embedding)
        distances = relative_buckets(  # query L - 1 against keys 0 ... 2L - 2: every distance -(L - 1) ... L - 1
            1, 2 * L - 1, not is_causal, c.relative_attention_num_buckets, c.relative_attention_max_distance, device,
            L - 1,
        )[0]  # fmt: skip  # (2L - 1,)
        return RowBias(table.weight, distances, L)


class RowBias:
    """T5's bias over (L, L) made a tile of rows at a time: the bias of a pair depends only on its distance, so
    one head's bias over every distance, (2L - 1,), holds each row (a window of it, `Tensor.unfold`'s view)."""

    def __init__(self, weight: torch.Tensor, distances: torch.Tensor, L: int):
        self.weight, self.distances, self.L = weight, distances, L  # (buckets, H), (2L - 1,) buckets

    def __call__(self, head: int, rows: slice, lo: int, hi: int) -> torch.Tensor:
        """Head `head`'s bias of queries `rows` against keys lo ... hi - 1, (P, W): query i, key j read the
        distance j - i, which is the head's vector at j - i + L - 1, window L - 1 - i's j-th entry."""
        L = self.L
        start, stop, _ = rows.indices(L)
        windows = self.weight[self.distances, head].unfold(0, L, 1)  # (L, L): window r is distances r-L+1 ...
        return windows[L - stop : L - start].flip(0)[:, lo:hi]  # (P, W)


class Disentangled(Positions):
    """DeBERTa's position terms: a shared table of relative positions that each layer's attention reads through
    its own q and k projections, added to the scores (a score-term part of each layer: disentangled.py)."""

    def attach(self, model: Transformer) -> None:
        disentangled.attach(model)


POSITION_PARTS: dict[str, Positions] = {
    "absolute": Table(),
    "sinusoidal": Sinusoid(),
    "rotary": Rotary(),
    "relative": Relative(),
    "disentangled": Disentangled(),
}
