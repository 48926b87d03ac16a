"""Tokenization: the same ids as the checkpoint's own WordPiece vocabulary; truncation with a notice."""

import os

import pytest

from attention import encode

TEXTS = {
    "ascii": "The animal didn't cross the street because it was too tired.",
    "accented": "Crème brûlée à la façon de Zoë, naïve résumé.",
    "cjk": "注意力机制 是 Transformer 的核心。東京タワー",
    "emoji": "I love attention 😍🔥 heads 👀!",
}


@pytest.mark.parametrize("kind", TEXTS)
def test_same_ids_as_the_checkpoints_wordpiece_vocabulary(minilm, kind):
    """A WordPiece tokenizer built afresh from the checkpoint's vocab.txt gives the same ids as the
    tokenizer the checkpoint ships (tokenizer.json), through encode."""
    from transformers import BertTokenizer

    model, tokenizer = minilm
    from_vocab = BertTokenizer(vocab=os.path.join(model.load_report.path, "vocab.txt"), do_lower_case=True)
    assert len(from_vocab) == 30522
    text = TEXTS[kind]
    enc = encode(tokenizer, text)
    assert enc.input_ids[0].tolist() == from_vocab(text)["input_ids"]
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    assert enc.notice is None and not enc.truncated


def test_emoji_is_unknown_and_cjk_splits_per_character(minilm):
    _, tokenizer = minilm
    assert "[UNK]" in encode(tokenizer, TEXTS["emoji"]).tokens
    tokens = encode(tokenizer, "东京力").tokens  # each CJK character is its own word
    assert tokens == ["[CLS]", "[UNK]", "京", "力", "[SEP]"]


def test_words_offsets_and_segments(minilm):
    _, tokenizer = minilm
    enc = encode(tokenizer, "Embeddings work.", "It works")
    text_a, text_b = "Embeddings work.", "It works"
    assert enc.special == [t in ("[CLS]", "[SEP]") for t in enc.tokens]
    pieces = [i for i, w in enumerate(enc.word_ids) if w == 0 and enc.sequence_ids[i] == 0]
    assert len(pieces) > 1  # "embeddings" is several pieces
    start, end = enc.offsets[pieces[0]][0], enc.offsets[pieces[-1]][1]
    assert text_a[start:end] == "Embeddings"
    b = [i for i, s in enumerate(enc.sequence_ids) if s == 1]
    assert enc.token_type_ids[0, b].tolist() == [1] * len(b)
    assert text_b[enc.offsets[b[0]][0] : enc.offsets[b[0]][1]] == "It"


def test_long_input_is_truncated_with_a_notice(minilm):
    _, tokenizer = minilm
    enc = encode(tokenizer, "word " * 600)
    assert enc.input_ids.shape == (1, 512) and len(enc.tokens) == 512 and enc.tokens[-1] == "[SEP]"
    assert enc.total_tokens == 602 and enc.truncated
    assert "512" in enc.notice and "602" in enc.notice


def test_long_pair_is_truncated_too(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, "short sentence", "word " * 700)
    assert enc.input_ids.shape[1] == 512 and enc.truncated
    assert enc.sequence_ids.count(0) == 2  # the short segment is kept whole
    out = model(enc.input_ids, enc.attention_mask, enc.token_type_ids)  # runs, no error
    assert out.attentions[0].shape == (1, 12, 512, 512)


def test_smaller_limit(minilm):
    _, tokenizer = minilm
    enc = encode(tokenizer, "one two three four five six", max_length=5)
    assert len(enc.tokens) == 5 and "at most 5 positions" in enc.notice
