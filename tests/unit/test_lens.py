"""The logit lens (attention/analysis/lens.py) against transformers' task models on the same tiny checkpoints: each
layer's hidden state through their final norm and LM head (Gemma2's logit cap, BART's final_logits_bias, T5's
scale included), the last layer equal to their own next-token probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import DECODER_CONFIGS, MORE_CONFIGS, make_family, make_more, make_seq2seq

from attention import load_model
from attention.analysis.lens import logit_lens
from attention.errors import ModelLoadError
from attention.writing.generate import generate

TEXT = "The cat sat on the mat."
CAUSAL = ("gpt2", "llama", "gemma2")  # a final ln_f, an RMSNorm with grouped-query heads, a logit soft-cap
SEQ2SEQ = ("bart", "t5")  # a decoder with no final norm and a logits bias; a final norm and a scaled tied head
TOP = 5


def _build(folder, name: str) -> None:
    if name in SEQ2SEQ:
        make_seq2seq(folder, name)
    elif name == "gemma2":
        make_more(folder, name)
    else:
        make_family(folder, name)


@pytest.fixture(scope="module", params=CAUSAL + SEQ2SEQ)
def case(request, tmp_path_factory):
    """(name, our model, tokenizer, transformers' eager task model)."""
    import transformers

    folder = tmp_path_factory.mktemp(request.param)
    _build(folder, request.param)
    model, tokenizer = load_model(folder)
    auto = transformers.AutoModelForSeq2SeqLM if request.param in SEQ2SEQ else transformers.AutoModelForCausalLM
    return request.param, model, tokenizer, auto.from_pretrained(str(folder), attn_implementation="eager").eval()


def reference_logits(name: str, theirs, input_ids, decoder_ids) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Each but the last layer's hidden state through transformers' final norm and LM head, (L, V) each; and
    their own logits of the whole model (L, V)."""
    with torch.no_grad():
        if name in SEQ2SEQ:
            out = theirs(input_ids, decoder_input_ids=decoder_ids, output_hidden_states=True)
            states = out.decoder_hidden_states[1:-1]
        else:
            out = theirs(input_ids, output_hidden_states=True)
            states = out.hidden_states[1:-1]
        heads = []
        for h in states:
            if name == "gpt2":
                logits = theirs.lm_head(theirs.transformer.ln_f(h))
            elif name == "bart":  # no final norm in BART's decoder
                logits = theirs.lm_head(h) + theirs.final_logits_bias
            elif name == "t5":  # the tied head reads the normed state scaled by d_model ** -0.5
                logits = theirs.lm_head(theirs.decoder.final_layer_norm(h) * theirs.config.d_model**-0.5)
            else:
                logits = theirs.lm_head(theirs.model.norm(h))
                cap = getattr(theirs.config, "final_logit_softcapping", None)
                logits = logits if cap is None else torch.tanh(logits / cap) * cap
            heads.append(logits[0])
        return heads, out.logits[0]


def _inputs(name, tokenizer):
    input_ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    decoder_ids = torch.tensor([[2, 5, 17, 40, 9, 11]]) if name in SEQ2SEQ else None
    return input_ids, decoder_ids


def assert_top(lens_ids, lens_probs, logits: torch.Tensor) -> None:
    """Our top ids and probabilities (L, top) are the reference's: its probabilities at our ids, and its top values."""
    probs = torch.softmax(logits.double(), dim=-1)  # (L, V)
    theirs_at_ours = probs.gather(-1, torch.tensor(lens_ids))  # (L, top)
    # probabilities of float32 logits that match to 1e-5 of their size, as the hidden states do
    np.testing.assert_allclose(lens_probs, theirs_at_ours, atol=1e-6, rtol=0)
    np.testing.assert_allclose(lens_probs, probs.topk(TOP, dim=-1).values, atol=1e-6, rtol=0)


def test_each_layer_is_read_through_the_final_norm_and_head(case):
    name, model, tokenizer, theirs = case
    input_ids, decoder_ids = _inputs(name, tokenizer)
    lens = logit_lens(model, input_ids, top=TOP, decoder_input_ids=decoder_ids)
    layers = len(model.decoder.layers) if name in SEQ2SEQ else len(model.layers)
    length = (decoder_ids if name in SEQ2SEQ else input_ids).size(1)
    assert lens.ids.shape == lens.probs.shape == (layers, length, TOP)
    middle, last = reference_logits(name, theirs, input_ids, decoder_ids)
    for i, logits in enumerate(middle):
        assert_top(lens.ids[i], lens.probs[i], logits)
    assert_top(lens.ids[-1], lens.probs[-1], last)  # the model's own next-token distribution
    assert not np.array_equal(lens.ids[0], lens.ids[-1])  # the layers say different things


def test_small_tiles_give_the_same_lens(case, monkeypatch):
    """The head reads the states a tile at a time (lens.ROW_TILE states by lens.VOCAB_TILE ids): three rows, so that
    row tiles end inside a layer, by three ids (fewer than the top five) or seven (a narrower last tile), give every
    layer as the references do."""
    name, model, tokenizer, theirs = case
    input_ids, decoder_ids = _inputs(name, tokenizer)
    assert model.config.vocab_size % 7  # the last tile of seven is narrower
    middle, last = reference_logits(name, theirs, input_ids, decoder_ids)
    monkeypatch.setattr("attention.analysis.lens.ROW_TILE", 3)
    for width in (3, 7):
        monkeypatch.setattr("attention.analysis.lens.VOCAB_TILE", width)
        lens = logit_lens(model, input_ids, top=TOP, decoder_input_ids=decoder_ids)
        for i, logits in enumerate([*middle, last]):
            assert_top(lens.ids[i], lens.probs[i], logits)


def test_the_last_layer_is_what_the_model_writes_with(case):
    name, model, tokenizer, _ = case
    input_ids, _ = _inputs(name, tokenizer)
    # two new tokens: BART's generation config forces </s> at the last one, so the first is the model's own
    written = generate(model, tokenizer, TEXT, max_new_tokens=2, top=TOP, keep_maps=False)
    start = None  # an encoder-decoder writes its first token from the decoder's start token alone
    if name in SEQ2SEQ:
        start = torch.tensor([[model.config.encoder_decoder.decoder_start_token_id]])
    lens = logit_lens(model, input_ids, top=TOP, decoder_input_ids=start)
    np.testing.assert_array_equal(lens.ids[-1, -1], written.top_ids[0].numpy())
    np.testing.assert_allclose(lens.probs[-1, -1], written.top_probs[0].numpy(), atol=1e-6, rtol=0)


def test_an_encoder_and_bad_input_are_refused(tmp_path, case):
    name, model, tokenizer, _ = case
    input_ids, decoder_ids = _inputs(name, tokenizer)
    for top in (0, 10**6, 2.5, True):
        with pytest.raises(ValueError, match="top must be an integer from 1 to"):
            logit_lens(model, input_ids, top=top, decoder_input_ids=decoder_ids)
    with pytest.raises(ValueError, match="one sequence"):
        logit_lens(model, input_ids.repeat(2, 1), decoder_input_ids=decoder_ids)
    if name in SEQ2SEQ:
        with pytest.raises(ValueError, match="give decoder_input_ids"):
            logit_lens(model, input_ids)
    encoder, _ = load_model(make_family(tmp_path / "bert", "bert"))
    with pytest.raises(ModelLoadError, match="bert is an encoder with none: choose a causal decoder"):
        logit_lens(encoder, input_ids[:, :3])


EVERY_CAUSAL = tuple(
    n for n in (*DECODER_CONFIGS, *MORE_CONFIGS) if n not in ("xlm-roberta", "modernbert", "deberta-v2")
)


@pytest.mark.parametrize("name", EVERY_CAUSAL)
def test_every_causal_familys_last_layer_is_its_next_token_distribution(tmp_path, name):
    import transformers

    (make_more if name in MORE_CONFIGS else make_family)(tmp_path, name)
    model, tokenizer = load_model(tmp_path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    input_ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    lens = logit_lens(model, input_ids, top=TOP)
    with torch.no_grad():
        logits = theirs(input_ids).logits[0]  # (L, V)
    assert lens.ids.shape == (len(model.layers), input_ids.size(1), TOP)
    assert_top(lens.ids[-1], lens.probs[-1], logits)
