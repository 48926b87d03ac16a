"""Mentions by character offsets, examples that cannot count (no antecedent, past the token window) and
results grouped by a field."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT, make_tiny

from attention.analysis.coref import (
    NO_ANSWER,
    ExampleError,
    load_examples,
    parse_example,
    parse_examples,
    score_example,
    score_heads,
)
from attention.analysis.coref.mentions import OutsideWindow, locate

TEXT = "Henry Rosenthal met Bob at the club, and later Henry Rosenthal lent his car to Bob."


def at(word: str, nth: int = 1) -> int:
    start = -1
    for _ in range(nth):
        start = TEXT.index(word, start + 1)
    return start


SPANS = {
    "text": TEXT,
    "pronoun": {"text": "his", "start": at("his")},
    "candidates": [
        {"text": "Henry Rosenthal", "start": at("Henry Rosenthal", 2)},
        {"text": "Bob", "start": at("Bob", 2)},
    ],
    "answer": "Henry Rosenthal",
    "gender": "masculine",
    "split": "development",
}


def encode(text: str):
    """A fake tokenizer: words (and punctuation) are tokens, words longer than 5 letters split in two."""
    import re

    tokens, word_ids, offsets = ["[CLS]"], [None], [(0, 0)]
    for w, m in enumerate(re.finditer(r"\w+|[^\w\s]", text)):
        a, b = m.span()
        cuts = [a, b] if b - a <= 5 else [a, a + 3, b]
        for x, y in zip(cuts[:-1], cuts[1:]):
            tokens.append(text[x:y])
            word_ids.append(w)
            offsets.append((x, y))
    return tokens + ["[SEP]"], word_ids + [None], offsets + [(0, 0)]


def test_spans_parse_with_extra_fields_and_repeated_names():
    ex = parse_example(SPANS, 3)
    assert ex.has_spans and ex.pronoun == "his" and ex.pronoun_start == at("his")
    assert ex.candidates == ("Henry Rosenthal", "Bob") and ex.candidate_starts == (at("Henry", 2), at("Bob", 2))
    assert ex.answer_index == 0 and ex.fields == {"gender": "masculine", "split": "development"}
    assert ex.value("gender") == "masculine" and ex.value("missing") is None
    same = parse_example(
        {
            **SPANS,
            "candidates": [{"text": "Bob", "start": at("Bob")}, {"text": "Bob", "start": at("Bob", 2)}],
            "answer": 1,
        }
    )
    assert same.answer_index == 1  # two mentions of one name: the index says which
    neither = parse_example({**SPANS, "answer": None})
    assert neither.answer is None and neither.answer_index is None


def test_old_word_lines_keep_their_fields_too():
    ex = parse_example(
        {
            "text": "The cat saw the dog and it ran.",
            "pronoun": "it",
            "candidates": ["cat", "dog"],
            "answer": "Cat",
            "source": "x",
            "cue": "syntax",
        }
    )
    assert ex.answer == "Cat" and ex.answer_index == 0 and ex.fields == {"source": "x"} and ex.value("cue") == "syntax"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"pronoun": {"text": "his", "start": 999}}, "line 1: the pronoun 'his' start 999 is not inside the text"),
        (
            {"pronoun": {"text": "his", "start": 3}},
            "line 1: the pronoun 'his' is not at character 3 (the text there reads 'ry ')",
        ),
        ({"pronoun": {"text": "his"}}, "line 1: the pronoun should be a string or an object"),
        (
            {"candidates": [{"text": "Bob", "start": -1}, {"text": "Bob", "start": at("Bob")}]},
            "line 1: candidate 1 'Bob' start -1",
        ),
        (
            {"candidates": [{"text": "Henry", "start": 0}, {"text": "Henry Rosenthal", "start": 0}], "answer": 0},
            "line 1: candidate 'Henry' and candidate 'Henry Rosenthal' overlap",
        ),
        (
            {"candidates": [{"text": " Bob", "start": at("Bob") - 1}, {"text": "Henry", "start": 0}]},
            "line 1: candidate 1 text",
        ),
        ({"answer": "Bill"}, "line 1: answer 'Bill' is not one of the candidates"),
        (
            {"answer": "henry rosenthal"},
            "line 1: answer 'henry rosenthal' is not one of the candidates",
        ),  # spans: exact
        ({"answer": 2}, "line 1: answer index 2 is not one of the 2 candidates"),
        ({"pronoun_occurrence": 2}, "line 1: 'pronoun_occurrence' is for a pronoun given as a word"),
        (
            {
                "candidates": [{"text": "Bob", "start": at("Bob")}, {"text": "Bob", "start": at("Bob", 2)}],
                "answer": "Bob",
            },
            "line 1: answer 'Bob' matches several candidates: give its index instead",
        ),
    ],
)
def test_bad_spans_name_the_line_and_the_problem(change, message):
    with pytest.raises(ExampleError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_examples(json.dumps({**SPANS, **change}))


def test_a_multi_word_mention_sums_all_its_pieces_and_the_pronoun_averages_its_rows():
    ex = parse_example(SPANS)
    tokens, word_ids, offsets = encode(TEXT)
    located = locate(ex, word_ids, offsets)
    henry = [i for i, (a, b) in enumerate(offsets) if b > a and a >= at("Henry", 2) and b <= at("Henry", 2) + 15]
    assert located.candidates[0] == henry and len(henry) == 3  # Henry | Ros | enthal: the second mention's pieces
    assert located.candidates[1] == [i for i, o in enumerate(offsets) if o[0] == at("Bob", 2)]
    L = len(tokens)
    attn = np.full((1, 2, L, L), 0.0)
    p = located.pronoun[0]
    attn[0, 0, p, henry] = 0.15  # 0.45 to Henry Rosenthal in all, more than Bob's 0.3
    attn[0, 0, p, located.candidates[1]] = 0.3
    attn[0, 1, p, henry[0]] = 0.2  # only the first piece: 0.2 < 0.3
    attn[0, 1, p, located.candidates[1]] = 0.3
    score = score_example(ex, attn, tokens, word_ids, offsets)
    np.testing.assert_allclose(score.attention[0], [[0.45, 0.3], [0.2, 0.3]])
    assert score.correct.tolist() == [[True, False]]


def test_a_pronoun_in_pieces_averages_its_rows():
    text = "Anna met Maria because herself was late."
    ex = parse_example(
        {
            "text": text,
            "pronoun": {"text": "herself", "start": text.index("herself")},
            "candidates": [{"text": "Anna", "start": 0}, {"text": "Maria", "start": 9}],
            "answer": 1,
        }
    )
    tokens, word_ids, offsets = encode(text)
    located = locate(ex, word_ids, offsets)
    assert len(located.pronoun) == 2
    attn = np.zeros((1, 1, len(tokens), len(tokens)))
    a, m = located.candidates[0][0], located.candidates[1][0]
    attn[0, 0, located.pronoun[0], [a, m]] = [0.1, 0.9]
    attn[0, 0, located.pronoun[1], [a, m]] = [0.8, 0.2]
    score = score_example(ex, attn, tokens, word_ids, offsets)
    np.testing.assert_allclose(score.attention[0, 0], [0.45, 0.55])


def test_truncation_excludes_and_counts_instead_of_mis_scoring(tmp_path):
    from attention import load_bert

    model, tokenizer = load_bert(make_tiny(tmp_path / "tiny"))  # 64 positions
    short = "the cat sat on the mat because it was tired ."
    filler = "the dog ran . " * 20
    long_text = short + " " + filler + " the mouse ran because it was big ."
    far = long_text.rindex("mouse")
    lines = [
        {
            "text": short,
            "pronoun": {"text": "it", "start": short.index("it")},
            "candidates": [{"text": "cat", "start": 4}, {"text": "mat", "start": short.index("mat")}],
            "answer": "cat",
        },
        {
            "text": long_text,
            "pronoun": {"text": "it", "start": short.index("it")},  # all in the first 64 tokens
            "candidates": [{"text": "cat", "start": 4}, {"text": "mat", "start": short.index("mat")}],
            "answer": "mat",
        },
        {
            "text": long_text,
            "pronoun": {"text": "it", "start": long_text.rindex("it")},  # past the window
            "candidates": [{"text": "mouse", "start": far}, {"text": "cat", "start": 4}],
            "answer": "mouse",
        },
        {"text": long_text, "pronoun": "it", "pronoun_occurrence": 2, "candidates": ["cat", "mouse"], "answer": "cat"},
        {"text": short, "pronoun": "it", "candidates": ["cat", "mat"], "answer": None},
    ]
    examples = parse_examples("\n".join(json.dumps(x) for x in lines))
    with pytest.raises(OutsideWindow):
        tokens = tokenizer(long_text, truncation=True, max_length=64, return_offsets_mapping=True)
        locate(examples[2], tokens.word_ids(), tokens["offset_mapping"])
    result = score_heads(model, tokenizer, examples)
    assert [d.index for d in result.details] == [0, 1] and result.n == 2
    assert [(e.index, e.reason) for e in result.excluded] == [
        (2, "a mention lies past the first 64 tokens"),
        (3, "a mention lies past the first 64 tokens"),
        (4, NO_ANSWER),
    ]
    assert result.excluded_counts == {"a mention lies past the first 64 tokens": 2, NO_ANSWER: 1}
    assert [d.index for d in result.unanswered] == [4] and result.unanswered[0].correct is None
    np.testing.assert_array_equal(result.accuracy, np.mean([d.correct for d in result.details], axis=0))
    with pytest.raises(ExampleError, match="none of the 1 examples can be scored"):
        score_heads(model, tokenizer, examples[2:3])


@pytest.fixture(scope="module")
def winogender():
    return load_examples(ROOT / "data" / "winogender.jsonl")


def test_the_shipped_public_sets_load():
    gap = load_examples(ROOT / "data" / "gap-validation.jsonl")
    assert len(gap) == 454 and sum(e.answer is None for e in gap) == 62
    assert all(e.has_spans and e.fields["gender"] in ("masculine", "feminine") for e in gap)


def test_a_group_equals_its_subset_scored_alone(minilm, winogender):
    model, tokenizer = minilm
    subset = winogender[:72]  # six occupations, every gender
    result = score_heads(model, tokenizer, subset, by="gender")
    assert list(result.by_group) == ["male", "female", "neutral"] and result.by == "gender"
    for value, group in result.by_group.items():
        alone = score_heads(model, tokenizer, [e for e in subset if e.fields["gender"] == value])
        assert group.accuracy.shape == (6, 12) and group.n == alone.n == 24
        np.testing.assert_array_equal(group.accuracy, alone.accuracy)
        assert group.baselines == alone.baselines
    total = sum(g.accuracy * g.n for g in result.by_group.values()) / result.n
    np.testing.assert_allclose(total, result.accuracy)
