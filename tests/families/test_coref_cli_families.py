"""The coreference command line scores the heads of any family load_model reads: a tiny random GPT-2 and Llama
(a causal decoder's pronoun sees only the candidates before it), each alone and compared with the other; an
encoder-decoder is refused in one line."""

from __future__ import annotations

import csv

import pytest
from conftest import ROOT
from families import make_family, make_seq2seq

from attention.analysis.coref.cli import main

SUITE = ROOT / "data" / "coref_examples.jsonl"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return {family: make_family(tmp_path_factory.mktemp(family), family) for family in ("gpt2", "llama")}


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_scores_a_causal_decoder(folders, family, capsys, tmp_path):
    out = tmp_path / "heads.csv"
    assert main([str(SUITE), "--model", str(folders[family]), "--top", "3", "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"model: {folders[family]}" in printed and "layers x" in printed and "baselines: nearest" in printed
    rows = list(csv.DictReader(out.open()))
    assert len(rows) > 0 and all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows)


def test_compares_two_families(folders, capsys):
    argv = [str(SUITE), "--model", str(folders["gpt2"]), "--compare", str(folders["llama"]), "--top", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"compare: {folders['gpt2']} best L" in printed and f"vs {folders['llama']} best L" in printed


def test_an_encoder_decoder_is_refused(tmp_path, capsys):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    assert main([str(SUITE), "--model", str(folder)]) == 2
    assert "encoder-decoder" in capsys.readouterr().err
