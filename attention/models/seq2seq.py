"""An encoder-decoder (BART, T5, Marian): two stacks of the one model in blocks.py.

The encoder is a Transformer as any encoder-only family's. The decoder is a Transformer too, causal,
whose blocks have a cross-attention sub-block: after its self-attention each decoder token attends to
the encoder's last hidden state, through the same MultiHeadAttention given the encoder's output as its
key and value. Both stacks read the one word-embedding table (the checkpoint's `shared`, given to both
by the family's `shared` declaration). Generation is not here: the decoder's input is given whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from ..config import ModelConfig
from ..core.mha import build_mask
from ..core.request import EVERY_MAP, EXPLICIT, FUSED, MapRequest
from .blocks import Block, Transformer

if TYPE_CHECKING:
    from ..load.loading import LoadReport

# on_map(part, layer, maps): a decoder layer's "decoder" self-attention (B, H, L, L), then its "cross" (B, H, L, S)
OnDecoderMap = Callable[[str, int, torch.Tensor], None]


class Seq2SeqOutput(NamedTuple):
    """transformers' Seq2SeqModelOutput fields; maps are (B, H, L_query, L_key) probabilities."""

    last_hidden_state: torch.Tensor  # (B, L_dec, D), the decoder's, after its final norm if it has one
    encoder_last_hidden_state: torch.Tensor  # (B, L_enc, D)
    encoder_hidden_states: tuple[torch.Tensor, ...]  # encoder layers + 1 items: embeddings, then each layer
    decoder_hidden_states: tuple[torch.Tensor, ...]  # decoder layers + 1 items
    encoder_attentions: tuple[torch.Tensor, ...]  # each (B, H, L_enc, L_enc)
    decoder_attentions: tuple[torch.Tensor, ...]  # each (B, H, L_dec, L_dec), causal
    cross_attentions: tuple[torch.Tensor, ...]  # each (B, H, L_dec, L_enc)


class EncoderDecoder(nn.Module):
    load_report: LoadReport  # what load_model read; a model built from a config alone has none

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.encoder = Transformer(config.encoder_config())
        self.decoder = Transformer(config.decoder_config())

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
    ) -> Seq2SeqOutput:
        """input_ids (B, L_enc) and decoder_input_ids (B, L_dec), each with an optional mask, 1 for tokens
        and 0 for padding. A decoder input starts with config.encoder_decoder.decoder_start_token_id."""
        if decoder_input_ids is None:
            raise ValueError(
                "an encoder-decoder needs decoder_input_ids: the decoder's input, starting with "
                f"decoder_start_token_id ({self.config.encoder_decoder.decoder_start_token_id})"
            )
        encoded = self.encoder(input_ids, attention_mask)
        assert encoded.last_hidden_state is not None
        states, self_maps, cross_maps = self.decode(
            decoder_input_ids, decoder_attention_mask, encoded.last_hidden_state, attention_mask
        )
        return Seq2SeqOutput(
            states[-1],
            encoded.last_hidden_state,
            encoded.hidden_states,
            states,
            tuple(p for p in encoded.attentions if p is not None),
            self_maps,
            cross_maps,
        )

    def decode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None,
        on_map: OnDecoderMap | None = None,
        request: MapRequest = EVERY_MAP,
    ) -> tuple[tuple[torch.Tensor, ...], ...]:
        """The decoder over input_ids (B, L) reading the encoder's output `memory` (B, S, D), whose
        padding memory_mask (B, S) marks. Returns (hidden states, self-attention maps, cross-attention maps).
        `on_map` given, each layer's maps are handed to it as they are made (its self-attention's, then its
        cross-attention's), not kept: the maps' tuples are empty and the hidden states are the last alone; this
        pass holds one map at a time, and an exception from on_map ends it (seq2seq_maps.forced_maps). A long
        `request` (request.MapRequest.keep) makes no map: each self-attention's kept in it, the cross-attention
        fused, nothing handed on and both maps' tuples empty (attention/long_maps.py)."""
        decoder = self.decoder
        B, L = input_ids.shape
        if L > decoder.config.max_position_embeddings:
            raise ValueError(
                f"{L} decoder tokens is more than this model's {decoder.config.max_position_embeddings} positions"
            )
        if attention_mask is not None and bool(attention_mask.all()):
            attention_mask = None
        mask, _ = decoder.self_attention_masks(attention_mask, True, B, L, input_ids.device, request.keep)  # causal
        cross_mask = build_mask(memory_mask, False, B, L, memory.size(1))  # (B, 1, 1, S) or None
        x = decoder.embeddings(input_ids, None)  # (B, L, D)
        states = [x]
        self_maps: list[torch.Tensor] = []
        cross_maps: list[torch.Tensor] = []
        kept = {"decoder": self_maps, "cross": cross_maps}
        hand = on_map or (lambda part, i, maps: kept[part].append(maps))
        long = request.keep is not None
        for i, layer in enumerate(decoder.layers):
            assert isinstance(layer, Block)
            x, probs = layer.attend(x, mask, call=request.call(i, len(decoder.layers) - 1))  # (B,L,D), (B,H,L,L)
            assert x is not None and (long or probs is not None)  # an output and a map, as the explicit call gives
            if probs is not None:
                hand("decoder", i, probs)
            del probs  # let go before the next map is made
            x, probs = layer.cross_attend(x, memory, cross_mask, FUSED if long else EXPLICIT)  # (B,L,D), (B,H,L,S)
            if probs is not None:
                hand("cross", i, probs)
            del probs
            x = layer.feed(x)  # (B, L, D)
            if on_map is not None:
                states.clear()  # the last alone is read
            states.append(x)
        if decoder.config.norms.final_norm:
            states[-1] = decoder.final_norm(x)
        return tuple(states), tuple(self_maps), tuple(cross_maps)
