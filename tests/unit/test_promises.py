"""Tests for promises that deliberate bugs once slipped past: a buffer older Llama checkpoints carry, the
batched coreference scorer on a pronoun of several pieces, and a group with nothing left to score."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import make_tiny
from families import make_family, reference
from safetensors.torch import load_file, save_file

from attention import load_model
from attention.analysis.coref import NO_ANSWER, group, parse_examples, score_example, score_heads
from attention.runs.run import run_sentence

INV_FREQ = "model.layers.{}.self_attn.rotary_emb.inv_freq"


def test_a_llama_checkpoint_with_rotary_inv_freq_loads_and_lists_it_as_ignored(tmp_path):
    folder = make_family(tmp_path / "llama", "llama")
    weights = load_file(str(folder / "model.safetensors"))
    n_layers = 2
    for layer in range(n_layers):  # as releases before transformers 4.31 saved it: a buffer of 1/θ^(2i/d)
        weights[INV_FREQ.format(layer)] = 1.0 / (500.0 ** (torch.arange(0, 8, 2).float() / 8))
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})

    model, tokenizer = load_model(folder)
    ignored = set(model.load_report.ignored_keys)
    assert {INV_FREQ.format(layer) for layer in range(n_layers)} <= ignored
    ids = tokenizer("The animal didn't cross the street.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ours = model(ids).last_hidden_state
        theirs = reference(folder)(ids).last_hidden_state
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_batched_coreference_equals_one_by_one_on_a_pronoun_of_several_pieces(minilm):
    model, tokenizer = minilm
    lines = [  # "themself" is three pieces (them ##sel ##f), "it" one: one batch mixes the two
        {
            "text": "The nurse told the patient that themself was late.",
            "pronoun": "themself",
            "candidates": ["nurse", "patient"],
            "answer": "nurse",
        },
        {
            "text": "The animal didn't cross the street because it was too tired.",
            "pronoun": "it",
            "candidates": ["animal", "street"],
            "answer": "animal",
        },
        {
            "text": "The chef thanked the waiter because themself had cooked all night long.",
            "pronoun": "themself",
            "candidates": ["chef", "waiter"],
            "answer": "chef",
        },
    ]
    examples = parse_examples("\n".join(json.dumps(x) for x in lines))
    assert len(tokenizer.tokenize("themself")) == 3
    result = score_heads(model, tokenizer, examples, batch_size=3)
    assert len(result.details) == 3
    for ex, detail in zip(examples, result.details):
        run = run_sentence(model, tokenizer, ex.text)
        enc = run.encoded
        alone = score_example(ex, run.attentions, enc.tokens, enc.word_ids, enc.offsets)
        assert len(alone.located.pronoun) == len(tokenizer.tokenize(ex.pronoun))
        np.testing.assert_allclose(detail.attention, alone.attention, atol=1e-6)
        assert (detail.correct == alone.correct).all()


def test_a_group_whose_examples_are_all_unanswered_or_excluded_is_kept_with_n_zero(tmp_path):
    model, tokenizer = load_model(make_tiny(tmp_path / "tiny"))  # 64 positions
    short = "the cat sat on the mat because it was tired ."
    long_text = short + " " + "the dog ran . " * 20 + " the mouse ran because it was big ."
    lines = [
        {"text": short, "pronoun": "it", "candidates": ["cat", "mat"], "answer": "cat", "kind": "scored"},
        {"text": short, "pronoun": "it", "candidates": ["cat", "mat"], "answer": None, "kind": "left out"},
        {
            "text": long_text,
            "pronoun": "it",
            "pronoun_occurrence": 2,
            "candidates": ["mouse", "dog"],
            "answer": "mouse",
            "kind": "left out",
        },
    ]
    examples = parse_examples("\n".join(json.dumps(x) for x in lines))
    result = score_heads(model, tokenizer, examples, by="kind")
    groups = group(result, "kind")
    assert list(groups) == ["scored", "left out"]
    assert result.by_group is not None and list(result.by_group) == ["scored", "left out"]
    left_out = groups["left out"]
    assert left_out.n == 0
    assert sorted(e.index for e in left_out.excluded) == [1, 2]
    assert left_out.excluded_counts == {"a mention lies past the first 64 tokens": 1, NO_ANSWER: 1}
    assert groups["scored"].n == 1


@pytest.mark.parametrize("pieces", [1, 3])
def test_one_by_one_scores_average_the_pronoun_rows(minilm, pieces):
    """The one-by-one scorer the batched one is checked against: the pronoun's rows are averaged, by hand."""
    model, tokenizer = minilm
    pronoun = "it" if pieces == 1 else "themself"
    text = f"The nurse told the patient that {pronoun} was late."
    ex = parse_examples(
        json.dumps({"text": text, "pronoun": pronoun, "candidates": ["nurse", "patient"], "answer": "nurse"})
    )[0]
    run = run_sentence(model, tokenizer, text)
    enc = run.encoded
    score = score_example(ex, run.attentions, enc.tokens, enc.word_ids, enc.offsets)
    rows = score.located.pronoun
    assert len(rows) == pieces
    nurse = score.located.candidates[0]
    by_hand = run.attentions[:, :, rows][:, :, :, nurse].sum(-1).mean(-1)  # (n_layers, H)
    np.testing.assert_allclose(score.attention[..., 0], by_hand, atol=1e-6)
