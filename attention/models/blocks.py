"""The one model every family is built as: embeddings, a stack of blocks, an optional final norm.

Module names follow BERT's (embeddings.word_embeddings, attention, intermediate, output, ...),
so the families' tensor-name maps stay short. What a family does differently is read from its
ModelConfig (attention/config.py), never from a copy of this code. The attention's Q·K·V projection and Q/K norm
are parts chosen when it is built (attention/core/qkv.py), and so is how positions enter (position_parts.py: a table,
sines, rotary angles, a bias on the scores, DeBERTa's terms) and what a layer adds last (layer_inputs.py: Gemma 4's
per-layer inputs and scalar); each layer is built from its own config (ModelConfig.for_layer: Gemma 4's full layers
have wider heads); the blocks read the rest: token types or none, an
embedding projection, norms after (BERT) or before (GPT-2) each sub-block, a final norm, causal or not, bias or
none, LayerNorm or RMSNorm, a plain or gated feed-forward block, a sliding window, and cross-attention to an
encoder's output (the decoder stack of an encoder-decoder, seq2seq.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from ..config import ModelConfig
from ..core.masks import build_mask, head_mask_tensor, query_rows
from ..core.mha import KeyValueCache, MultiHeadAttention, Recorder, no_record
from ..core.request import EVERY_MAP, EXPLICIT, Call, MapRequest
from .embeddings import Embeddings
from .experts import MixtureOfExperts
from .layer_inputs import layer_input_part
from .parts import ACTIVATIONS, make_norm
from .positions import band
from .residuals import residual_part

if TYPE_CHECKING:
    from ..load.loading import LoadReport


class ModelOutput(NamedTuple):
    last_hidden_state: torch.Tensor | None  # (B, L, D); None when the forward stopped at a map (maps_only)
    hidden_states: tuple[torch.Tensor, ...]  # n_layers + 1 items: embeddings, then each layer
    attentions: tuple[torch.Tensor | None, ...]  # n_layers items, each (B, H, L, L) probabilities (float32 for
    # half weights; (B, H, P, L) when only some query rows are kept); None: not kept


class Block(nn.Module):
    """Attention, then a feed-forward block, each with a residual and a norm.

    attention_norm is the attention sub-block's norm, output_norm the feed-forward one's; where they sit around
    the residuals is the block's residual part (residuals.py: post-norm, pre-norm, sandwich with
    attention_post_norm and output_post_norm, norm after, parallel). With one_block_norm there is no
    output_norm: the parallel feed-forward reads attention_norm(x) too. A decoder block of an encoder-decoder
    (config.encoder_decoder.cross_attention) has a third sub-block between the two, the same attention reading the
    encoder's output, with its own norm: cross_attention, cross_attention_norm.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        D = config.hidden_size
        self.residual = residual_part(config)  # where the norms sit around the residuals
        self.layer_part = layer_input_part(config)  # what the layer adds last (Gemma 4's per-layer inputs), or none
        self.attention = self.make_attention(config)
        self.attention_norm = make_norm(config, D)
        if config.encoder_decoder.cross_attention:
            self.cross_attention = self.make_attention(config)
            self.cross_attention_norm = make_norm(config, D)
        if config.feed_forward.num_local_experts:  # a mixture of experts for the feed-forward block (experts.py)
            self.mixture = MixtureOfExperts(config)
        else:
            self.make_feed_forward(config)
        if not config.norms.one_block_norm:
            self.output_norm = make_norm(config, D)
        if self.residual.post_norms:  # a norm after each sub-block as well
            self.attention_post_norm = make_norm(config, D)
            self.output_post_norm = make_norm(config, D)
        self.dropout = nn.Dropout(config.embeddings.hidden_dropout_prob)
        self.act = ACTIVATIONS[config.feed_forward.hidden_act]

    def make_feed_forward(self, config: ModelConfig) -> None:
        """One feed-forward block: intermediate (or gate_up, Phi3's and ModernBERT's fused one, the activated half
        first), a gate where it is gated, output."""
        D, F_, bias = config.hidden_size, config.intermediate_size, config.feed_forward.mlp_bias
        if config.feed_forward.fused_gate_up:
            self.gate_up = nn.Linear(D, 2 * F_, bias=bias)
        else:
            self.intermediate = nn.Linear(D, F_, bias=bias)
        if config.feed_forward.gated_mlp and not config.feed_forward.fused_gate_up:
            self.gate = nn.Linear(D, F_, bias=bias)
        self.output = nn.Linear(F_, D, bias=bias)

    @staticmethod
    def make_attention(config: ModelConfig) -> MultiHeadAttention:
        return MultiHeadAttention(
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
            dropout=config.attention.attention_probs_dropout_prob,
            bias=config.attention.attention_bias,
            projection="per_head"
            if config.attention.qkv_per_head
            else "fused"
            if config.attention.fused_qkv
            else "separate",
            head_dim=config.head_size,
            out_bias=config.attention.output_bias,
            scaling=attention_scaling(config),
            softcap=config.attention.attn_logit_softcapping,
            sinks=config.attention.sinks,
            value_norm=config.norms.layer_norm_eps if config.attention.value_norm else None,
            qk_norm=config.attention.qk_norm,
            make_norm=lambda width: make_norm(config, width),
        )

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "mixture"):
            return self.mixture(x)  # (B, L, D)
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

    def add(self, x: torch.Tensor, out: torch.Tensor, norm: nn.Module, post: nn.Module | None = None):
        """A sub-block's residual, as the block's residual part joins them: (B, L, D)."""
        return self.residual.add(self, x, out, norm, post)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KeyValueCache | None = None,
        call: Call = EXPLICIT,
        layer_input: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """x (B, L, D); `rotary` (cos, sin) turns q and k by position (rotary.py); `cache` holds the keys and values
        of the positions before x's; `call` names the attention's implementation, the map rows it keeps, a recorder
        and ablated heads (see MultiHeadAttention.forward); `layer_input` (B, L, P), this layer's own input where
        the model has them (layer_inputs.py). A call that asks for the map alone stops there:
        (None, probs), no attention output and no feed-forward block."""
        out, probs = self.attend(x, mask, rotary, cache, call)
        if out is None:
            return None, probs
        return self.layer_part.finish(self, self.residual.after_attention(self, x, out), layer_input), probs

    def attend(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KeyValueCache | None = None,
        call: Call = EXPLICIT,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The self-attention sub-block, as forward takes its arguments: (x, probs); x is None for a map alone."""
        if self.residual.reads_normed:
            call.record("block_input", x)  # (B, L, D), before the norm: the attention's input is attention_norm(x)
        query = self.residual.input(x, self.attention_norm)  # (B, L, D)
        attended, probs = self.attention(query, attention_mask=mask, rotary=rotary, cache=cache, call=call)
        if attended is None:  # (B, L, D), (B, H, L or P, L)
            return None, probs
        return self.join(x, attended), probs

    def join(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The attention's output `attended` (its o_proj's, (..., L, D)) joined to the residual x (..., L, D), as the
        block's residual part joins them; any leading dimensions (analysis/mixing.py's zeroed values batch them)."""
        return self.add(x, attended, self.attention_norm, getattr(self, "attention_post_norm", None))

    def cross_attend(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None, call: Call = EXPLICIT
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The cross-attention sub-block: x (B, L, D) queries the encoder's output `memory` (B, S, D),
        whose padding `memory_mask` (B, 1, 1, S) hides. Returns (x, probs (B, H, L, S), None for a fused `call`)."""
        query = self.residual.input(x, self.cross_attention_norm)  # (B, L, D)
        attended, probs = self.cross_attention(
            query, memory, memory, attention_mask=memory_mask, call=call
        )  # (B, L, D), (B, H, L, S)
        assert attended is not None
        return self.add(x, attended, self.cross_attention_norm), probs

    def feed(self, x: torch.Tensor) -> torch.Tensor:
        """The feed-forward sub-block: (B, L, D) -> (B, L, D)."""
        out = self.feed_forward(self.residual.input(x, self.output_norm))  # (B, L, D)
        return self.add(x, out, self.output_norm, getattr(self, "output_post_norm", None))


def gated(activated: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """act(gate) · up (B, L, F), into the activation's own buffer when no gradient is taken."""
    return activated * up if activated.requires_grad or up.requires_grad else activated.mul_(up)


def attention_scaling(config: ModelConfig) -> float | None:
    """What the scores are multiplied by: None for head_dim ** -0.5, 1 unscaled (T5), or
    query_pre_attn_scalar ** -0.5 (Gemma2)."""
    if config.attention.query_pre_attn_scalar is not None:
        return config.attention.query_pre_attn_scalar**-0.5
    return None if config.attention.scale_scores else 1.0


class Transformer(nn.Module):
    load_report: LoadReport  # what load_model read; a model built from a config alone has none

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        # each layer from its own config: Gemma 4's full layers have wider heads (ModelConfig.for_layer)
        self.layers = nn.ModuleList(Block(config.for_layer(i)) for i in range(config.num_hidden_layers))
        if not config.norms.first_attention_norm and config.num_hidden_layers:  # ModernBERT: layer 0 reads x as it is
            self.layers[0].attention_norm = nn.Identity()
        self.positions = self.embeddings.positions  # the model's position part: its tables, angles, score terms
        self.positions.attach(self)
        self.layer_inputs = layer_input_part(config)  # each layer's own input (Gemma 4), or none
        self.layer_inputs.attach(self)
        if config.norms.final_norm:
            self.final_norm = make_norm(config, config.hidden_size)
        if config.embeddings.final_projection:
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
        request: MapRequest = EVERY_MAP,
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
        `request` (request.MapRequest) says which maps are kept: by default every layer's, whole, with every
        hidden state (transformers' output_attentions). A layer whose map is not kept runs torch's fused attention
        and its entry in `attentions` is None. With the request's `rows` (B, P), long query positions, a kept
        entry is (B, H, P, L), those queries' rows (the same numbers as those rows of the full map; rows may
        repeat; with a head mask or recorders the full map is made and its rows picked). A request that `stop`s
        at the last kept map runs no layer after it: their entries are None, `hidden_states` ends with that
        layer's input and `last_hidden_state` is None. Without `keep_hidden`, `hidden_states` is ().
        With a final norm (GPT-2's ln_f) the last hidden state is taken after it, as transformers does.
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
        is_causal = causal or self.config.attention.causal
        rows = None if request.rows is None else query_rows(request.rows, B, L, input_ids.device)  # (B, P) long
        mask, window_mask = self.self_attention_masks(attention_mask, is_causal, B, L, input_ids.device, request.keep)
        angles = self.positions.layer_angles(self, L, input_ids.device)  # per layer (cos, sin) (1, L, d) each, or None
        recorders = recorders or {}
        head_mask = self.check_head_mask(head_mask, ablation)  # (n_layers, H) float or None

        n_layers = len(self.layers)
        last = request.last(n_layers)  # a request that stops at a map ends at the last kept one
        x = self.embeddings(input_ids, token_type_ids, recorders.get(0, no_record), attention_mask)  # (B, L, D)
        layer_inputs = self.layer_inputs.inputs(self, input_ids, x)  # per layer (B, L, P), or None
        hidden_states = [x] if request.keep_hidden else []
        attentions: list[torch.Tensor | None] = []
        for i, layer in enumerate(self.layers[: last + 1]):
            if request.keep is not None:  # a long pass: it keeps layer inputs, or resumes at one (core/long.py)
                if request.keep.skips(i):
                    attentions.append(None)
                    continue
                x = request.keep.layer_input(i, x)
            ablated = None if head_mask is None else head_mask[i]  # (H,)
            call = request.call(i, last, rows, recorders.get(i, no_record), ablated, ablation)
            windowed = self.config.window_of(i) is not None
            out, probs = layer(x, window_mask if windowed else mask, angles[i], call=call, layer_input=layer_inputs[i])
            attentions.append(probs)
            if out is None:  # the map alone was asked for
                break
            x = out
            if request.keep_hidden:
                hidden_states.append(x)
        if request.stop:  # no output: the layers after `last` did not run
            return ModelOutput(None, tuple(hidden_states), tuple(attentions) + (None,) * (n_layers - 1 - last))
        x = self.finish(x)
        if request.keep_hidden:
            hidden_states[-1] = x
        return ModelOutput(x, tuple(hidden_states), tuple(attentions))

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """What follows the last layer: the final norm (GPT-2's ln_f) and OPT's project_out where the model has them,
        (..., D) -> (..., D or E); the logit lens reads every layer's output through it (analysis/lens.py)."""
        if self.config.norms.final_norm:
            x = self.final_norm(x)
        if self.config.embeddings.final_projection:  # OPT's project_out: back to the embedding width, (B, L, E)
            x = self.project_out(x)
        return x

    def self_attention_masks(
        self, attention_mask: torch.Tensor | None, is_causal: bool, B: int, L: int, device: torch.device, keep=None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The masks of the layers' self-attention, built once for all layers: (full layers', windowed layers').

        Each is None (nothing masked), boolean (B,1,1,L), (1,1,L,L) or both, or with relative positions
        (T5) the per-head bias plus -inf where masked, (B or 1, H, L, L); for a long pass (`keep`, a LongKeep)
        T5's masks stay boolean and its bias goes to the keep, made a tile of rows at a time."""
        mask = build_mask(attention_mask, is_causal, B, L, L, device=device)  # (B,1,1,L), (1,1,L,L), both or None
        window, window_mask = self.config.attention.sliding_window, mask
        if is_causal and window is not None and window < L:  # windowed layers see only the latest `window` keys
            window_mask = build_mask(attention_mask, True, B, L, L, window, device)  # (B or 1, 1, L, L)
        elif window is not None and window < L:  # an encoder's: the keys fewer than `window` away either side
            padding = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, L)
            window_mask = band(L, window, device) if padding is None else padding & band(L, window, device)
        if keep is not None and self.positions.bias_in_mask:  # never an (H, L, L) bias in a long pass
            keep.bias = self.positions.row_bias(self, L, is_causal, device)
            return mask, window_mask
        same = window_mask is mask  # one mask for both kinds of layer (no window, or one the input fits in)
        mask = self.positions.scores_mask(self, mask, L, is_causal, device)  # T5's bias in it; else as it is
        window_mask = mask if same else self.positions.scores_mask(self, window_mask, L, is_causal, device)
        return mask, window_mask

    def check_head_mask(self, head_mask, ablation: str = "zero") -> torch.Tensor | None:
        """A head mask as a float (n_layers, H) tensor on the model's device; a clear ValueError if invalid."""
        expected = (self.config.num_hidden_layers, self.config.num_attention_heads)
        return head_mask_tensor(head_mask, expected, self.embeddings.word_embeddings.weight.device, ablation)
