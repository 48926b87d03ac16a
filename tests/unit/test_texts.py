"""Reading a corpus from a text file, JSON Lines or a saved dataset."""

from __future__ import annotations

import pytest

from attention.analysis.texts import CorpusError, iter_texts, read_texts


def test_text_file_one_text_per_non_empty_line(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("The cat sat.\n\nIt was tired.\n", encoding="utf-8")
    assert read_texts(path) == ["The cat sat.", "It was tired."]


def test_jsonl_reads_the_named_field_and_stops_at_the_limit(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"text": "a"}\n{"text": "b"}\n{"body": "c", "text": "d"}\n', encoding="utf-8")
    assert read_texts(path, limit=2) == ["a", "b"]
    assert list(iter_texts(path)) == ["a", "b", "d"]


def test_jsonl_without_the_field_names_the_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"text": "a"}\n{"body": "c"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match="line 2"):
        read_texts(path)


def test_saved_dataset_column(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": ["one", "two"], "n": [1, 2]}).save_to_disk(str(tmp_path / "ds"))
    assert read_texts(tmp_path / "ds") == ["one", "two"]
    with pytest.raises(CorpusError, match="no column 'body'"):
        read_texts(tmp_path / "ds", field="body")


def test_missing_path_is_refused(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        read_texts(tmp_path / "absent.txt")
