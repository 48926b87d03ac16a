"""Merging word pieces into the words as written: a contraction is one word for every tokenizer family
(BERT's WordPiece, byte-level BPE's Ġ, SentencePiece's ▁), its sentence's punctuation stays apart."""

from __future__ import annotations

import numpy as np
import pytest
from families import write_bpe_tokenizer

from attention.runs.aggregate import merge_labels, merge_word_pieces, written_words
from attention.runs.inputs import encode

SENTENCE = "The animal didn't cross the street because it was too tired."


def words(tokenizer, text: str, pair: str | None = None) -> list[str]:
    enc = encode(tokenizer, text, pair)
    return merge_labels(enc.tokens, written_words(enc.tokens, enc.word_ids, enc.offsets))


def test_wordpiece_contraction_is_one_word(minilm):
    tokenizer = minilm[1]
    enc = encode(tokenizer, SENTENCE)
    at = enc.tokens.index("didn")
    assert enc.tokens[at : at + 3] == ["didn", "'", "t"] and len(set(enc.word_ids[at : at + 3])) == 3  # 3 words
    assert words(tokenizer, SENTENCE) == [
        "[CLS]",
        "the",
        "animal",
        "didn't",
        "cross",
        "the",
        "street",
        "because",
        "it",
        "was",
        "too",
        "tired",
        ".",
        "[SEP]",
    ]


def test_wordpiece_punctuation_at_a_words_edge_stays_apart_and_inside_joins(minilm):
    assert words(minilm[1], '"Yes," (it) e-mail it\'s.') == [
        "[CLS]",
        '"',
        "yes",
        ",",
        '"',
        "(",
        "it",
        ")",
        "e-mail",
        "it's",
        ".",
        "[SEP]",
    ]


def test_a_pairs_second_sentence_never_joins_the_first(minilm):
    assert words(minilm[1], "It was.", "Fine.") == ["[CLS]", "it", "was", ".", "[SEP]", "fine", ".", "[SEP]"]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """GPT-2's framing: no special tokens, and each word's offsets take in the space before it."""
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("bpe")
    write_bpe_tokenizer(folder, roberta=False)
    return AutoTokenizer.from_pretrained(str(folder))


def test_byte_level_bpe_contraction_is_one_word_and_spaces_part_words(bpe):
    enc = encode(bpe, SENTENCE)
    assert "'t" in enc.tokens and len(set(enc.word_ids)) == 13  # Ġdidn and 't are two words by word_ids
    assert words(bpe, SENTENCE) == [
        "The",
        "Ġanimal",
        "Ġdidn't",
        "Ġcross",
        "Ġthe",
        "Ġstreet",
        "Ġbecause",
        "Ġit",
        "Ġwas",
        "Ġtoo",
        "Ġtired",
        ".",
    ]


def test_byte_level_bpe_pair(bpe):
    assert words(bpe, "It was.", "Fine.") == ["It", "Ġwas", ".", "Fine", "."]


def test_sentencepiece_marker_starts_a_word():
    """▁ marks a piece after a space, whose offsets (like byte-level BPE's here) take in that space."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tok.train_from_iterator([SENTENCE] * 4, trainers.BpeTrainer(vocab_size=80, special_tokens=["<unk>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    enc = encode(tokenizer, SENTENCE)
    assert enc.tokens[enc.tokens.index("'") + 2].startswith("▁")  # ▁didn ' t ▁cross: three words, then one
    assert offsets_touch(enc, enc.tokens.index("'") + 2)
    assert words(tokenizer, SENTENCE) == [
        "▁The",
        "▁animal",
        "▁didn't",
        "▁cross",
        "▁the",
        "▁street",
        "▁because",
        "▁it",
        "▁was",
        "▁too",
        "▁tired",
        ".",
    ]


def offsets_touch(enc, position: int) -> bool:
    return enc.offsets[position - 1][1] == enc.offsets[position][0]


def test_merged_map_of_written_words(minilm):
    enc = encode(minilm[1], SENTENCE)
    attn = np.random.default_rng(0).dirichlet(np.ones(len(enc.tokens)), size=len(enc.tokens))
    merged, groups = merge_word_pieces(attn, enc.word_ids, enc.tokens, enc.offsets)
    didnt = enc.tokens.index("didn")
    assert [didnt, didnt + 1, didnt + 2] in groups and merged.shape == (len(enc.tokens) - 2,) * 2
    np.testing.assert_allclose(merged.sum(1), 1, rtol=1e-6)
    unit = groups.index([didnt, didnt + 1, didnt + 2])
    np.testing.assert_allclose(merged[0, unit], attn[0, didnt : didnt + 3].sum())
    with pytest.raises(ValueError, match="both or neither"):
        merge_word_pieces(attn, enc.word_ids, enc.tokens)
