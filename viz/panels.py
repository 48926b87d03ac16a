"""What a notebook view draws: one panel per kind of attention (self, or encoder / decoder / cross)."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from viz._maps import layer_maps
from viz._text import escape_all, readable_all


@dataclass(frozen=True)
class Panel:
    """One kind of attention: ``maps`` (n_layers, H, L, S) over escaped ``queries`` (L) and ``keys`` (S)."""

    name: str  # "" for a model's only kind; else "Encoder", "Decoder", "Cross"
    maps: np.ndarray
    queries: list[str]
    keys: list[str]
    first_new: int | None = None  # a generation's first written token, where its prompt ends

    @property
    def n_layers(self) -> int:
        return self.maps.shape[0]

    @property
    def n_heads(self) -> int:
        return self.maps.shape[1]

    def axis_titles(self) -> tuple[str, str]:
        """(key axis, query axis) titles: cross-attention's queries are the decoder's, its keys the encoder's."""
        if not self.name:
            return ("key · written after the line", "query") if self.first_new is not None else ("key", "query")
        if self.name == "Cross":
            return "cross: encoder key", "decoder query"
        return f"{self.name.lower()} key", f"{self.name.lower()} query"


def panels(
    attentions=None,
    tokens=None,
    *,
    encoder_attention=None,
    decoder_attention=None,
    cross_attention=None,
    encoder_tokens=None,
    decoder_tokens=None,
    prettify_tokens: bool = True,
) -> list[Panel]:
    """The panels of a view, from a model's attentions and tokens or a seq2seq model's three kinds.

    ``attentions`` may also be a whole output: an encoder-decoder's (ours or transformers', anything with
    ``encoder_attentions``, ``decoder_attentions`` and ``cross_attentions``) with ``encoder_tokens`` and
    ``decoder_tokens`` (or ``tokens`` as that pair), or ``attention.generate``'s result, which carries its
    tokens; a causal model's result marks its written tokens (``Panel.first_new``).
    """
    seq2seq = (encoder_attention, decoder_attention, cross_attention)
    if attentions is not None and any(a is not None for a in seq2seq):
        raise ValueError("give either attentions or encoder/decoder/cross attentions, not both")
    first_new = None
    if hasattr(attentions, "cross_attentions"):
        kinds = _seq2seq_output(attentions, tokens, encoder_tokens, decoder_tokens)
        attentions, (encoder_attention, decoder_attention, cross_attention, encoder_tokens, decoder_tokens) = (
            None,
            kinds,
        )
    elif hasattr(attentions, "new_ids"):  # a causal model's generation: its prompt, then what it wrote
        tokens = attentions.tokens if tokens is None else tokens
        n_new = int(attentions.new_ids.shape[-1])
        first_new = len(tokens) - n_new if n_new else None
    tidy = readable_all if prettify_tokens else list
    if attentions is not None:
        if tokens is None:
            raise ValueError("tokens are needed with attentions")
        names = escape_all(tidy(tokens))
        return [_checked(Panel("", layer_maps(attentions), names, names, first_new))]
    if all(a is None for a in (encoder_attention, decoder_attention, cross_attention)):
        raise ValueError("no attentions given: run the model with output_attentions=True")
    encoder = escape_all(tidy(encoder_tokens)) if encoder_tokens is not None else None
    decoder = escape_all(tidy(decoder_tokens)) if decoder_tokens is not None else None
    out = []
    for name, maps, queries, keys, needed in (
        ("Encoder", encoder_attention, encoder, encoder, "encoder_tokens"),
        ("Decoder", decoder_attention, decoder, decoder, "decoder_tokens"),
        ("Cross", cross_attention, decoder, encoder, "encoder_tokens and decoder_tokens"),
    ):
        if maps is None:
            continue
        if queries is None or keys is None:
            raise ValueError(f"{name.lower()} attention needs {needed}")
        out.append(_checked(Panel(name, layer_maps(maps), queries, keys)))
    return out


def _seq2seq_output(output, tokens, encoder_tokens, decoder_tokens) -> tuple:
    """(encoder, decoder, cross attentions, encoder tokens, decoder tokens) of an encoder-decoder's output;
    the tokens given win over a generation's own."""
    if isinstance(tokens, (tuple, list)) and len(tokens) == 2 and not isinstance(tokens[0], str):
        encoder_tokens = tokens[0] if encoder_tokens is None else encoder_tokens
        decoder_tokens = tokens[1] if decoder_tokens is None else decoder_tokens
    elif tokens is not None:
        raise ValueError("an encoder-decoder's output takes encoder_tokens and decoder_tokens, not one list of tokens")
    if encoder_tokens is None:
        encoder_tokens = getattr(output, "encoder_tokens", None)
    if decoder_tokens is None and hasattr(output, "encoder_tokens"):  # a generation: .tokens are the decoder's
        decoder_tokens = output.tokens
    return output.encoder_attentions, output.decoder_attentions, output.cross_attentions, encoder_tokens, decoder_tokens


def _checked(panel: Panel) -> Panel:
    _, _, n_q, n_k = panel.maps.shape
    if (n_q, n_k) != (len(panel.queries), len(panel.keys)):
        what = f"{panel.name.lower()} attention" if panel.name else "attention"
        raise ValueError(
            f"{what} maps are {n_q} × {n_k} but {len(panel.queries)} query and {len(panel.keys)} key tokens were given"
        )
    return panel


def chosen_layers(panels_: Sequence[Panel], include_layers: Sequence[int] | None) -> list[int]:
    """The layers a view offers: ``include_layers`` as given, else every layer of the deepest panel."""
    deepest = max(p.n_layers for p in panels_)
    layers = list(range(deepest)) if include_layers is None else [int(i) for i in include_layers]
    bad = [i for i in layers if not 0 <= i < deepest]
    if bad or not layers:
        raise ValueError(f"include_layers {list(include_layers or [])} must name layers 0–{deepest - 1}")
    return layers


def pair_blocks(n_tokens: int, sentence_b_start: int | None) -> dict[str, tuple[slice, slice]]:
    """bertviz's filter of a sentence pair: "All" and each (query sentence → key sentence) block."""
    blocks = {"All": (slice(0, n_tokens), slice(0, n_tokens))}
    if sentence_b_start is None:
        return blocks
    if not 0 < sentence_b_start < n_tokens:
        raise ValueError(f"sentence_b_start {sentence_b_start} must fall inside the {n_tokens} tokens")
    a, b = slice(0, sentence_b_start), slice(sentence_b_start, n_tokens)
    blocks.update({"A → A": (a, a), "A → B": (a, b), "B → A": (b, a), "B → B": (b, b)})
    return blocks
