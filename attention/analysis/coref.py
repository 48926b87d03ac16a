"""Which heads link a pronoun to its antecedent? Scoring every head on coreference examples.

Rules (Clark et al. 2019, "What Does BERT Look At?"): words are the tokenizer's words (word_ids),
matched to an example's words case-insensitively; the pronoun is its `pronoun_occurrence`-th
occurrence, each candidate its first occurrence. Attention from a word is the mean of its pieces'
rows, attention to a word the sum of its pieces' columns. A head is right on an example when its
attention from the pronoun to the answer is strictly greater than to every other candidate (a tie
is wrong). Baselines: `nearest` picks the candidate closest before the pronoun (if none is before
it, the closest after), `first` the earliest candidate.

    python -m attention.analysis.coref data/coref_examples.jsonl [--model SOURCE] [--csv OUT] [--top N]
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

REQUIRED = {"text": str, "pronoun": str, "candidates": list, "answer": str}


class ExampleError(ValueError):
    """An example that cannot be scored; the message names its line and the problem."""


@dataclass(frozen=True)
class CorefExample:
    text: str
    pronoun: str
    candidates: tuple[str, ...]
    answer: str
    pronoun_occurrence: int = 1
    pair_id: str | None = None
    cue: str | None = None
    line: int | None = None  # 1-based line of the file it came from

    @property
    def answer_index(self) -> int:
        return [c.lower() for c in self.candidates].index(self.answer.lower())


def _occurrences(word: str, text: str) -> int:
    return len(re.findall(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", text, flags=re.IGNORECASE))


def parse_example(obj, line: int | None = None) -> CorefExample:
    """Check one JSON object and build the example; any problem is an ExampleError naming the line."""
    where = f"line {line}" if line is not None else "example"
    if not isinstance(obj, dict):
        raise ExampleError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for field, kind in REQUIRED.items():
        if field not in obj:
            raise ExampleError(f"{where}: missing field '{field}'")
        if not isinstance(obj[field], kind):
            raise ExampleError(f"{where}: '{field}' should be a {kind.__name__}")
    text, pronoun, answer = obj["text"], obj["pronoun"].strip(), obj["answer"].strip()
    candidates = obj["candidates"]
    if not all(isinstance(c, str) and c.strip() for c in candidates):
        raise ExampleError(f"{where}: every candidate should be a non-empty string")
    candidates = tuple(c.strip() for c in candidates)
    if len(candidates) < 2:
        raise ExampleError(f"{where}: needs at least two candidates")
    if len({c.lower() for c in candidates}) != len(candidates):
        raise ExampleError(f"{where}: candidates repeat a word")
    occurrence = obj.get("pronoun_occurrence", 1)
    if isinstance(occurrence, bool) or not isinstance(occurrence, int) or occurrence < 1:
        raise ExampleError(f"{where}: 'pronoun_occurrence' should be a whole number from 1")
    for word in (pronoun, *candidates):
        if not word or len(word.split()) != 1:
            raise ExampleError(f"{where}: '{word}' should be a single word")
        if _occurrences(word, text) == 0:
            raise ExampleError(f"{where}: '{word}' is not a word of the text")
    if pronoun.lower() in {c.lower() for c in candidates}:
        raise ExampleError(f"{where}: the pronoun '{pronoun}' is also a candidate")
    if _occurrences(pronoun, text) < occurrence:
        raise ExampleError(f"{where}: the text has fewer than {occurrence} occurrences of '{pronoun}'")
    if answer.lower() not in {c.lower() for c in candidates}:
        raise ExampleError(f"{where}: answer '{answer}' is not one of the candidates")
    pair_id = obj.get("pair_id")
    cue = obj.get("cue")
    return CorefExample(text, pronoun, candidates, answer, occurrence,
                        None if pair_id is None else str(pair_id), None if cue is None else str(cue), line)


def parse_examples(text: str) -> list[CorefExample]:
    """JSON Lines text to examples; blank lines are skipped, any bad line fails the whole text."""
    examples = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            raise ExampleError(f"line {number}: not valid JSON ({err.msg})") from None
        examples.append(parse_example(obj, number))
    if not examples:
        raise ExampleError("no examples: the file has no JSON lines")
    pairs: dict[str, list[CorefExample]] = {}
    for example in examples:
        if example.pair_id is not None:
            pairs.setdefault(example.pair_id, []).append(example)
    for pair_id, twins in pairs.items():
        if len(twins) != 2:
            raise ExampleError(f"line {twins[-1].line}: pair_id '{pair_id}' is used {len(twins)} times, "
                               "twins come in twos")
    return examples


def load_examples(source: str | os.PathLike | bytes) -> list[CorefExample]:
    """Examples from a JSONL file (a path) or its bytes (an upload)."""
    if isinstance(source, bytes):
        data = source
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise ExampleError(f"cannot read {source}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExampleError("the file is not UTF-8 text (is it a JSONL file?)") from None
    return parse_examples(text)


# ---- locating words ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Located:
    """Token positions of the pronoun and of each candidate in one encoded example."""
    pronoun: list[int]
    candidates: list[list[int]]

    @property
    def nearest(self) -> int:
        """Index of the candidate closest before the pronoun, else the closest after it."""
        p = self.pronoun[0]
        before = [(p - c[0], i) for i, c in enumerate(self.candidates) if c[0] < p]
        if before:
            return min(before)[1]
        return min((c[0] - p, i) for i, c in enumerate(self.candidates))[1]

    @property
    def first(self) -> int:
        return min((c[0], i) for i, c in enumerate(self.candidates))[1]


def word_spans(text: str, word_ids: list[int | None], offsets: list[tuple[int, int]]) -> list[tuple[str, list[int]]]:
    """The tokenizer's words in order: (the word as written in the text, its token positions)."""
    words: list[tuple[str, list[int]]] = []
    previous = None
    for pos, word in enumerate(word_ids):
        if word is None:
            previous = None
            continue
        if word == previous:
            words[-1][1].append(pos)
        else:
            words.append(("", [pos]))
        previous = word
    # byte-level BPE offsets (GPT-2, RoBERTa) include the space before a word
    return [(text[offsets[p[0]][0]:offsets[p[-1]][1]].strip(), p) for _, p in words]


def locate(example: CorefExample, word_ids, offsets) -> Located:
    words = word_spans(example.text, word_ids, offsets)
    where = f"line {example.line}" if example.line is not None else "example"

    def find(word: str, occurrence: int = 1) -> list[int]:
        matches = [positions for written, positions in words if written.lower() == word.lower()]
        if len(matches) < occurrence:
            raise ExampleError(f"{where}: the tokenizer's words do not include '{word}'"
                               + (f" {occurrence} times" if occurrence > 1 else ""))
        return matches[occurrence - 1]

    return Located(find(example.pronoun, example.pronoun_occurrence), [find(c) for c in example.candidates])


def word_attention(attentions: np.ndarray, located: Located) -> np.ndarray:
    """(n_layers, H, L, L) maps -> (n_layers, H, n_candidates): from the pronoun (mean of its
    pieces' rows) to each candidate (sum of its pieces' columns)."""
    rows = attentions[:, :, located.pronoun, :].mean(axis=2)  # (n_layers, H, L)
    return np.stack([rows[:, :, cols].sum(axis=-1) for cols in located.candidates], axis=-1)


def right_heads(scores: np.ndarray, answer: int) -> np.ndarray:
    """(n_layers, H, n_candidates) -> (n_layers, H) bool: the answer strictly above every other."""
    others = np.delete(scores, answer, axis=-1).max(axis=-1)
    return scores[..., answer] > others


# ---- scoring ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ExampleScore:
    example: CorefExample
    tokens: list[str]
    located: Located
    attention: np.ndarray  # (n_layers, H, n_candidates) word-level attention pronoun -> candidate
    correct: np.ndarray  # (n_layers, H) bool

    @property
    def margin(self) -> np.ndarray:
        """(n_layers, H): attention to the answer minus the best other candidate."""
        answer = self.example.answer_index
        return self.attention[..., answer] - np.delete(self.attention, answer, axis=-1).max(axis=-1)

    @property
    def preferred(self) -> np.ndarray:
        """(n_layers, H): index of the candidate each head attends to most."""
        return self.attention.argmax(axis=-1)


@dataclass(frozen=True)
class CorefResult:
    accuracy: np.ndarray  # (n_layers, H) fraction of examples each head gets right
    baselines: dict[str, float]  # "nearest" and "first"
    details: list[ExampleScore]

    def ranked(self, top: int | None = None) -> list[tuple[int, int, float]]:
        """(layer, head, accuracy), best first; ties by layer then head."""
        n_layers, n_heads = self.accuracy.shape
        order = sorted(((-self.accuracy[l, h], l, h) for l in range(n_layers) for h in range(n_heads)))
        return [(l, h, float(-a)) for a, l, h in order[:top]]


def score_example(example: CorefExample, attentions: np.ndarray, tokens: list[str], word_ids, offsets) -> ExampleScore:
    """Score one example from its (n_layers, H, L, L) attention maps."""
    located = locate(example, word_ids, offsets)
    scores = word_attention(attentions, located)
    return ExampleScore(example, tokens, located, scores, right_heads(scores, example.answer_index))


def score_heads(model, tokenizer, examples: list[CorefExample], batch_size: int = 32,
                progress: Callable[[int, int], None] | None = None) -> CorefResult:
    """Run every example through the model (in padded batches) and score each head."""
    if not examples:
        raise ExampleError("no examples to score")
    limit = model.config.max_position_embeddings
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].text))  # similar lengths batch well
    details: list[ExampleScore | None] = [None] * len(examples)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        batch = tokenizer([examples[i].text for i in chunk], padding=True, truncation=True, max_length=limit,
                          return_offsets_mapping=True, return_tensors="pt")
        with torch.inference_mode():
            out = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
        stacked = torch.stack(out.attentions, dim=1).float().numpy()  # (b, n_layers, H, S, S)
        lengths = batch["attention_mask"].sum(1).tolist()
        for row, index in enumerate(chunk):
            n = lengths[row]
            details[index] = score_example(examples[index], stacked[row, :, :, :n, :n], batch.tokens(row)[:n],
                                           batch.word_ids(row)[:n], batch["offset_mapping"][row, :n].tolist())
        if progress is not None:
            progress(min(start + batch_size, len(order)), len(order))
    correct = np.stack([d.correct for d in details])  # (n_examples, n_layers, H)
    baselines = {
        "nearest": float(np.mean([d.located.nearest == d.example.answer_index for d in details])),
        "first": float(np.mean([d.located.first == d.example.answer_index for d in details])),
    }
    return CorefResult(correct.mean(axis=0), baselines, details)


def flipping_heads(a: ExampleScore, b: ExampleScore) -> np.ndarray:
    """(n_layers, H) bool: heads whose preferred candidate (by word) differs between two twins."""
    words_a = np.array([c.lower() for c in a.example.candidates])[a.preferred]
    words_b = np.array([c.lower() for c in b.example.candidates])[b.preferred]
    return words_a != words_b


def twin_pairs(examples: list[CorefExample]) -> list[tuple[int, int]]:
    """Index pairs of the examples sharing a pair_id, in file order."""
    seen: dict[str, int] = {}
    pairs = []
    for i, example in enumerate(examples):
        if example.pair_id is None:
            continue
        if example.pair_id in seen:
            pairs.append((seen[example.pair_id], i))
        else:
            seen[example.pair_id] = i
    return pairs


# ---- command line -------------------------------------------------------------------------------

def write_csv(result: CorefResult, path: str | os.PathLike) -> None:
    import csv

    n = len(result.details)
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["layer", "head", "accuracy", "correct", "examples", "baseline_nearest", "baseline_first"])
        for layer, head, accuracy in result.ranked():
            out.writerow([layer, head, f"{accuracy:.4f}", int(round(accuracy * n)), n,
                          f"{result.baselines['nearest']:.4f}", f"{result.baselines['first']:.4f}"])


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import time

    from ..loading import ModelLoadError, load_bert

    ap = argparse.ArgumentParser(prog="python -m attention.analysis.coref",
                                 description="Score every attention head on coreference examples.")
    ap.add_argument("file", help="JSON Lines file of examples (text, pronoun, candidates, answer)")
    ap.add_argument("--model", default=None, help="checkpoint folder or hub id (default: the bundled MiniLM)")
    ap.add_argument("--csv", default=None, help="write every head's accuracy to this CSV file")
    ap.add_argument("--top", type=int, default=10, help="how many heads to print (default 10)")
    args = ap.parse_args(argv)
    try:
        examples = load_examples(args.file)
        model, tokenizer = load_bert(args.model)
        start = time.perf_counter()
        result = score_heads(model, tokenizer, examples)
        seconds = time.perf_counter() - start
    except (ExampleError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    n_layers, n_heads = result.accuracy.shape
    print(f"model: {model.load_report.source} ({n_layers} layers x {n_heads} heads); "
          f"{len(examples)} examples scored in {seconds:.2f} s")
    print(f"baselines: nearest {result.baselines['nearest']:.3f}, first {result.baselines['first']:.3f}")
    print(f"{'rank':>4} {'layer':>5} {'head':>4} {'accuracy':>8}  vs nearest  vs first")
    for rank, (layer, head, accuracy) in enumerate(result.ranked(args.top), start=1):
        print(f"{rank:>4} {layer:>5} {head:>4} {accuracy:>8.3f}  {accuracy - result.baselines['nearest']:>+10.3f}"
              f"  {accuracy - result.baselines['first']:>+8.3f}")
    if args.csv:
        write_csv(result, args.csv)
        print(f"all {n_layers * n_heads} heads written to {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
