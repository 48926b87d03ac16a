"""Coreference suite scoring through the engines: a Ray Data job gives the local engine's scores, example by
example and head by head, and the command line runs it; an unknown engine is refused by name."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from conftest import ROOT

from attention.analysis.coref import load_examples, score_heads
from attention.analysis.coref.cli import main

pytestmark = pytest.mark.xdist_group("ray")  # the modules that start Ray share one worker, so one Ray (conftest.py)
SUITE = ROOT / "data" / "coref_examples.jsonl"
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")


@pytest.fixture(scope="module")
def examples():
    return load_examples(SUITE)[:12]


def scores(result) -> dict[int, np.ndarray]:
    """Example index -> its (n_layers, H, n_candidates) pronoun -> candidate attention, answered or not."""
    return {d.index: d.attention for d in [*result.details, *result.unanswered]}


@needs_ray
@pytest.mark.slow  # 24 s on a busy 2-core machine
def test_ray_gives_the_local_scores_per_example_and_head(minilm, examples):
    model, tokenizer = minilm
    local = score_heads(model, tokenizer, examples, batch_size=4)
    distributed = score_heads(model, tokenizer, examples, batch_size=4, engine="ray")
    assert importlib.import_module("ray").is_initialized()
    assert len(local.details) > 4  # several buckets, so several Ray calls
    assert scores(distributed).keys() == scores(local).keys()
    for i, attention in scores(local).items():
        np.testing.assert_allclose(scores(distributed)[i], attention, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(distributed.correct, local.correct)
    np.testing.assert_array_equal(distributed.accuracy, local.accuracy)
    assert [e.index for e in distributed.excluded] == [e.index for e in local.excluded]


@pytest.mark.slow  # 5-15 s alone: the full command runs it, the everyday selection not
@needs_ray
def test_the_command_line_runs_ray(examples, tmp_path, capsys):
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(line for line in SUITE.read_text().splitlines(keepends=True)[:12]))
    printed = {}
    for engine in ("local", "ray"):
        assert main([str(suite), "--top", "5", "--engine", engine]) == 0
        printed[engine] = re.sub(r"scored in [\d.]+ s", "", capsys.readouterr().out)
    assert "12 examples" in printed["ray"]
    assert printed["ray"] == printed["local"]


def test_an_unknown_engine_is_refused_by_name(minilm, examples):
    model, tokenizer = minilm
    with pytest.raises(ValueError, match="engine must be one of local, ray, not 'spark'"):
        score_heads(model, tokenizer, examples, engine="spark")
    with pytest.raises(SystemExit):
        main([str(SUITE), "--engine", "spark"])
