"""The runs the views read, computed once per input and kept in the shared stores (ui/compute/stores.py): a
sentence's run, one layer's recorded forward pass, a padded batch. A run whose every map would be more
than BIG_RUN_BYTES is a PooledRun (attention/runs/bigrun.py), whose full maps are read one layer at a time
through `big_run_loader` and kept in stores of their own. A continuation's text (a Written, ui/state/written.py)
is never tokenized: every run of it reads the ids the model wrote (`encoded_input`, `padded_inputs`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from attention.runs import bigrun
from attention.runs.bigrun import BIG_RUN_BYTES, maps_bytes
from attention.runs.inputs import encode, within_positions
from attention.runs.pooling import head_tiles
from attention.runs.run import read_only, run_batch, run_encoded, stack_attentions
from attention.tracing import trace

from ..state.written import Text, Written
from .inputs import encoded_input, token_bound
from .models import get_model, get_seq2seq
from .stores import MB, store

SHORTER_TRACE = "Try a shorter input with this model; the head view and the overview read longer ones."
SMALL_RUN_BYTES = 8 * MB  # a run whose maps are at most this (a sentence) is computed without a slot
# where a big run's pieces are kept: (store name, entries, bytes) per function of attention/runs/bigrun.py
BIG_STORES = {
    bigrun.layer_maps: ("layer-maps", 4, 300 * MB),
    bigrun.pooled_stats: ("run-stats", 32, 16 * MB),
    bigrun.layer_selection: ("layer-selections", 8, 4 * bigrun.SLICE_BYTES),
}


def get_run(source: str, text: Text, text_b: str, causal: bool = False):
    """The run of one sentence (or pair): a SentenceRun holding every map, or, when every map together
    would be more than BIG_RUN_BYTES, a PooledRun holding pooled tiles and reading one layer at a time; past
    that, where even one layer's maps would be, the LongRun the page made (ui/compute/longruns.py)."""
    from .longruns import needs_long, stored_long_run

    if needs_long(source, text, text_b):
        if causal:  # an encoder read causally (the Masks view) at this length: every map at once
            model, enc = encoded_input(source, text, text_b)
            c = model.config
            raise bigrun.NeedsSmallerInput(c.num_hidden_layers, c.num_attention_heads, len(enc.tokens))
        return stored_long_run(source, text, text_b)

    def compute():
        model, enc = encoded_input(source, text, text_b)
        c = model.config
        if maps_bytes(c.num_hidden_layers, c.num_attention_heads, len(enc.tokens)) > BIG_RUN_BYTES:
            return bigrun.pooled_run(model, enc, causal, big_run_loader((source, text, text_b, causal)), head_tiles)
        return run_encoded(model, enc, causal=causal)

    return store("runs", 32, 400 * MB).get_or_compute(
        (source, text, text_b, causal), compute, small=is_small_run(source, text, text_b)
    )


def is_small_run(source: str, text: Text, text_b: str = "") -> bool:
    """Whether every map of this input, at the most tokens it can make, is within SMALL_RUN_BYTES."""
    c = get_model(source)[0].config
    return maps_bytes(c.num_hidden_layers, c.num_attention_heads, token_bound(text, text_b)) <= SMALL_RUN_BYTES


def get_trace(source: str, texts: tuple[Text, ...], text_b: str, layer: int, head: int):
    """The recorded forward pass of one layer, for one sentence (or pair) or a padded batch. What it keeps is
    sized before the work (trace.kept_bytes): every head's maps where they fit in BIG_RUN_BYTES, else head
    `head`'s only (the walk, Query·Key and the shape flow show one head); past the bound even so, KeepsTooMuch,
    which the page shows in place of the view."""
    model, tokenizer = get_model(source)
    if len(texts) == 1:
        enc = encoded_input(source, texts[0], text_b)[1]
        inputs: Inputs = (enc.input_ids, enc.attention_mask, enc.token_type_ids)
    else:
        inputs = padded_inputs(tokenizer, texts, model.config.max_position_embeddings)[0]
    batch, n_tokens = inputs[0].shape
    kept = None if trace.kept_bytes(model, batch, n_tokens) <= BIG_RUN_BYTES else head
    if kept is not None:
        what = f"Tracing layer {layer} at {n_tokens} tokens, for one head,"
        bigrun.within_bound(what, trace.kept_bytes(model, batch, n_tokens, kept), SHORTER_TRACE, BIG_RUN_BYTES)

    def compute():
        ids, mask, types = inputs
        return trace.trace_layer(model, ids, mask, types, layer=layer, head=kept)

    return store("traces", 8, 200 * MB).get_or_compute((source, texts, text_b, layer, kept), compute)


def get_batch(source: str, texts: tuple[Text, ...]):
    def compute():
        model, tokenizer = get_model(source)
        (ids, mask, types), tokens = padded_inputs(tokenizer, texts, model.config.max_position_embeddings)
        return run_batch(model, ids, mask, types, tokens)

    return store("batches", 8, 200 * MB).get_or_compute((source, texts), compute)


# ---- an encoder-decoder's writing ----------------------------------------------------------------------

MAX_NEW_TOKENS = 40  # the most tokens a translation or summary is written to
WRITING = "The encoder-decoder's pass over this text and its target"
SHORTER_WRITING = (
    "Try a shorter sentence or target with this model; the other views read its encoder one layer at a time."
)


@dataclass(frozen=True)
class Writing:
    """An encoder-decoder's decoder sequence for one source text (written greedily, or the target given)
    with every map of the one forward pass over it: maps["cross"] (n_layers, H, T, S), maps["decoder"]
    (n_layers, H, T, T), maps["encoder"] (n_layers, H, S, S), T decoder tokens and S encoder tokens. Past
    BIG_RUN_BYTES each map is a bigrun.LayerMaps, read one layer at a time, and `pooled` holds each part's
    maps mean-pooled to at most POOL_CELLS a side (the every-layer grid's); None within the bound."""

    encoder_ids: np.ndarray  # (1, S)
    encoder_tokens: list[str]
    decoder_ids: np.ndarray  # (1, T): the start token, then the written or given tokens
    decoder_tokens: list[str]
    maps: dict[str, Any]  # np.ndarray each, or bigrun.LayerMaps past the bound
    forced: bool  # the target was given rather than written
    notice: str  # the target or the text cut to the model's positions, else ""
    checkpoint_beams: int  # the beams the checkpoint's generation config asks for; one is what runs
    pooled: dict[str, np.ndarray] | None = None

    @property
    def is_big(self) -> bool:
        return self.pooled is not None


def get_writing(source: str, text: str, target: str = "") -> Writing:
    """What the encoder-decoder of `source` writes for `text` (greedy, at most MAX_NEW_TOKENS new tokens), or
    `target` forced as its decoder's input; kept in the shared stores. What it keeps is sized before the work (at
    the most tokens it can write): within BIG_RUN_BYTES every map of one pass; past it, written with no map, then
    one pass keeping pooled maps (`_pooled_writing`), each layer read on demand; one layer past the bound even so,
    bigrun.LayerTooBig (which the page shows in place of the view)."""

    def compute():
        from attention.runs.inputs import on_model_device
        from attention.writing.generate_seq2seq import generate_seq2seq, kept_bytes, start_token
        from attention.writing.processors import settings_of

        loaded = get_seq2seq(source)
        assert loaded is not None, "get_writing reads an encoder-decoder"
        model, tokenizer = loaded
        limit = model.decoder.config.max_position_embeddings
        # the source as every view reads it: within the encoder's positions (cut, with the page's notice, past them)
        encoded = encode(tokenizer, text, max_length=model.config.max_position_embeddings)
        (input_ids,) = on_model_device(model, encoded.input_ids)  # (1, S)
        assert input_ids is not None
        S = input_ids.size(1)
        if not target:
            new = min(MAX_NEW_TOKENS, limit - 1)
            whole = kept_bytes(model, S, 1 + new) <= BIG_RUN_BYTES
            if not whole:
                _one_layer_within(model, S, 1 + new)
            out = generate_seq2seq(model, tokenizer, input_ids, max_new_tokens=new, keep_maps=whole)
            facts = (out.encoder_ids, out.encoder_tokens, out.ids, out.tokens)
            if not whole:
                return _pooled_writing(model, (source, text, target), *facts, False, "", out.checkpoint_num_beams)
            maps = [list(out.cross_attentions), list(out.decoder_attentions), list(out.encoder_attentions)]
            beams = out.checkpoint_num_beams
            del out  # each map is then held once (stack_attentions drops it from its list once copied)
            return _writing(*facts, maps, False, "", beams)
        start = start_token(model, settings_of(model))
        given = tokenizer(text_target=target)["input_ids"]
        notice = ""
        if 1 + len(given) > limit:
            notice = f"The target is {len(given)} tokens; the decoder reads {limit}, so its first {limit - 1} are used."
            given = given[: limit - 1]
        (decoder_ids,) = on_model_device(model, torch.tensor([[start, *given]]))  # (1, T)
        written = tokenizer.convert_ids_to_tokens(decoder_ids[0].tolist())
        if kept_bytes(model, S, 1 + len(given)) > BIG_RUN_BYTES:
            _one_layer_within(model, S, 1 + len(given))
            return _pooled_writing(
                model, (source, text, target), input_ids, encoded.tokens, decoder_ids, written, True, notice
            )
        with torch.inference_mode():
            out = model(input_ids, decoder_input_ids=decoder_ids)
        maps = [list(out.cross_attentions), list(out.decoder_attentions), list(out.encoder_attentions)]
        del out  # its hidden states freed, each map then held once
        return _writing(input_ids, encoded.tokens, decoder_ids, written, maps, True, notice)

    return store("writings", 16, 200 * MB).get_or_compute((source, text, target), compute)


def _one_layer_within(model, n_source: int, n_target: int) -> None:
    """Raise bigrun.LayerTooBig, before the work, when one layer's maps of any part are more than BIG_RUN_BYTES."""
    from attention.runs.seq2seq_maps import PARTS, one_layer_bytes

    largest = max(one_layer_bytes(model, part, n_source, n_target) for part in PARTS)
    if largest > BIG_RUN_BYTES:
        raise bigrun.LayerTooBig(WRITING, largest, SHORTER_WRITING)


def _writing(encoder_ids, encoder_tokens, decoder_ids, decoder_tokens, maps, forced, notice, beams=1) -> Writing:
    """`maps`: [cross, decoder, encoder], each a list of per-layer maps, emptied as they are stacked."""
    cross, decoder, encoder = (stack_attentions(m) for m in maps)
    return Writing(
        read_only(encoder_ids.cpu().numpy()),
        list(encoder_tokens),
        read_only(decoder_ids.cpu().numpy()),
        list(decoder_tokens),
        {"cross": cross, "decoder": decoder, "encoder": encoder},
        forced,
        notice,
        beams,
    )


def _pooled_writing(model, key, encoder_ids, encoder_tokens, decoder_ids, decoder_tokens, forced, notice, beams=1):
    """A writing past BIG_RUN_BYTES: one pass over its ids keeping each part's pooled maps, and each part's maps
    as a bigrun.LayerMaps whose layers `_writing_loader` reads (one layer of one part per pass)."""
    from attention.runs.seq2seq_maps import PARTS, part_shape, pooled_parts

    pooled = pooled_parts(model, encoder_ids, decoder_ids)
    S, T = encoder_ids.size(1), decoder_ids.size(1)
    ids = (tuple(encoder_ids[0].tolist()), tuple(decoder_ids[0].tolist()))
    shapes = {part: part_shape(model, part, S, T) for part in PARTS}
    maps = {
        part: bigrun.LayerMaps(_writing_loader(key, part, ids, shapes[part][:3]), *shape)
        for part, shape in shapes.items()
    }
    return Writing(
        read_only(encoder_ids.cpu().numpy()),
        list(encoder_tokens),
        read_only(decoder_ids.cpu().numpy()),
        list(decoder_tokens),
        maps,
        forced,
        notice,
        beams,
        pooled,
    )


def _writing_loader(key: tuple, part: str, ids: tuple[tuple[int, ...], tuple[int, ...]], sizes: tuple[int, ...]):
    """load(bigrun.layer_maps, layer): layer `layer`'s maps of `part` of the writing of `key` (source, text,
    target) over its `ids` (encoder's, decoder's), in a slot, kept in the big runs' layer store; any read of
    every layer at once, bigrun.NeedsSmallerInput of the part's `sizes` (n_layers, H, L_query)."""

    def load(compute, *args):
        if compute is not bigrun.layer_maps:
            raise bigrun.NeedsSmallerInput(*sizes)

        def run():
            from attention.runs.inputs import on_model_device
            from attention.runs.seq2seq_maps import part_layer

            loaded = get_seq2seq(key[0])
            assert loaded is not None
            model = loaded[0]
            encoder_ids, decoder_ids = on_model_device(model, torch.tensor([ids[0]]), torch.tensor([ids[1]]))
            return part_layer(model, encoder_ids, decoder_ids, part, *args)

        return store(*BIG_STORES[bigrun.layer_maps]).get_or_compute(("writing", *key, part, *args), run)

    return load


# ---- a big run's pieces, on demand ------------------------------------------------------------------


Inputs = tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]  # input_ids, attention_mask, token_type_ids


def padded_inputs(tokenizer, texts: tuple[Text, ...], limit: int) -> tuple[Inputs, list[list[str]]]:
    """A padded batch of `texts` as the model reads it, (input_ids, attention_mask, token_type_ids) each
    (B, S), and each item's pieces: a written text's ids as written, any other text as the tokenizer reads
    it, within `limit` positions."""
    items = []
    for text in texts:
        if isinstance(text, Written):
            ids = list(text.ids)
            items.append({"input_ids": ids, "attention_mask": [1] * len(ids), "token_type_ids": [0] * len(ids)})
        else:
            (cut,) = within_positions(limit, text)
            items.append(tokenizer(cut, truncation=True, max_length=limit, return_token_type_ids=True))
    keys = ("input_ids", "attention_mask", "token_type_ids")
    batch = tokenizer.pad([{k: item[k] for k in keys} for item in items], return_tensors="pt")
    tokens = [tokenizer.convert_ids_to_tokens(row) for row in batch["input_ids"].tolist()]
    return (batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]), tokens


def big_run_loader(key: tuple):
    """The loader of the big run of `key` (source, text, text_b, causal): load(compute, *args) runs one of
    attention/runs/bigrun.py's functions on that input, in a slot, and keeps its result in the function's store."""
    source, text, text_b, causal = key

    def load(compute, *args):
        def run():
            model, enc = encoded_input(source, text, text_b)
            return compute(model, enc, causal, *args)

        parts = tuple(_index_key(arg) if isinstance(arg, tuple) else arg for arg in args)
        return store(*BIG_STORES[compute]).get_or_compute((*key, *parts), run)

    return load


def _index_key(index: tuple) -> tuple:
    """A hashable, exact stand-in for a numpy index (slices, integers, lists and arrays of them)."""

    def part(item):
        if isinstance(item, slice):
            return ("slice", item.start, item.stop, item.step)
        if item is None or item is Ellipsis:
            return (repr(item),)
        array = np.asarray(item)
        return ("array", str(array.dtype), array.shape, tuple(array.ravel().tolist()))

    return tuple(part(item) for item in index)
