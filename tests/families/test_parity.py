"""Our encoder gives transformers' numbers: every hidden state and every attention map."""

import pytest
import torch
from conftest import reference_model

from attention import encode, load_bert

HIDDEN_TOL = dict(atol=1e-5, rtol=0)
ATTN_TOL = dict(atol=1e-6, rtol=0)
SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]


def compare(ours, theirs, input_ids, attention_mask=None, token_type_ids=None, lengths=None):
    """Run both models; compare each hidden state and attention map over the unpadded positions."""
    with torch.no_grad():
        mine = ours(input_ids, attention_mask, token_type_ids)
        ref = theirs(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_attentions=True,
            output_hidden_states=True,
        )
    n_layers = ours.config.num_hidden_layers
    assert len(mine.hidden_states) == n_layers + 1 == len(ref.hidden_states)
    assert len(mine.attentions) == n_layers == len(ref.attentions)
    lengths = lengths or [input_ids.shape[1]] * input_ids.shape[0]
    for b, n in enumerate(lengths):
        for a, r in zip(mine.hidden_states, ref.hidden_states):
            torch.testing.assert_close(a[b, :n], r[b, :n], **HIDDEN_TOL)
        for a, r in zip(mine.attentions, ref.attentions):
            torch.testing.assert_close(a[b, :, :n, :n], r[b, :, :n, :n], **ATTN_TOL)
            # padding keys get no attention at all
            assert torch.all(a[b, :, :n, n:] == 0)
    torch.testing.assert_close(mine.last_hidden_state, mine.hidden_states[-1], atol=0, rtol=0)
    return mine


@pytest.fixture(scope="module", params=["minilm", "tiny"])
def pair(request, minilm, tiny_dir):
    if request.param == "minilm":
        model, tokenizer = minilm
        return model, tokenizer, reference_model(model.load_report.path)
    model, tokenizer = load_bert(tiny_dir)
    return model, tokenizer, reference_model(tiny_dir)


def test_single_sentences(pair):
    ours, tokenizer, theirs = pair
    for text in SENTENCES:
        enc = encode(tokenizer, text)
        out = compare(ours, theirs, enc.input_ids, enc.attention_mask, enc.token_type_ids)
        L = enc.input_ids.shape[1]
        H = ours.config.num_attention_heads
        assert out.attentions[0].shape == (1, H, L, L)
        assert out.last_hidden_state.shape == (1, L, ours.config.hidden_size)


def test_sentence_pair_uses_token_types(pair):
    ours, tokenizer, theirs = pair
    enc = encode(tokenizer, SENTENCES[0], SENTENCES[1])
    assert enc.token_type_ids.sum() > 0  # segment B is marked
    compare(ours, theirs, enc.input_ids, enc.attention_mask, enc.token_type_ids)
    # and the segment ids matter: without them the result differs
    with torch.no_grad():
        without = ours(enc.input_ids, enc.attention_mask)
        with_types = ours(enc.input_ids, enc.attention_mask, enc.token_type_ids)
    assert not torch.allclose(without.last_hidden_state, with_types.last_hidden_state)


def test_padded_batch(pair):
    ours, tokenizer, theirs = pair
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    lengths = batch["attention_mask"].sum(1).tolist()
    assert lengths[0] != lengths[1]
    compare(ours, theirs, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], lengths)


def test_padding_does_not_change_the_short_sentence(pair):
    ours, tokenizer, _ = pair
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    alone = encode(tokenizer, SENTENCES[1])
    n = alone.input_ids.shape[1]
    with torch.no_grad():
        padded = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        single = ours(alone.input_ids, alone.attention_mask, alone.token_type_ids)
    torch.testing.assert_close(padded.attentions[-1][1, :, :n, :n], single.attentions[-1][0], **ATTN_TOL)
    torch.testing.assert_close(padded.last_hidden_state[1, :n], single.last_hidden_state[0], **HIDDEN_TOL)


def test_causal_what_if_sees_only_the_past(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, SENTENCES[0])
    with torch.no_grad():
        normal = model(enc.input_ids, enc.attention_mask, enc.token_type_ids)
        causal = model(enc.input_ids, enc.attention_mask, enc.token_type_ids, causal=True)
    for probs in causal.attentions:
        assert torch.all(probs[0].triu(diagonal=1) == 0)
        torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]))
    # the first token sees only itself in every layer; later rows change
    assert torch.all(causal.attentions[2][0, :, 0, 0] == 1)
    assert not torch.allclose(causal.attentions[0], normal.attentions[0])
