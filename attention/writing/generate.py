"""Text written by our own model: a causal decoder (GPT-2, Llama, Mistral, Qwen2, Qwen3, GPT-NeoX, OPT, OLMo2, Phi,
Phi-3, Gemma, Gemma2, Gemma3) continues a prompt token by token, greedily or by sampling, as transformers'
`generate` does.

The LM head is read from the checkpoint the model came from (its own `lm_head.weight`, GPT-NeoX's
`embed_out.weight`, or, when the checkpoint ties it and saves none, the word embeddings), its logits capped by
final_logit_softcapping for Gemma2, Gemma3 and Gemma 4 as their task models cap them, once per model: `lm_head`
keeps it with the model for the next calls. Each new token costs one position: the layers keep the keys and values
of the positions before it (models/decoding.py) in buffers made once (search.BufferedCache). Each step keeps its maps,
compact (search.StepMaps): the prompt's (1, H, P, P), then each new token's row (1, H, 1, S), as transformers'
generate(output_attentions=True) keeps them; once the last token is chosen one more step, with no LM head, gives
its rows. The cache is freed, then each layer's rows are laid out as its (1, H, T, T) map of the whole sequence.

At each step the next-token scores pass, in transformers' order, the checkpoint's generation config
(processors.py), then temperature, top-k and top-p; greedy search takes the most probable token, sampling
draws from the same probabilities (search.py). The checkpoint's end-of-sequence ids stop it. A causal
checkpoint whose generation config asks for beam search (num_beams > 1) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ..core.mha import KeyValueCache
from ..errors import ModelLoadError
from ..models import FAMILIES, EncoderDecoder, Transformer
from ..models.decoding import decode
from ..runs.bigrun import BIG_RUN_BYTES, maps_bytes, within_bound
from ..runs.inputs import on_model_device, within_positions
from .generate_seq2seq import Seq2SeqGeneration, generate_seq2seq, load_seq2seq_head
from .processors import settings_of
from .search import BufferedCache, LMHead, Sampling, StepMaps, by_columns, check_options, head_source, kept_head, search

KEEP_LESS = "Write fewer tokens or from a shorter prompt, or with keep_maps=False (no map kept) or maps_bound=None."
# families whose LM head caps its logits by config.json's final_logit_softcapping, and transformers' default for it
LOGIT_CAPS = {"gemma2": 30.0, "gemma3_text": None, "gemma4_text": None}


def load_lm_head(model: Transformer) -> LMHead:
    """The LM head of the checkpoint `model` was loaded from (by load_model), strictly: its weight (V, E) and
    bias (V,) if saved, nothing else under the head's name; a head left out must be tied to the word embeddings
    (tie_word_embeddings not false). Gemma2's and Gemma3's logits are capped (LOGIT_CAPS). A ModelLoadError names
    what is wrong."""
    report = getattr(model, "load_report", None)
    family = FAMILIES.get(model.config.model_type)
    if report is None or family is None or not family.tied or not model.config.attention.causal:
        raise ModelLoadError("only a causal decoder loaded by load_model has an LM head to read")
    name = family.tied[0][1]  # "lm_head.weight", GPT-NeoX's "embed_out.weight"
    root = name.removesuffix("weight")
    checkpoint, values = head_source(report)
    extra = [n for n in checkpoint if n.startswith(root) and n not in (name, root + "bias")]
    if extra:
        raise ModelLoadError(f"the checkpoint's LM head has tensors this model does not use: {', '.join(extra)}")
    embeddings = model.embeddings.word_embeddings.weight  # (V, E)
    if name in checkpoint:
        weight = by_columns(checkpoint[name].to(dtype=embeddings.dtype, device=embeddings.device))
    elif values.get("tie_word_embeddings") is False:
        raise ModelLoadError(f"the checkpoint has no '{name}' and does not tie it to the word embeddings")
    else:  # tied: the checkpoint saved the matrix once, as the word embeddings
        weight = lay_out_by_columns(model.embeddings.word_embeddings)
    if weight.shape != embeddings.shape:
        raise ModelLoadError(f"'{name}' is {tuple(weight.shape)}, expected {tuple(embeddings.shape)}")
    bias = checkpoint.get(root + "bias")
    if bias is not None:
        if tuple(bias.shape) != (embeddings.size(0),):
            raise ModelLoadError(f"'{root}bias' is {tuple(bias.shape)}, expected {(embeddings.size(0),)}")
        bias = bias.to(dtype=embeddings.dtype, device=embeddings.device)
    kind = model.config.model_type
    cap = values.get("final_logit_softcapping", LOGIT_CAPS[kind]) if kind in LOGIT_CAPS else None
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap <= 0):
        raise ModelLoadError(f"final_logit_softcapping should be a positive number or null, not {cap!r}")
    return LMHead(weight, bias, cap=cap)


def lay_out_by_columns(table: torch.nn.Embedding) -> torch.Tensor:
    """A causal decoder's word-embedding table, the head it is tied to, laid out by columns (search.by_columns) in
    place, once: the same values, so every output stays the same. Its head's product with one hidden state then
    reads it faster (1.1-1.2 times for GPT-2 small's; bench/generate.py), while a lookup of token rows from it gathers
    each row's values from across the table (512 tokens' rows: about 3 ms instead of 0.1 ms, against a forward pass
    of hundreds). The new layout is a copy: the first time the head is read, the table is held twice for a moment."""
    if table.weight.stride(0) != 1:
        table.weight = torch.nn.Parameter(by_columns(table.weight.detach()), requires_grad=table.weight.requires_grad)
    return table.weight


def lm_head(model: Transformer | EncoderDecoder) -> LMHead:
    """The LM head generate uses: load_lm_head's (a causal decoder) or load_seq2seq_head's (an encoder-decoder),
    read from the checkpoint on the first call for `model` and kept with it after (search.kept_head)."""
    if isinstance(model, EncoderDecoder):
        return kept_head(model, model.decoder.embeddings.word_embeddings.weight, load_seq2seq_head)
    return kept_head(model, model.embeddings.word_embeddings.weight, load_lm_head)


@dataclass(frozen=True)
class Generation:
    ids: torch.Tensor  # (1, T): the prompt's ids, then the new ones
    new_ids: torch.Tensor  # (1, n_new)
    tokens: list[str]  # the T tokens
    top_ids: torch.Tensor  # (n_new, top): at each step the most probable next tokens, best first
    top_probs: torch.Tensor  # (n_new, top): their probabilities, those the choice was made from
    attentions: tuple[torch.Tensor, ...]  # n_layers maps (1, H, T, T) of the whole sequence; () without keep_maps


def generate(
    model: Transformer | EncoderDecoder,
    tokenizer,
    text: str,
    max_new_tokens: int = 20,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    top: int = 5,
    keep_maps: bool = True,
    maps_bound: int | None = BIG_RUN_BYTES,
    forced: Mapping[int, int] | None = None,
) -> Generation | Seq2SeqGeneration:
    """`text` continued by up to `max_new_tokens` tokens (fewer when an end-of-sequence token comes): greedy,
    or sampled (do_sample) with a torch generator seeded by `seed`. An encoder-decoder writes its decoder's
    sequence from `text` encoded (generate_seq2seq.py). See the module's docstring.

    The maps kept are sized before the work: a writing whose every map (the prompt's and the new tokens',
    bigrun.maps_bytes) would be more than `maps_bound` bytes (the server's BIG_RUN_BYTES unless given; None: no
    bound) is refused (bigrun.KeepsTooMuch).
    `keep_maps=False` writes the same tokens with no map made (torch's fused attention at every step) and
    `attentions` is () (the page reads the written ids' maps through its own runs, one layer at a time).
    `forced` (a causal decoder's): new token number → the id written there in place of the model's choice (a
    branch of the text, search.search's); an id outside the vocabulary is a ValueError."""
    check_options(max_new_tokens, temperature, top_k, top_p, top)
    positions = model.config.max_position_embeddings
    (prompt,) = within_positions(positions, text)
    (ids,) = on_model_device(model, tokenizer(prompt, return_tensors="pt")["input_ids"])  # (1, L)
    assert ids is not None
    if isinstance(model, EncoderDecoder):  # the text is the encoder's source
        options = (max_new_tokens, do_sample, temperature, top_k, top_p, seed, top)
        return generate_seq2seq(model, tokenizer, ids, *options, keep_maps=keep_maps, maps_bound=maps_bound)
    settings = settings_of(model)
    if settings.num_beams > 1:
        raise ValueError(f"beam search (num_beams={settings.num_beams}) is not supported: only greedy and sampling")
    head = lm_head(model)
    if ids.size(1) + max_new_tokens > positions:
        raise ValueError(f"{ids.size(1)} prompt tokens and {max_new_tokens} new ones exceed {positions} positions")
    if keep_maps:
        heads, longest = model.config.num_attention_heads, ids.size(1) + max_new_tokens
        within_bound("Writing", maps_bytes(len(model.layers), heads, longest), KEEP_LESS, maps_bound)
    sampling = Sampling.seeded(do_sample, temperature, top_k, top_p, seed, ids.device)
    cache: list[KeyValueCache] = [BufferedCache(ids.size(1) + max_new_tokens) for _ in model.layers]
    rows = StepMaps(sum(range(ids.size(1) + 1, ids.size(1) + max_new_tokens + 1)))  # keys of every new row

    def logits_after(new: torch.Tensor) -> torch.Tensor:
        out = decode(model, new, cache, keep_maps=keep_maps)
        if keep_maps:
            rows.add(out.attentions)  # (1, H, L, P + L) per layer
        assert out.last_hidden_state is not None
        return head(out.last_hidden_state[:, -1])  # (1, V)

    with torch.inference_mode():
        written = search(logits_after, ids, settings, sampling, max_new_tokens, top, forced)
        if keep_maps:
            rows.add(decode(model, written.ids[:, -1:], cache, keep_maps=True).attentions)  # the last token's rows
        cache.clear()  # freed before the maps are laid out
        attentions = rows.squares()  # (1, H, T, T) per layer; () when none were kept
    n_new = written.top_ids.size(0)
    return Generation(
        ids=written.ids,
        new_ids=written.ids[:, -n_new:],
        tokens=tokenizer.convert_ids_to_tokens(written.ids[0].tolist()),
        top_ids=written.top_ids,
        top_probs=written.top_probs,
        attentions=attentions,
    )
