"""The corpus command lines lose nothing and count nothing twice: a run records its input's size and SHA-256
and refuses to resume on a changed input; only the parts its run.json lists are read (a copied or foreign
part is set aside, a duplicate listed part stops the run); run.json is replaced whole or not at all; bad
input is one line and exit status 2; an output folder of another run is refused, by qk_global too."""

from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest
from conftest import make_tiny

from attention.analysis import qk_global, runs
from attention.analysis.corpus import cli as corpus_cli
from attention.analysis.runs import RunError

TEXTS = ["The cat sat on the mat.", "It was tired.", "He read the book.", "She ran!", "The dog sat.", "It ran."]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


def args(corpus, tiny, out, *extra):
    return corpus_cli.parser().parse_args([str(corpus), "--model", str(tiny), "--out", str(out), *extra])


def aggregate(out) -> pd.DataFrame:
    return pd.read_parquet(out / corpus_cli.AGGREGATE)


def test_a_run_records_its_input_and_refuses_to_resume_on_a_changed_one(tiny, corpus, tmp_path):
    out = tmp_path / "out"
    corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"), stop_after=1)
    record = json.loads((out / runs.RUN).read_text())
    data = corpus.read_bytes()
    assert record["input"] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    corpus.write_text(corpus.read_text().replace("cat", "dog"), encoding="utf-8")  # as many lines, other texts
    with pytest.raises(RunError, match=r"corpus\.txt has changed since the run in .* began"):
        corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"))
    assert not (out / corpus_cli.AGGREGATE).exists()


def test_only_listed_parts_are_read_and_a_duplicate_listed_part_stops_the_run(tiny, corpus, tmp_path):
    whole = corpus_cli.run(args(corpus, tiny, tmp_path / "whole", "--batch-size", "2"))
    expected = aggregate(whole)
    out = tmp_path / "out"
    corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"), stop_after=1)
    parts = out / corpus_cli.PARTS
    (listed,) = corpus_cli.listed_parts(out)
    shutil.copy(parts / listed, parts / "part-000000099.parquet")  # a copy: the same texts twice
    foreign = sorted((whole / corpus_cli.PARTS).glob("part-*.parquet"))[-1]  # another run's
    shutil.copy(foreign, parts / "part-000000098.parquet")
    corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"))
    pd.testing.assert_frame_equal(aggregate(out), expected, rtol=0, atol=1e-6)  # each text once
    assert sorted(p.name for p in parts.glob(".unlisted-*")) == [
        ".unlisted-part-000000098.parquet",
        ".unlisted-part-000000099.parquet",
    ]
    record = json.loads((out / runs.RUN).read_text())
    shutil.copy(parts / listed, parts / "part-000000097.parquet")
    record["parts"]["part-000000097.parquet"] = record["parts"][listed]  # listed as well: twice in the record
    (out / runs.RUN).write_text(json.dumps(record))
    with pytest.raises(RunError, match=r"part-000000097\.parquet holds text \d, which part-\d+\.parquet holds too"):
        corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"))


def test_run_json_is_replaced_whole_or_not_at_all(tiny, corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"), stop_after=1)
    before = (out / runs.RUN).read_text()

    def killed_half_way(value, file):  # the process dies with half the record written
        file.write(json.dumps(value)[:20])
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dump", killed_half_way)
    with pytest.raises(KeyboardInterrupt):
        corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"))
    monkeypatch.undo()
    assert json.loads((out / runs.RUN).read_text()) == json.loads(before)
    assert not list(out.glob(".run.json.*"))  # the half-written record is not left beside it
    corpus_cli.run(args(corpus, tiny, out, "--batch-size", "2"))  # resumed from the whole record
    assert corpus_cli.done_texts(out) == set(range(len(TEXTS)))


def bad_input_cases(tmp_path, corpus, tiny):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    claimed = tmp_path / "claimed"
    (claimed / corpus_cli.PARTS).mkdir(parents=True)  # parts with no run.json
    model = ["--model", str(tiny), "--out", str(tmp_path / "out")]
    return [
        ([str(tmp_path / "missing.txt"), *model], "missing.txt: no such file or folder"),
        ([str(corpus), *model, "--batch-size", "0"], "argument --batch-size: 0 is less than 1 (see --help)"),
        ([str(corpus), "--model", str(tiny)], "the following arguments are required: --out (see --help)"),
        ([str(empty), *model], "empty.txt holds no texts"),
        ([str(broken), *model], "broken.jsonl, line 2: not JSON"),
        ([str(corpus), "--model", str(tiny), "--out", str(claimed)], "holds texts but no run.json"),
    ]


def test_bad_input_is_one_line_and_exit_status_2(tiny, corpus, tmp_path, capsys):
    for argv, said in bad_input_cases(tmp_path, corpus, tiny):
        try:
            status = corpus_cli.main(argv)
        except SystemExit as exit:  # argparse's errors
            status = exit.code
        err = capsys.readouterr().err
        assert status == 2, argv
        assert err.count("\n") == 1 and err.startswith("python -m attention.analysis.corpus: error: "), err
        assert said in err, err
    assert not (tmp_path / "out").exists()  # nothing was claimed for a run that could not start


def test_an_output_folder_of_another_run_is_refused(tiny, corpus, tmp_path, capsys):
    out = tmp_path / "out"
    corpus_cli.run(args(corpus, tiny, out, "--limit", "2"))
    with pytest.raises(RunError, match="holds a run of another field: choose another --out"):
        corpus_cli.run(args(corpus, tiny, out, "--limit", "2", "--field", "body"))
    points = tmp_path / "points"
    base = ["--model", str(tiny), "--layer", "0", "--out", str(points), "--tokens", "40", "--method", "pca"]
    assert qk_global.main([str(corpus), *base, "--head", "0"]) == 0
    assert qk_global.main([str(corpus), *base, "--head", "1"]) == 0  # the same run: another head beside
    other = tmp_path / "other.txt"
    other.write_text("A dog ran.\nThe mat was big.\n", encoding="utf-8")
    capsys.readouterr()
    assert qk_global.main([str(other), *base, "--head", "2"]) == 2
    assert "holds a run of another file, input: choose another --out" in capsys.readouterr().err
    assert not (points / qk_global.points_file(0, 2)).exists()
    (points / runs.RUN).unlink()  # points with no record of what they are of
    assert qk_global.main([str(corpus), *base, "--head", "3"]) == 2
    assert "holds texts.parquet but no run.json" in capsys.readouterr().err
