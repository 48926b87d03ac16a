"""The one model every family is built as: embeddings, a stack of blocks, an optional final norm.

Module names follow BERT's (embeddings.word_embeddings, attention, intermediate, output, ...),
so the families' tensor-name maps stay short. What a family does differently is read from its
ModelConfig (attention/config.py), never from a copy of this code: token types or none, a
position offset, an embedding projection, norms after (BERT) or before (GPT-2) each sub-block,
a final norm, causal or not, a fused Q·K·V projection, bias or none, LayerNorm or RMSNorm, a
plain or gated feed-forward block, a table of positions or rotary ones (rotary.py), a sliding window,
computed positions (positions.py: Marian's sinusoids, T5's relative bias), and cross-attention to an
encoder's output (the decoder stack of an encoder-decoder, seq2seq.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from ..config import ModelConfig
from ..masks import build_mask, head_mask_tensor, query_rows
from ..mha import KeyValueCache, MultiHeadAttention, Recorder, no_record
from ..rotary import angles_for
from . import disentangled
from .parts import ACTIVATIONS, embedding_table, make_norm
from .positions import band, position_ids, relative_buckets, sinusoids

if TYPE_CHECKING:
    from ..loading import LoadReport


class ModelOutput(NamedTuple):
    last_hidden_state: torch.Tensor | None  # (B, L, D); None when the forward stopped at a map (maps_only)
    hidden_states: tuple[torch.Tensor, ...]  # n_layers + 1 items: embeddings, then each layer
    attentions: tuple[torch.Tensor | None, ...]  # n_layers items, each (B, H, L, L) probabilities (float32 for
    # half weights; (B, H, P, L) when only some query rows are kept); None: not kept


class Embeddings(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        E = config.embedding_width
        self.word_embeddings = embedding_table(config.vocab_size, E, padding_idx=config.pad_token_id)
        if config.position_embedding_type == "absolute":  # rotary positions turn q and k instead (mha.py)
            rows, late = config.max_position_embeddings + config.position_offset, config.positions_after_projection
            self.position_embeddings = embedding_table(rows, config.hidden_size if late else E)
        if config.type_vocab_size:
            self.token_type_embeddings = embedding_table(config.type_vocab_size, E)
        if config.embedding_norm:
            self.LayerNorm = make_norm(config, E)
        if E != config.hidden_size:
            self.project = nn.Linear(E, config.hidden_size, bias=config.embedding_projection_bias)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        record: Recorder = no_record,
        attention_mask: torch.Tensor | None = None,
        start: int = 0,
    ) -> torch.Tensor:
        """(B, L) ids -> (B, L, D); with a projection (ELECTRA), its input and output pass `record`.
        `attention_mask` (B, L) is read only by families whose positions count it (OPT); `start`, the
        positions before these (a decoder's cache), shifts a table's positions."""
        x = self.word_embeddings(input_ids)  # (B, L, E)
        if self.config.scale_embedding_in_dtype:  # Gemma: sqrt(D) rounded to the weights' dtype first
            x = x * torch.tensor(self.config.hidden_size**0.5).to(x.dtype)  # (B, L, E)
        elif self.config.scale_embedding:
            x = x * self.config.hidden_size**0.5  # (B, L, E)
        if self.config.type_vocab_size:
            types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.token_type_embeddings(types)  # (B, L, E)
        late = self.config.positions_after_projection  # OPT adds its positions to the projected words
        if hasattr(self, "position_embeddings") and not late:
            x = x + self.position_embeddings(position_ids(self.config, input_ids, attention_mask, start))  # (B, L, E)
        elif self.config.position_embedding_type == "sinusoidal":
            x = x + sinusoids(position_ids(self.config, input_ids, None, start), x.size(-1)).to(
                x.dtype
            )  # (B, L, E) + (L, E)
        if self.config.embedding_norm:
            x = self.LayerNorm(x)
        x = self.dropout(x)
        if hasattr(self, "project"):
            x = record("embedding", x)  # (B, L, E)
            x = record("embed_proj", self.project(x))  # (B, L, E) -> (B, L, D)
        if hasattr(self, "position_embeddings") and late:
            x = x + self.position_embeddings(position_ids(self.config, input_ids, attention_mask, start))  # (B, L, D)
        return x  # (B, L, D)


class Block(nn.Module):
    """Attention, then a feed-forward block, each with a residual and a norm.

    attention_norm is the attention sub-block's norm, output_norm the feed-forward one's: after
    the residual (post-norm, BERT), on the sub-block's input (pre-norm, GPT-2) or on its output
    before the residual adds it (norm_after_sublayer, OLMo2); both, pre-norm and norm_after_sublayer (Gemma2),
    add attention_post_norm and output_post_norm on the outputs. With one_block_norm (Phi) there is no
    output_norm: the parallel feed-forward reads attention_norm(x) too. A decoder block of an encoder-decoder
    (config.cross_attention) has a third sub-block between the two, the same attention reading the
    encoder's output, with its own norm: cross_attention, cross_attention_norm.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        D, F_ = config.hidden_size, config.intermediate_size
        self.pre_norm = config.pre_norm
        self.parallel_residual = config.parallel_residual
        self.norm_after_sublayer = config.norm_after_sublayer
        self.attention = self.make_attention(config)
        self.attention_norm = make_norm(config, D)
        if config.cross_attention:
            self.cross_attention = self.make_attention(config)
            self.cross_attention_norm = make_norm(config, D)
        if config.fused_gate_up:  # Phi3's gate_up_proj, ModernBERT's Wi: the activated half first
            self.gate_up = nn.Linear(D, 2 * F_, bias=config.mlp_bias)
        else:
            self.intermediate = nn.Linear(D, F_, bias=config.mlp_bias)
        if config.gated_mlp and not config.fused_gate_up:
            self.gate = nn.Linear(D, F_, bias=config.mlp_bias)
        self.output = nn.Linear(F_, D, bias=config.mlp_bias)
        if not config.one_block_norm:
            self.output_norm = make_norm(config, D)
        if config.pre_norm and config.norm_after_sublayer:  # Gemma2: a norm after each sub-block as well
            self.attention_post_norm = make_norm(config, D)
            self.output_post_norm = make_norm(config, D)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.act = ACTIVATIONS[config.hidden_act]

    @staticmethod
    def make_attention(config: ModelConfig) -> MultiHeadAttention:
        return MultiHeadAttention(
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
            dropout=config.attention_probs_dropout_prob,
            bias=config.attention_bias,
            fused_qkv=config.fused_qkv,
            head_dim=config.head_size,
            out_bias=config.output_bias,
            scaling=attention_scaling(config),
            softcap=config.attn_logit_softcapping,
            qkv_per_head=config.qkv_per_head,
            qk_norm=config.qk_norm,
            make_norm=lambda width: make_norm(config, width),
        )

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "gate_up"):
            gate, up = self.gate_up(x).chunk(2, dim=-1)  # (B, L, F) each
            return self.output(gated(self.act(gate), up))  # (B, L, D)
        if hasattr(self, "gate"):
            return self.output(gated(self.act(self.gate(x)), self.intermediate(x)))  # (B, L, D)
        return self.output(self.act(self.intermediate(x)))  # (B, L, D_ff) -> (B, L, D)

    def drop(self, x: torch.Tensor) -> torch.Tensor:
        """The residual dropout while training; x itself otherwise, with no module call (a writing step would
        make two per layer)."""
        return self.dropout(x) if self.training else x

    def add(self, x: torch.Tensor, out: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        """A sub-block's residual: x + out, then its norm in a post-norm block (pre-norm normed its input);
        with norm_after_sublayer (OLMo2), x + norm(out)."""
        if self.norm_after_sublayer:
            return x + self.drop(norm(out))  # (B, L, D)
        x = x + self.drop(out)  # (B, L, D)
        return x if self.pre_norm else norm(x)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        record: Recorder = no_record,
        head_mask: torch.Tensor | None = None,
        ablation: str = "zero",
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        keep_map: bool = True,
        rows: torch.Tensor | None = None,
        map_only: bool = False,
        cache: KeyValueCache | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """x (B, L, D); `head_mask` (H,) ablates heads (1 keep, 0 ablate; see masks.ablate_heads);
        `rotary` (cos, sin) turns q and k by position (rotary.py); `rows` (B, P) keeps only those
        query rows of the map, (B, H, P, L) (see MultiHeadAttention.forward); `map_only` stops at
        the map: (None, probs), no attention output and no feed-forward block; `cache` holds the keys and
        values of the positions before x's (see MultiHeadAttention.forward)."""
        out, probs = self.attend(x, mask, record, head_mask, ablation, rotary, keep_map, rows, map_only, cache)
        if map_only:
            return None, probs
        if self.parallel_residual:  # GPT-NeoX: the feed-forward block reads x too, not x + attention
            norm = getattr(self, "output_norm", self.attention_norm)  # Phi: one norm for both
            return out + self.drop(self.feed_forward(norm(x))), probs
        return self.feed(out), probs

    def attend(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        record: Recorder = no_record,
        head_mask: torch.Tensor | None = None,
        ablation: str = "zero",
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        keep_map: bool = True,
        rows: torch.Tensor | None = None,
        map_only: bool = False,
        cache: KeyValueCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The self-attention sub-block, as forward takes its arguments: (x, probs); x is None with map_only."""
        if self.pre_norm:
            record("block_input", x)  # (B, L, D), before the norm: the attention's input is attention_norm(x)
        attended, probs = self.attention(
            self.attention_norm(x) if self.pre_norm else x,
            attention_mask=mask,
            record=record,
            head_mask=head_mask,
            ablation=ablation,
            rotary=rotary,
            keep_map=keep_map,
            rows=rows,
            map_only=map_only,
            cache=cache,
        )  # (B, L, D), (B, H, L or P, L)
        if map_only:
            return attended, probs
        return self.add(x, attended, getattr(self, "attention_post_norm", self.attention_norm)), probs

    def cross_attend(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The cross-attention sub-block: x (B, L, D) queries the encoder's output `memory` (B, S, D),
        whose padding `memory_mask` (B, 1, 1, S) hides. Returns (x, probs (B, H, L, S))."""
        query = self.cross_attention_norm(x) if self.pre_norm else x  # (B, L, D)
        attended, probs = self.cross_attention(
            query, memory, memory, attention_mask=memory_mask
        )  # (B, L, D), (B, H, L, S)
        assert attended is not None and probs is not None
        return self.add(x, attended, self.cross_attention_norm), probs

    def feed(self, x: torch.Tensor) -> torch.Tensor:
        """The feed-forward sub-block: (B, L, D) -> (B, L, D)."""
        out = self.feed_forward(self.output_norm(x) if self.pre_norm else x)  # (B, L, D)
        return self.add(x, out, getattr(self, "output_post_norm", self.output_norm))


def gated(activated: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """act(gate) · up (B, L, F), into the activation's own buffer when no gradient is taken."""
    return activated * up if activated.requires_grad or up.requires_grad else activated.mul_(up)


def attention_scaling(config: ModelConfig) -> float | None:
    """What the scores are multiplied by: None for head_dim ** -0.5, 1 unscaled (T5), or
    query_pre_attn_scalar ** -0.5 (Gemma2)."""
    if config.query_pre_attn_scalar is not None:
        return config.query_pre_attn_scalar**-0.5
    return None if config.scale_scores else 1.0


class Transformer(nn.Module):
    load_report: LoadReport  # what load_model read; a model built from a config alone has none

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.num_hidden_layers))
        if not config.first_attention_norm and config.num_hidden_layers:  # ModernBERT: layer 0 reads x as it is
            self.layers[0].attention_norm = nn.Identity()
        if config.position_embedding_type == "disentangled":  # DeBERTa: a shared table, read by every layer
            disentangled.attach(self)
        if config.position_embedding_type == "relative":  # one bias per bucket and head, shared by every layer
            self.relative_attention_bias = embedding_table(
                config.relative_attention_num_buckets, config.num_attention_heads
            )
        if config.final_norm:
            self.final_norm = make_norm(config, config.hidden_size)
        if config.final_projection:
            self.project_out = nn.Linear(config.hidden_size, config.embedding_width, bias=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        recorders: dict[int, Recorder] | None = None,
        causal: bool = False,
        head_mask: torch.Tensor | None = None,
        ablation: str = "zero",
        maps_for=None,
        rows: torch.Tensor | None = None,
        maps_only: bool = False,
        keep_hidden: bool = True,
    ) -> ModelOutput:
        """input_ids (B, L); attention_mask (B, L), 1 for tokens and 0 for padding; token_type_ids (B, L),
        read only by families with token types (others take any, e.g. zeros, and ignore them).

        `recorders` maps a layer index to a Recorder for that layer's attention (see trace.py).
        `causal` is a what-if for encoders: the same weights with each token seeing only itself and
        earlier tokens (a decoder such as GPT-2 is always causal).
        `head_mask` (n_layers, H), bool or float, tensor or array-like, 1 keeps a head and 0 ablates
        it (transformers' convention). `ablation` says what an ablated head's probabilities become:
        "zero" (the head adds nothing) or "uniform" (even over the keys the token may attend to).
        The returned attentions are the probabilities used. None, or all ones, changes nothing.
        `maps_for`, a collection of layer indices, keeps the attention maps of those layers only:
        every other layer runs torch's fused attention and its entry in `attentions` is None
        (None: every layer's map, the default).
        `rows` (B, P), long query positions, keeps only those rows of each kept map: every layer's
        output is computed by torch's fused attention and its entry in `attentions` is (B, H, P, L),
        the probabilities of just those queries (the same numbers as those rows of the full map).
        Rows may repeat; with a head mask or recorders the full map is made and its rows picked.
        `maps_only=True`: only the kept maps are wanted. The last layer whose map is kept stops at its
        map (no values, no output, no feed-forward block) and no layer after it runs: their entries in
        `attentions` are None, `hidden_states` ends with that layer's input, and `last_hidden_state`
        is None.
        With a final norm (GPT-2's ln_f) the last hidden state is taken after it, as transformers does.
        `keep_hidden=False`: no layer's hidden states are kept, only the one the next layer reads; `hidden_states`
        is () (for a caller that wants only the maps).
        """
        B, L = input_ids.shape
        if L > self.config.max_position_embeddings:
            raise ValueError(
                f"{L} tokens is more than this model's {self.config.max_position_embeddings} "
                "positions: truncate the input first (attention.encode does)"
            )
        # the padding mask is built once for all layers; no mask at all when nothing is padded
        if attention_mask is not None and bool(attention_mask.all()):
            attention_mask = None
        is_causal = causal or self.config.causal
        rows = None if rows is None else query_rows(rows, B, L, input_ids.device)  # (B, P) long
        mask, window_mask = self.self_attention_masks(attention_mask, is_causal, B, L, input_ids.device)
        rotary = self.rotary(L, input_ids.device)  # (cos, sin), each (1, L, d), or None
        local_rotary = rotary  # the windowed layers' angles, on their own base if they have one (Gemma3, ModernBERT)
        if self.config.local_rope_theta is not None:
            local_rotary = self.rotary(L, input_ids.device, local=True)
        recorders = recorders or {}
        head_mask = self.check_head_mask(head_mask, ablation)  # (n_layers, H) float or None

        n_layers = len(self.layers)
        last = n_layers - 1  # the last layer to run
        if maps_only:  # up to the last layer whose map is kept, which stops at its map
            last = max((i for i in range(n_layers) if maps_for is None or i in maps_for), default=-1)
        x = self.embeddings(input_ids, token_type_ids, recorders.get(0, no_record), attention_mask)  # (B, L, D)
        hidden_states, attentions = [x] if keep_hidden else [], []
        for i, layer in enumerate(self.layers[: last + 1]):
            layer_mask = None if head_mask is None else head_mask[i]  # (H,)
            layer_attention_mask = mask if self.config.window_of(i) is None else window_mask
            keep_map = maps_for is None or i in maps_for
            map_only = maps_only and i == last
            x, probs = layer(
                x,
                layer_attention_mask,
                recorders.get(i, no_record),
                layer_mask,
                ablation,
                rotary if self.config.window_of(i) is None else local_rotary,
                keep_map,
                rows if keep_map else None,
                map_only,
            )
            attentions.append(probs)
            if not map_only and keep_hidden:
                hidden_states.append(x)
        if maps_only:  # no output: the layers after `last` did not run
            return ModelOutput(None, tuple(hidden_states), tuple(attentions) + (None,) * (n_layers - 1 - last))
        if self.config.final_norm:
            x = self.final_norm(x)
        if self.config.final_projection:  # OPT's project_out: back to the embedding width, (B, L, E)
            x = self.project_out(x)
        if keep_hidden:
            hidden_states[-1] = x
        return ModelOutput(x, tuple(hidden_states), tuple(attentions))

    def self_attention_masks(
        self, attention_mask: torch.Tensor | None, is_causal: bool, B: int, L: int, device: torch.device
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The masks of the layers' self-attention, built once for all layers: (full layers', windowed layers').

        Each is None (nothing masked), boolean (B,1,1,L), (1,1,L,L) or both, or with relative positions
        (T5) the per-head bias plus -inf where masked, (B or 1, H, L, L)."""
        mask = build_mask(attention_mask, is_causal, B, L, L, device=device)  # (B,1,1,L), (1,1,L,L), both or None
        window, window_mask = self.config.sliding_window, mask
        if is_causal and window is not None and window < L:  # windowed layers see only the latest `window` keys
            window_mask = build_mask(attention_mask, True, B, L, L, window, device)  # (B or 1, 1, L, L)
        elif window is not None and window < L:  # an encoder's: the keys fewer than `window` away either side
            padding = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L)
            window_mask = band(L, window, device) if padding is None else padding & band(L, window, device)
        if self.config.position_embedding_type == "relative":
            mask = window_mask = self.position_bias(mask, L, is_causal, device)
        return mask, window_mask

    def position_bias(
        self, mask: torch.Tensor | None, L: int, is_causal: bool, device: torch.device, start: int = 0
    ) -> torch.Tensor:
        """T5's relative positions: each head's learned bias for every (query, key) distance bucket,
        added to the scores as an additive mask, with -inf where `mask` (boolean) hides a key.
        `start`: the L queries are the last L of start + L positions (a decoder's new rows), (1, H, L, start + L)."""
        c = self.config
        buckets = relative_buckets(
            L,
            start + L,
            not is_causal,
            c.relative_attention_num_buckets,
            c.relative_attention_max_distance,
            device,
            start,
        )  # (L, S)
        bias = self.relative_attention_bias(buckets).permute(2, 0, 1)[None]  # (L, S, H) -> (1, H, L, S)
        if mask is None:
            return bias
        return torch.where(mask, bias, float("-inf"))  # (B or 1, H, L, S)

    def rotary(
        self, L: int, device: torch.device, local: bool = False, start: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """cos and sin of positions start ... start + L - 1, (1, L, d) each, for rotary models; else None
        (rotary.angles_for). `local`: the windowed layers' angles, with their own base (local_rope_theta) when
        the family has one."""
        return angles_for(self.config, L, device, local, start)

    def check_head_mask(self, head_mask, ablation: str = "zero") -> torch.Tensor | None:
        """A head mask as a float (n_layers, H) tensor on the model's device; a clear ValueError if invalid."""
        expected = (self.config.num_hidden_layers, self.config.num_attention_heads)
        return head_mask_tensor(head_mask, expected, self.embeddings.word_embeddings.weight.device, ablation)
