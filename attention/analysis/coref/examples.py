"""Coreference examples: the JSON Lines format (data/README.md), checked line by line.

A mention (the pronoun, each candidate) is either a single word found in the text (the original format:
`"pronoun": "it"`, `"candidates": ["animal", "street"]`) or a character span (`{"text": "Henry Rosenthal",
"start": 40}`), which may hold several words and may repeat a name used elsewhere. One line uses one kind.
`answer` names a candidate by its text, or by its index when two candidates share a text, or is null when
none of them is the antecedent (such an example is kept but not counted in head accuracy). Every other field
of a line is kept in `CorefExample.fields`, for grouping.

A file is read in time linear in its size: a line has at most MAX_LINE_CHARS characters and MAX_CANDIDATES
candidates, and its words are found in one pass over its text (`Words`); a line past either bound is refused
with a message naming the bound, as are JSON nested too deeply and integers too long for Python to read.

Two readers: load_examples takes a file whose every line is good and stops at the first bad one (the command
line, the shipped sets); load_examples_leniently keeps the good lines and lists the bad ones (an upload, whose
person may score the good ones).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REQUIRED: dict[str, type | tuple[type, ...]] = {
    "text": str,
    "pronoun": (str, dict),
    "candidates": list,
    "answer": (str, int, type(None)),
}
KNOWN = {*REQUIRED, "pronoun_occurrence", "pair_id", "cue"}
MAX_LINE_CHARS = 20_000  # a line's characters: 12 times GAP's longest passage
MAX_CANDIDATES = 64  # a line's candidates: the public sets have 2, the built-in suite at most 3
NO_LINES = "no examples: the file has no JSON lines"
CHECK_EVERY = 100  # lines read between two calls of parse_examples' `check` (a time limit's)


class ExampleError(ValueError):
    """An example that cannot be scored; the message names its line and the problem."""


@dataclass(frozen=True)
class CorefExample:
    text: str
    pronoun: str
    candidates: tuple[str, ...]
    answer: str | None  # None: none of the candidates is the antecedent
    pronoun_occurrence: int = 1
    pair_id: str | None = None
    cue: str | None = None
    line: int | None = None  # 1-based line of the file it came from
    pronoun_start: int | None = None  # character offsets, when the line gives spans
    candidate_starts: tuple[int, ...] | None = None
    answer_at: int | None = None  # the answer's index, when the line gives spans
    fields: dict = field(default_factory=dict, hash=False)  # the line's other fields: gender, occupation …

    @property
    def answer_index(self) -> int | None:
        if self.answer is None:
            return None
        if self.answer_at is not None:
            return self.answer_at
        return [c.lower() for c in self.candidates].index(self.answer.lower())

    @property
    def has_spans(self) -> bool:
        return self.pronoun_start is not None

    @property
    def pronoun_span(self) -> tuple[int, int] | None:
        return None if self.pronoun_start is None else (self.pronoun_start, self.pronoun_start + len(self.pronoun))

    @property
    def candidate_spans(self) -> list[tuple[int, int]] | None:
        if self.candidate_starts is None:
            return None
        return [(s, s + len(c)) for s, c in zip(self.candidate_starts, self.candidates)]

    def value(self, name: str):
        """A field used for grouping: `cue` or `pair_id`, else one of the line's extra fields (None if absent)."""
        if name in ("cue", "pair_id"):
            return getattr(self, name)
        return self.fields.get(name)


ALNUM = re.compile(r"[^\W_]+")  # a run of letters and digits: what a plain word is made of


class Words:
    """How often each word occurs in a text as a whole word (case aside). The text's runs of letters and digits
    are counted in one pass, so a plain word is one look-up; a word with other characters inside (didn't,
    U.S.) is a scan for its letters (the C search of a literal, not a match tried at every character), and a
    line names at most MAX_CANDIDATES + 1 words."""

    def __init__(self, text: str):
        self.text = text
        self.lower = text.lower()
        self.runs = Counter(run for run in ALNUM.findall(self.lower))

    def count(self, word: str) -> int:
        if ALNUM.fullmatch(word):
            return self.runs[word.lower()]
        if len(self.lower) != len(self.text):  # a letter whose lower case is longer: matched as it is written
            return len(re.findall(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", self.text, flags=re.IGNORECASE))
        literal = re.escape(word.lower())  # then nothing before it that is a letter or digit, nor after it
        return len(re.findall(rf"{literal}(?<![^\W_]{literal})(?![^\W_])", self.lower))


def _span(obj, text: str, what: str, where: str) -> tuple[str, int]:
    if not isinstance(obj, dict) or set(obj) != {"text", "start"}:
        raise ExampleError(f'{where}: {what} should be a string or an object {{"text", "start"}}')
    words, start = obj["text"], obj["start"]
    if not isinstance(words, str) or not words.strip() or words != words.strip():
        raise ExampleError(f"{where}: {what} text should be non-empty, without spaces around it")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0 or start + len(words) > len(text):
        raise ExampleError(f"{where}: {what} '{words}' start {start!r} is not inside the text ({len(text)} characters)")
    if text[start : start + len(words)] != words:
        raise ExampleError(
            f"{where}: {what} '{words}' is not at character {start} "
            f"(the text there reads '{text[start : start + len(words)]}')"
        )
    return words, start


def _answer(obj, candidates: tuple[str, ...], where: str, exact: bool) -> tuple[str | None, int | None]:
    """The answer's text and index; an index may name a candidate whose text repeats."""
    answer = obj["answer"]
    if answer is None:
        return None, None
    if isinstance(answer, bool):
        raise ExampleError(f"{where}: 'answer' should be a candidate, its index or null")
    if isinstance(answer, int):
        if not 0 <= answer < len(candidates):
            raise ExampleError(f"{where}: answer index {answer} is not one of the {len(candidates)} candidates")
        return candidates[answer], answer
    answer = answer.strip()
    key = (lambda s: s) if exact else str.lower
    matches = [i for i, c in enumerate(candidates) if key(c) == key(answer)]
    if not matches:
        raise ExampleError(f"{where}: answer '{answer}' is not one of the candidates")
    if len(matches) > 1:
        raise ExampleError(f"{where}: answer '{answer}' matches several candidates: give its index instead")
    return candidates[matches[0]], matches[0]


def _check_words(obj, text: str, pronoun: str, candidates: tuple[str, ...], where: str) -> int:
    """The original single-word format; returns the pronoun occurrence."""
    if len({c.lower() for c in candidates}) != len(candidates):
        raise ExampleError(f"{where}: candidates repeat a word")
    occurrence = obj.get("pronoun_occurrence", 1)
    if isinstance(occurrence, bool) or not isinstance(occurrence, int) or occurrence < 1:
        raise ExampleError(f"{where}: 'pronoun_occurrence' should be a whole number from 1")
    words = Words(text)
    for word in (pronoun, *candidates):
        if not word or len(word.split()) != 1:
            raise ExampleError(f"{where}: '{word}' should be a single word")
        if words.count(word) == 0:
            raise ExampleError(f"{where}: '{word}' is not a word of the text")
    if pronoun.lower() in {c.lower() for c in candidates}:
        raise ExampleError(f"{where}: the pronoun '{pronoun}' is also a candidate")
    if words.count(pronoun) < occurrence:
        raise ExampleError(f"{where}: the text has fewer than {occurrence} occurrences of '{pronoun}'")
    return occurrence


def _check_spans(obj, text: str, where: str):
    """The character-span format; returns pronoun, its start, candidates and their starts."""
    if "pronoun_occurrence" in obj:
        raise ExampleError(f"{where}: 'pronoun_occurrence' is for a pronoun given as a word; a span has its start")
    pronoun, p_start = _span(obj["pronoun"], text, "the pronoun", where)
    spans = [_span(c, text, f"candidate {i + 1}", where) for i, c in enumerate(obj["candidates"])]
    marked = sorted(
        [(p_start, p_start + len(pronoun), "the pronoun")] + [(s, s + len(w), f"candidate '{w}'") for w, s in spans]
    )
    for (_, end, a), (start, _, b) in itertools.pairwise(marked):
        if start < end:
            raise ExampleError(f"{where}: {a} and {b} overlap")
    return pronoun, p_start, tuple(w for w, _ in spans), tuple(s for _, s in spans)


def parse_example(obj, line: int | None = None) -> CorefExample:
    """Check one JSON object and build the example; any problem is an ExampleError naming the line."""
    where = f"line {line}" if line is not None else "example"
    if not isinstance(obj, dict):
        raise ExampleError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for name, kind in REQUIRED.items():
        if name not in obj:
            raise ExampleError(f"{where}: missing field '{name}'")
        if not isinstance(obj[name], kind):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            raise ExampleError(f"{where}: '{name}' should be a {' or '.join(k.__name__ for k in kinds)}")
    text, candidates = obj["text"], obj["candidates"]
    if len(candidates) < 2:
        raise ExampleError(f"{where}: needs at least two candidates")
    if len(candidates) > MAX_CANDIDATES:
        raise ExampleError(f"{where}: has {len(candidates):,} candidates; a line may have at most {MAX_CANDIDATES}")
    if isinstance(obj["pronoun"], dict) or any(isinstance(c, dict) for c in candidates):
        pronoun, p_start, candidates, c_starts = _check_spans(obj, text, where)
        occurrence = 1
        answer, answer_at = _answer(obj, candidates, where, exact=True)
    else:
        if not all(isinstance(c, str) and c.strip() for c in candidates):
            raise ExampleError(f"{where}: every candidate should be a non-empty string")
        pronoun, candidates = obj["pronoun"].strip(), tuple(c.strip() for c in candidates)
        p_start, c_starts = None, None
        occurrence = _check_words(obj, text, pronoun, candidates, where)
        answer, answer_at = _answer(obj, candidates, where, exact=False)
        if isinstance(obj["answer"], str):  # kept as written; matched case-insensitively
            answer, answer_at = obj["answer"].strip(), None
    pair_id, cue = obj.get("pair_id"), obj.get("cue")
    extra = {k: v for k, v in obj.items() if k not in KNOWN}
    return CorefExample(
        text,
        pronoun,
        candidates,
        answer,
        occurrence,
        None if pair_id is None else str(pair_id),
        None if cue is None else str(cue),
        line,
        p_start,
        c_starts,
        answer_at,
        extra,
    )


def read_line(raw: str, number: int):
    """One line's JSON value; a line past MAX_LINE_CHARS, nested too deeply or holding an integer too long
    for Python to read is an ExampleError naming the line, as invalid JSON is."""
    if len(raw) > MAX_LINE_CHARS:
        raise ExampleError(f"line {number}: {len(raw):,} characters; a line may have at most {MAX_LINE_CHARS:,}")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        raise ExampleError(f"line {number}: not valid JSON ({err.msg})") from None
    except RecursionError:
        raise ExampleError(f"line {number}: JSON nested too deeply to read") from None
    except ValueError:  # Python's limit on the digits of an integer read from text
        raise ExampleError(f"line {number}: a number has more than {sys.get_int_max_str_digits():,} digits") from None


def _lines(text: str, check: Callable[[], None] | None):
    """(number, line) of each line that is not blank; `check` is called every CHECK_EVERY lines."""
    for number, raw in enumerate(text.splitlines(), start=1):
        if check is not None and number % CHECK_EVERY == 0:
            check()
        if raw.strip():
            yield number, raw


def _unpaired(examples: list[CorefExample]) -> list[tuple[str, list[CorefExample]]]:
    """(pair_id, its examples) for each pair_id not used by exactly two examples."""
    pairs: dict[str, list[CorefExample]] = {}
    for example in examples:
        if example.pair_id is not None:
            pairs.setdefault(example.pair_id, []).append(example)
    return [(pair_id, twins) for pair_id, twins in pairs.items() if len(twins) != 2]


def _pair_problem(pair_id: str, twins: list[CorefExample]) -> tuple[int, str]:
    """(line, message): the problem of a pair_id not used twice, at its last line."""
    line = twins[-1].line or 0
    return line, f"line {line}: pair_id '{pair_id}' is used {len(twins)} times, twins come in twos"


def parse_examples(text: str, check: Callable[[], None] | None = None) -> list[CorefExample]:
    """JSON Lines text to examples; blank lines are skipped, any bad line fails the whole text.
    `check` (a time limit's) is called every CHECK_EVERY lines and may raise to stop the reading."""
    examples = [parse_example(read_line(raw, number), number) for number, raw in _lines(text, check)]
    if not examples:
        raise ExampleError(NO_LINES)
    unpaired = _unpaired(examples)
    if unpaired:
        raise ExampleError(_pair_problem(*unpaired[0])[1])
    return examples


@dataclass(frozen=True)
class Problems:
    """The bad lines of a file: the first few messages ("line 7: missing field 'answer'"), in line order, and
    how many there are in all."""

    first: tuple[str, ...] = ()
    count: int = 0

    @property
    def more(self) -> int:
        """Bad lines past the ones in `first`."""
        return self.count - len(self.first)


def parse_examples_leniently(
    text: str, check: Callable[[], None] | None = None, keep: int = 20
) -> tuple[list[CorefExample], Problems]:
    """The examples of every good line, and the bad lines' problems (the first `keep` messages, and their
    count). A pair_id not used by exactly two good lines is a problem of its last line, and its lines are
    left out, so the examples returned are a suite parse_examples takes. A text without a line that is not
    blank is an ExampleError, as in parse_examples."""
    examples: list[CorefExample] = []
    problems: list[tuple[int, str]] = []  # (line, message)
    count, seen = 0, False
    for number, raw in _lines(text, check):
        seen = True
        try:
            examples.append(parse_example(read_line(raw, number), number))
        except ExampleError as err:
            count += 1
            if len(problems) < keep:  # the first `keep` by line: later ones are only counted
                problems.append((number, str(err)))
    if not seen:
        raise ExampleError(NO_LINES)
    unpaired = _unpaired(examples)
    dropped = {e.line for _, twins in unpaired for e in twins}
    examples = [e for e in examples if e.line not in dropped]
    problems = sorted(problems + [_pair_problem(*pair) for pair in unpaired])[:keep]
    return examples, Problems(tuple(message for _, message in problems), count + len(unpaired))


def read_text(source: str | os.PathLike | bytes) -> str:
    """A JSONL file's text, from its path or its bytes (an upload); unreadable or not UTF-8: an ExampleError."""
    if isinstance(source, bytes):
        data = source
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise ExampleError(f"cannot read {source}: {err.strerror or err}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExampleError("the file is not UTF-8 text (is it a JSONL file?)") from None


def load_examples(source: str | os.PathLike | bytes, check: Callable[[], None] | None = None) -> list[CorefExample]:
    """Examples from a JSONL file (a path) or its bytes (an upload), every line good; `check` as in
    parse_examples."""
    return parse_examples(read_text(source), check)


def load_examples_leniently(
    source: str | os.PathLike | bytes, check: Callable[[], None] | None = None, keep: int = 20
) -> tuple[list[CorefExample], Problems]:
    """The good lines' examples and the bad lines' problems, as in parse_examples_leniently."""
    return parse_examples_leniently(read_text(source), check, keep)
