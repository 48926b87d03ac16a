"""Coreference scoring: hand-computed cases on synthetic attention, file validation, the real model."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from attention.analysis.coref import (
    CorefExample,
    ExampleError,
    flipping_heads,
    load_examples,
    parse_examples,
    score_example,
    score_heads,
    twin_pairs,
)
from attention.analysis.coref.cli import main


def encoding(words: list[str], pieces: dict[str, int] | None = None):
    """A fake tokenizer output for words separated by spaces: [CLS] pieces… [SEP].

    `pieces` says into how many pieces a word is split (default 1). Returns (text, tokens, word_ids,
    offsets) and a map word index -> token positions."""
    pieces = pieces or {}
    text = " ".join(words)
    tokens, word_ids, offsets, positions = ["[CLS]"], [None], [(0, 0)], []
    start = 0
    for w, word in enumerate(words):
        n = pieces.get(word, 1)
        cuts = np.linspace(0, len(word), n + 1).astype(int)
        positions.append([])
        for a, b in zip(cuts[:-1], cuts[1:]):
            positions[-1].append(len(tokens))
            tokens.append(word[a:b] if a == 0 else "##" + word[a:b])
            word_ids.append(w)
            offsets.append((start + a, start + b))
        start += len(word) + 1
    tokens.append("[SEP]")
    word_ids.append(None)
    offsets.append((0, 0))
    return text, tokens, word_ids, offsets, positions


def uniform(n_heads: int, L: int) -> np.ndarray:
    return np.full((1, n_heads, L, L), 1.0 / L)


def example(text, pronoun, candidates, answer, **kw) -> CorefExample:
    return CorefExample(text, pronoun, tuple(candidates), answer, **kw)


def test_right_wrong_and_tied_heads():
    words = "the dog chased the cat because it was hungry".split()
    text, tokens, word_ids, offsets, pos = encoding(words)
    L = len(tokens)
    it, dog, cat = pos[6][0], pos[1][0], pos[4][0]
    attn = uniform(3, L)
    attn[0, 0, it] = 0
    attn[0, 0, it, dog] = 0.7
    attn[0, 0, it, cat] = 0.3  # right
    attn[0, 1, it] = 0
    attn[0, 1, it, dog] = 0.2
    attn[0, 1, it, cat] = 0.8  # wrong
    attn[0, 2, it] = 0
    attn[0, 2, it, dog] = 0.5
    attn[0, 2, it, cat] = 0.5  # a tie is wrong
    score = score_example(example(text, "it", ["dog", "cat"], "dog"), attn, tokens, word_ids, offsets)
    assert score.correct.tolist() == [[True, False, False]]
    np.testing.assert_allclose(score.attention[0], [[0.7, 0.3], [0.2, 0.8], [0.5, 0.5]])
    np.testing.assert_allclose(score.margin[0], [0.4, -0.6, 0.0])
    assert score.located.nearest == 1 and score.located.first == 0  # cat is nearest before "it"


def test_candidate_in_several_pieces_sums_its_columns():
    words = "the trophy fit in the suitcase because it was small".split()
    text, tokens, word_ids, offsets, pos = encoding(words, {"suitcase": 3})
    assert len(pos[5]) == 3
    it = pos[7][0]
    attn = uniform(1, len(tokens))
    attn[0, 0, it] = 0
    attn[0, 0, it, pos[1][0]] = 0.4  # trophy
    attn[0, 0, it, pos[5]] = 0.2  # each suitcase piece: 0.6 in all
    score = score_example(example(text, "it", ["trophy", "suitcase"], "suitcase"), attn, tokens, word_ids, offsets)
    np.testing.assert_allclose(score.attention[0, 0], [0.4, 0.6])
    assert score.correct[0, 0]  # the sum wins; a mean (0.2) or max (0.2) of the pieces would lose


def test_pronoun_in_several_pieces_averages_its_rows():
    words = "mary met anna and herself left".split()
    text, tokens, word_ids, offsets, pos = encoding(words, {"herself": 2})
    first, second = pos[4]
    attn = uniform(1, len(tokens))
    attn[0, 0, first] = 0
    attn[0, 0, first, pos[0][0]] = 0.1
    attn[0, 0, first, pos[2][0]] = 0.9
    attn[0, 0, second] = 0
    attn[0, 0, second, pos[0][0]] = 0.8
    attn[0, 0, second, pos[2][0]] = 0.2
    score = score_example(example(text, "herself", ["mary", "anna"], "mary"), attn, tokens, word_ids, offsets)
    np.testing.assert_allclose(score.attention[0, 0], [0.45, 0.55])
    assert not score.correct[0, 0]  # the mean of the rows prefers anna; the second row alone would not


def test_pronoun_occurring_twice_uses_the_given_occurrence():
    words = "it rained so the dog woke the cat because it was scared".split()
    text, tokens, word_ids, offsets, pos = encoding(words)
    first_it, second_it, dog, cat = pos[0][0], pos[9][0], pos[4][0], pos[7][0]
    attn = uniform(1, len(tokens))
    attn[0, 0, first_it] = 0
    attn[0, 0, first_it, dog] = 1.0  # the first "it" looks at dog
    attn[0, 0, second_it] = 0
    attn[0, 0, second_it, cat] = 1.0  # the second at cat
    ex = example(text, "it", ["dog", "cat"], "cat", pronoun_occurrence=2)
    score = score_example(ex, attn, tokens, word_ids, offsets)
    assert score.located.pronoun == [second_it] and score.correct[0, 0]
    first = score_example(example(text, "it", ["dog", "cat"], "cat"), attn, tokens, word_ids, offsets)
    assert not first.correct[0, 0]


def test_nearest_baseline_looks_after_when_nothing_is_before():
    words = "she said the nurse and the teacher left".split()
    text, tokens, word_ids, offsets, pos = encoding(words)
    score = score_example(
        example(text, "she", ["teacher", "nurse"], "nurse"), uniform(1, len(tokens)), tokens, word_ids, offsets
    )
    assert score.located.nearest == 1  # nurse is the closest after "she"
    assert score.located.first == 1  # and the earliest
    words = "the cat and the dog saw that it ran".split()
    text, tokens, word_ids, offsets, pos = encoding(words)
    score = score_example(
        example(text, "it", ["cat", "dog"], "cat"), uniform(1, len(tokens)), tokens, word_ids, offsets
    )
    assert score.located.nearest == 1 and score.located.first == 0


def test_case_insensitive_word_matching():
    words = "John told Bill that he won".split()
    text, tokens, word_ids, offsets, pos = encoding(words)
    score = score_example(
        example(text, "HE", ["john", "BILL"], "John"), uniform(1, len(tokens)), tokens, word_ids, offsets
    )
    assert score.located.candidates == [pos[0], pos[2]] and score.located.pronoun == pos[4]


GOOD = {
    "text": "The animal didn't cross the street because it was too tired.",
    "pronoun": "it",
    "candidates": ["animal", "street"],
    "answer": "animal",
}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"answer": "dog"}, "line 2: answer 'dog' is not one of the candidates"),
        ({"pronoun": "she"}, "line 2: 'she' is not a word of the text"),
        ({"candidates": ["animal", "road"]}, "line 2: 'road' is not a word of the text"),
        ({"candidates": ["animal", "anim"]}, "line 2: 'anim' is not a word of the text"),  # whole words only
        ({"candidates": ["animal"]}, "line 2: needs at least two candidates"),
        ({"candidates": ["animal", "Animal"]}, "line 2: candidates repeat a word"),
        ({"candidates": ["animal", "it"]}, "line 2: the pronoun 'it' is also a candidate"),
        ({"pronoun_occurrence": 2}, "line 2: the text has fewer than 2 occurrences of 'it'"),
        ({"pronoun_occurrence": 0}, "line 2: 'pronoun_occurrence' should be a whole number"),
        ({"candidates": "animal street"}, "line 2: 'candidates' should be a list"),
        ({"text": None}, "line 2: 'text' should be a str"),
        ({"candidates": ["the animal", "street"], "answer": "street"}, "line 2: 'the animal' should be a single word"),
    ],
)
def test_invalid_lines_name_the_line_and_the_problem(change, message):
    bad = {**GOOD, **change}
    if change.get("text", 0) is None:
        bad["text"] = 5
        message = "line 2: 'text' should be a str"
    text = json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n"
    with pytest.raises(ExampleError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_examples(text)


def test_missing_field_bad_json_and_empty_files(tmp_path):
    with pytest.raises(ExampleError, match="line 1: missing field 'answer'"):
        parse_examples(json.dumps({k: v for k, v in GOOD.items() if k != "answer"}))
    with pytest.raises(ExampleError, match="line 3: not valid JSON"):
        parse_examples(json.dumps(GOOD) + "\n\n{oops\n")
    with pytest.raises(ExampleError, match="line 1: expected a JSON object"):
        parse_examples("[1, 2]")
    with pytest.raises(ExampleError, match="no examples"):
        parse_examples("\n \n")
    with pytest.raises(ExampleError, match="not UTF-8"):
        load_examples(b"\xff\xfe\x00binary\x00")
    with pytest.raises(ExampleError, match="cannot read"):
        load_examples(tmp_path / "missing.jsonl")
    with pytest.raises(ExampleError, match="pair_id 'x' is used 3 times"):
        parse_examples("\n".join(json.dumps({**GOOD, "pair_id": "x"}) for _ in range(3)))


def test_a_bad_line_fails_the_whole_file(tmp_path):
    path = tmp_path / "ex.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "answer": "x"}) + "\n")
    with pytest.raises(ExampleError, match="line 2"):
        load_examples(path)
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    examples = load_examples(path)
    assert [e.line for e in examples] == [1, 2] and examples[0].candidates == ("animal", "street")


# ---- the real model and the built-in suite ------------------------------------------------------

SUITE = ROOT / "data" / "coref_examples.jsonl"


@pytest.fixture(scope="module")
def suite():
    return load_examples(SUITE)


def test_the_built_in_suite(suite):
    assert len(suite) >= 60
    pairs = twin_pairs(suite)
    assert len(pairs) >= 10
    for a, b in pairs:
        assert suite[a].answer.lower() != suite[b].answer.lower()  # twins flip the answer


def test_batched_scores_equal_one_by_one(minilm, suite):
    from attention.analysis.coref import score_example as one
    from attention.runs.run import run_sentence

    model, tokenizer = minilm
    subset = suite[:7]
    result = score_heads(model, tokenizer, subset, batch_size=3)
    for ex, detail in zip(subset, result.details):
        run = run_sentence(model, tokenizer, ex.text)
        enc = run.encoded
        alone = one(ex, run.attentions, enc.tokens, enc.word_ids, enc.offsets)
        # float32 sums in another order (rows of a padded batch against a whole map): 1.3e-6 apart on AVX-512
        np.testing.assert_allclose(detail.attention, alone.attention, atol=1e-6, rtol=1e-5)
        assert (detail.correct == alone.correct).all()
    expected = np.mean([d.correct for d in result.details], axis=0)
    np.testing.assert_array_equal(result.accuracy, expected)
    assert result.accuracy.shape == (6, 12)


def test_scoring_the_suite_on_the_default_model(minilm, suite):
    model, tokenizer = minilm
    calls = []
    result = score_heads(model, tokenizer, suite, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (len(suite), len(suite))
    n = len(suite)
    nearest = np.mean([d.located.nearest == d.example.answer_index for d in result.details])
    assert result.baselines["nearest"] == pytest.approx(nearest)
    assert 0 <= result.baselines["first"] <= 1
    layer, head, best = result.ranked(1)[0]
    assert best == result.accuracy.max() and result.accuracy[layer, head] == best
    assert best * n == pytest.approx(sum(d.correct[layer, head] for d in result.details))


def test_flipping_heads_between_twins(minilm, suite):
    model, tokenizer = minilm
    a, b = twin_pairs(suite)[0]
    result = score_heads(model, tokenizer, [suite[a], suite[b]])
    flips = flipping_heads(*result.details)
    pref_a = result.details[0].preferred
    pref_b = result.details[1].preferred
    words_a = np.array([c.lower() for c in suite[a].candidates])[pref_a]
    words_b = np.array([c.lower() for c in suite[b].candidates])[pref_b]
    np.testing.assert_array_equal(flips, words_a != words_b)


def test_command_line(capsys, tmp_path):
    out_csv = tmp_path / "heads.csv"
    assert main([str(SUITE), "--top", "3", "--csv", str(out_csv)]) == 0
    printed = capsys.readouterr().out
    assert "baselines: nearest" in printed and "examples scored in" in printed
    rows = out_csv.read_text().splitlines()
    assert rows[0].startswith("layer,head,accuracy") and len(rows) == 1 + 72
    best = rows[1].split(",")
    assert f"   1 {int(best[0]):>5} {int(best[1]):>4} {float(best[2]):>8.3f}" in printed
    assert main([str(tmp_path / "nope.jsonl")]) == 2
    assert "error: cannot read" in capsys.readouterr().err


@pytest.mark.slow  # 34 s on a busy 2-core machine
def test_the_library_never_imports_the_command_line_which_still_runs_as_the_module():
    """The command line imports the library, never the reverse: the scoring modules and the page import no
    coref.cli. `python -m attention.analysis.coref FILE`, as README and CI run it, is still the command line."""
    code = (
        "import sys\nimport attention.analysis.coref.metrics, attention.analysis.coref.result_csv, ui.views.coref"
        "\nprint(sorted(m for m in sys.modules if m.endswith('coref.cli')))"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["[]"]
    run = subprocess.run(
        [sys.executable, "-m", "attention.analysis.coref", str(SUITE), "--top", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "baselines: nearest" in run.stdout and "examples scored in" in run.stdout
    assert len([line for line in run.stdout.splitlines() if line.startswith(("   1 ", "   2 "))]) == 2
