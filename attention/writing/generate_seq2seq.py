"""Text written by an encoder-decoder (BART, mBART, Marian, T5): the encoder reads the text once, then the
decoder writes from its start token, token by token, as transformers' `generate` does with one beam.

The encoder runs once, its maps kept; its output is turned into each decoder layer's cross-attention keys and
values once (CrossKeys); the decoder's self-attention keeps the keys and values of the positions already
written in buffers made once (search.BufferedCache), so each new token costs one position. Marian's computed
positions and T5's relative bias are taken at the new position only. Each step keeps the decoder's self- and
cross-attention rows, compact (search.StepMaps), as transformers' generate(output_attentions=True) keeps them;
once the last token is chosen one more step, with no LM head, gives its rows. The caches are freed, then each
layer's rows are laid out as its (1, H, T, T) and (1, H, T, S) maps of the whole written sequence.

The LM head is read strictly from the checkpoint: `lm_head.weight` if saved, else the shared word table;
BART's, mBART's and Marian's `final_logits_bias` (1, V), which their checkpoints always hold; T5 multiplies
the last hidden state by d_model ** -0.5 before the head unless its config.json sets scale_decoder_outputs (or,
in older saves, tie_word_embeddings) false; from a T5 GGUF file, its output.weight unscaled, or, where it has
none, the shared table scaled (search.head_source).

The generation config is followed (processors.py): decoder_start_token_id, end-of-sequence ids, forced first
and last tokens, minimum lengths, repetition penalty, no-repeat n-grams and bad words. Its num_beams is not:
translation and summary checkpoints ship num_beams 4 to 6 as their task's default, and one beam is what runs
here (greedy search or sampling); the result keeps the number asked for (checkpoint_num_beams).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..core.dot_product import no_record, scaled_dot_product_attention
from ..core.mha import KeyValueCache, MultiHeadAttention
from ..core.request import MapRequest
from ..errors import ModelLoadError
from ..models import EncoderDecoder
from ..models.blocks import Block
from ..models.decoding import decode_masks, step_call
from ..runs.bigrun import BIG_RUN_BYTES, maps_bytes, within_bound
from .processors import Settings, settings_of
from .search import BufferedCache, LMHead, Sampling, StepMaps, by_columns, head_source, kept_head, search

BIASED = ("bart", "mbart", "marian")  # families whose LM head adds final_logits_bias
KEEP_LESS = "Try a shorter text (or target), or write with keep_maps=False (no map kept) or maps_bound=None."


def load_seq2seq_head(model: EncoderDecoder) -> LMHead:
    """The LM head of the encoder-decoder checkpoint `model` was loaded from (see the module's docstring)."""
    report = getattr(model, "load_report", None)
    if report is None:
        raise ModelLoadError("only an encoder-decoder loaded by load_model has an LM head to read")
    checkpoint, config = head_source(report)  # a GGUF file's: its output.weight, or tied where it has none
    words = model.decoder.embeddings.word_embeddings.weight  # (V, D), the shared table
    extra = [n for n in checkpoint if n.startswith("lm_head.") and n != "lm_head.weight"]
    if extra:
        raise ModelLoadError(f"the checkpoint's LM head has tensors this model does not use: {', '.join(extra)}")
    tied = config.get("tie_word_embeddings") is not False
    kind = model.config.model_type
    weight = words
    if "lm_head.weight" in checkpoint:
        weight = by_columns(checkpoint["lm_head.weight"].to(dtype=words.dtype, device=words.device))
    elif not tied and kind != "t5":  # T5's config says false and its head is still the shared table
        raise ModelLoadError("the checkpoint has no 'lm_head.weight' and does not tie it to the word embeddings")
    if weight.shape != words.shape:
        raise ModelLoadError(f"'lm_head.weight' is {tuple(weight.shape)}, expected {tuple(words.shape)}")
    bias = None
    if kind in BIASED:
        if "final_logits_bias" not in checkpoint:
            raise ModelLoadError("the checkpoint has no 'final_logits_bias': it is not a model with an LM head")
        bias = checkpoint["final_logits_bias"]
        if tuple(bias.shape) != (1, words.size(0)):
            raise ModelLoadError(f"'final_logits_bias' is {tuple(bias.shape)}, expected {(1, words.size(0))}")
        bias = bias[0].to(dtype=words.dtype, device=words.device)  # (V,)
    scale = model.config.hidden_size**-0.5 if kind == "t5" and config.get("scale_decoder_outputs", tied) else None
    return LMHead(weight, bias, scale)


def kept_bytes(model: EncoderDecoder, n_source: int, n_target: int) -> int:
    """Bytes of every map of one pass of `model` over `n_source` encoder and `n_target` decoder tokens, float32: the
    encoder's (n_layers, H, S, S), the decoder's (n_layers, H, T, T) and the cross-attention's (n_layers, H, T, S)."""
    encoder, decoder = model.encoder.config, model.decoder.config
    heads, layers = decoder.num_attention_heads, decoder.num_hidden_layers
    return (
        maps_bytes(encoder.num_hidden_layers, encoder.num_attention_heads, n_source)
        + maps_bytes(layers, heads, n_target)
        + maps_bytes(layers, heads, n_target, n_source)
    )


class CrossKeys:
    """One decoder layer's cross-attention keys and values, (1, G, S, d) each, made once from the encoder's
    output `memory` (1, S, D); `attend` is that layer's cross-attention sub-block for new queries."""

    def __init__(self, layer: Block, memory: torch.Tensor, memory_mask: torch.Tensor | None):
        attention: MultiHeadAttention = layer.cross_attention
        self.layer, self.attention, self.mask = layer, attention, memory_mask
        self.k = attention.split_heads(attention.k_proj(memory), attention.num_kv_heads, "k", no_record)  # (1,G,S,d)
        self.v = attention.split_heads(attention.v_proj(memory), attention.num_kv_heads, "v", no_record)  # (1,G,S,d)

    def attend(self, x: torch.Tensor, keep_map: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (1, L, D) -> (x (1, L, D) after the cross-attention sub-block, its map (1, H, L, S) or None): the
        steps of Block.cross_attend (dot_product.scaled_dot_product_attention) with `keep_map`, else torch's fused
        attention."""
        layer, attention = self.layer, self.attention
        B, L, _ = x.shape
        query = layer.residual.input(x, layer.cross_attention_norm)  # (1, L, D)
        q = attention.split_heads(attention.q_proj(query), attention.num_heads, "q", no_record)  # (1, H, L, d)
        group = attention.num_heads // attention.num_kv_heads  # the kernel shares each k/v head with its group
        probs = None
        if keep_map:
            k, v = (self.k, self.v) if group == 1 else (t.repeat_interleave(group, 1) for t in (self.k, self.v))
            heads, probs = scaled_dot_product_attention(q, k, v, self.mask, attention.scaling)  # (1,H,L,d), (1,H,L,S)
        else:
            heads = F.scaled_dot_product_attention(
                q, self.k, self.v, attn_mask=self.mask, scale=attention.scaling, enable_gqa=group > 1
            )  # (1, H, L, d)
        merged = heads.transpose(1, 2).reshape(B, L, -1)  # (1, L, H, d) -> (1, L, H·d)
        return layer.add(x, attention.o_proj(merged), layer.cross_attention_norm), probs


class Step(NamedTuple):
    last_hidden_state: torch.Tensor  # (1, L, D): the decoder's, after its final norm if it has one
    decoder_attentions: tuple[torch.Tensor | None, ...]  # per layer (1, H, L, P + L), or None: not kept
    cross_attentions: tuple[torch.Tensor | None, ...]  # per layer (1, H, L, S), or None


def decode_step(
    model: EncoderDecoder, new: torch.Tensor, cache: list[KeyValueCache], cross: list[CrossKeys], keep_maps=False
) -> Step:
    """The decoder's last hidden states (1, L, D) for the tokens `new` (1, L) after the P positions in `cache`:
    the same numbers as the last L rows of EncoderDecoder.decode over all P + L tokens; with `keep_maps`, the
    last L rows of its self- and cross-attention maps too."""
    decoder = model.decoder
    P, L = cache[0].length, new.size(1)
    S = P + L
    if S > decoder.config.max_position_embeddings:
        raise ValueError(f"{S} decoder tokens is more than this model's {decoder.config.max_position_embeddings}")
    mask, _ = decode_masks(decoder.config, 1, L, S, new.device)  # (1, 1, L, S): the queries are the last L
    mask = decoder.positions.scores_mask(decoder, mask, L, True, new.device, start=P)  # T5's bias of the new rows
    x = decoder.embeddings(new, None, start=P)  # (1, L, D)
    self_maps, cross_maps = [], []
    for layer, layer_cache, keys in zip(decoder.layers, cache, cross):
        assert isinstance(layer, Block)
        x, probs = layer.attend(x, mask, None, layer_cache, step_call(keep_maps, L, mask))  # (1,L,D), (1,H,L,S)
        assert x is not None
        x, cross_probs = keys.attend(x, keep_maps)  # (1, L, D), (1, H, L, S_enc)
        x = layer.feed(x)  # (1, L, D)
        self_maps.append(probs)
        cross_maps.append(cross_probs)
    return Step(decoder.final_norm(x) if decoder.config.norms.final_norm else x, tuple(self_maps), tuple(cross_maps))


@dataclass(frozen=True)
class Seq2SeqGeneration:
    ids: torch.Tensor  # (1, T): the decoder's sequence, its start token, then the new ones
    new_ids: torch.Tensor  # (1, n_new)
    tokens: list[str]  # the decoder's T tokens
    top_ids: torch.Tensor  # (n_new, top): at each step the most probable next tokens, best first
    top_probs: torch.Tensor  # (n_new, top): their probabilities, those the choice was made from
    encoder_ids: torch.Tensor  # (1, S): the text given
    encoder_tokens: list[str]  # its S tokens
    encoder_attentions: tuple[torch.Tensor, ...]  # encoder layers maps (1, H, S, S)
    decoder_attentions: tuple[torch.Tensor, ...]  # decoder layers maps (1, H, T, T), causal
    cross_attentions: tuple[torch.Tensor, ...]  # decoder layers maps (1, H, T, S)
    checkpoint_num_beams: int  # what the generation config asks for; one beam is what ran


def start_token(model: EncoderDecoder, settings: Settings) -> int:
    """The decoder's first token: the generation config's decoder_start_token_id, else the model config's,
    else the BOS id, as transformers takes it."""
    for candidate in (
        settings.decoder_start_token_id,
        model.config.encoder_decoder.decoder_start_token_id,
        settings.bos_token_id,
    ):
        if candidate is not None:
            return int(candidate)
    raise ValueError("the checkpoint names no decoder_start_token_id (nor bos_token_id) to start the decoder from")


def generate_seq2seq(
    model: EncoderDecoder,
    tokenizer,
    input_ids: torch.Tensor,
    max_new_tokens: int = 20,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    top: int = 5,
    keep_maps: bool = True,
    maps_bound: int | None = BIG_RUN_BYTES,
) -> Seq2SeqGeneration:
    """attention.generate for an encoder-decoder, from the source's ids (1, S) on the model's device, within the
    encoder's positions (attention.generate tokenizes a text as tokenizer(text) does; the page passes the ids every
    view reads, attention.encode's); the options are checked by attention.writing.generate. See the module's docstring.
    The maps kept are sized before the work (`kept_bytes`): past `maps_bound`, bigrun.KeepsTooMuch;
    `keep_maps=False` writes the same tokens with no map made, its three maps' fields ()."""
    settings = settings_of(model)
    head = kept_head(model, model.decoder.embeddings.word_embeddings.weight, load_seq2seq_head)
    limit = model.decoder.config.max_position_embeddings
    if 1 + max_new_tokens > limit:
        raise ValueError(f"a start token and {max_new_tokens} new ones exceed the decoder's {limit} positions")
    if keep_maps:
        within_bound("Writing", kept_bytes(model, input_ids.size(1), 1 + max_new_tokens), KEEP_LESS, maps_bound)
    sampling = Sampling.seeded(do_sample, temperature, top_k, top_p, seed, input_ids.device)
    ids = torch.tensor([[start_token(model, settings)]], device=input_ids.device)  # (1, 1)
    with torch.inference_mode():
        # its maps (none without keep_maps) and last hidden state, no other
        encoded = model.encoder(input_ids, request=MapRequest(None if keep_maps else (), keep_hidden=False))
        memory = encoded.last_hidden_state  # (1, S, D)
        assert memory is not None
        cross = [CrossKeys(layer, memory, None) for layer in model.decoder.layers]  # type: ignore[arg-type]
        cache: list[KeyValueCache] = [BufferedCache(1 + max_new_tokens) for _ in model.decoder.layers]
        self_rows = StepMaps(sum(range(2, max_new_tokens + 2)))  # keys of every new row
        cross_rows = StepMaps(max_new_tokens * memory.size(1))

        def logits_after(new: torch.Tensor) -> torch.Tensor:
            step = decode_step(model, new, cache, cross, keep_maps=keep_maps)
            if keep_maps:
                self_rows.add(step.decoder_attentions)  # (1, H, L, P + L) per layer
                cross_rows.add(step.cross_attentions)  # (1, H, L, S) per layer
            return head(step.last_hidden_state[:, -1])  # (1, V)

        written = search(logits_after, ids, settings, sampling, max_new_tokens, top)
        if keep_maps:
            last = decode_step(model, written.ids[:, -1:], cache, cross, keep_maps=True)  # the last token's rows
            self_rows.add(last.decoder_attentions)
            cross_rows.add(last.cross_attentions)
            del last
        cache.clear()  # freed before the maps are laid out
        cross.clear()
        decoder_maps, cross_maps = self_rows.squares(), cross_rows.squares()  # (1, H, T, T), (1, H, T, S) per layer
    return Seq2SeqGeneration(
        ids=written.ids,
        new_ids=written.ids[:, 1:],
        tokens=tokenizer.convert_ids_to_tokens(written.ids[0].tolist()),
        top_ids=written.top_ids,
        top_probs=written.top_probs,
        encoder_ids=input_ids,
        encoder_tokens=tokenizer.convert_ids_to_tokens(input_ids[0].tolist()),
        encoder_attentions=tuple(a for a in encoded.attentions if a is not None),
        decoder_attentions=decoder_maps,
        cross_attentions=cross_maps,
        checkpoint_num_beams=settings.num_beams,
    )
