"""Per-head statistics over a corpus: batched, length-bucketed and padded, equal to each text scored alone;
the command line's Parquet parts resume where a run stopped; Ray Data gives the local engine's numbers."""

from __future__ import annotations

import argparse
import importlib.util

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from conftest import ROOT, make_tiny
from families import make_family

from attention import encode, load_model
from attention.analysis.corpus import SHARES, STATS, head_stats, score_batch
from attention.analysis.corpus import cli as corpus_cli
from attention.analysis.corpus.engines import batches
from attention.analysis.runs import RunError
from attention.analysis.stats import PATTERNS, pattern_labels, punctuation_mask
from attention.analysis.stats import head_stats as text_head_stats

pytestmark = pytest.mark.xdist_group("ray")  # the modules that start Ray share one worker, so one Ray (conftest.py)
TEXTS = [
    "The cat sat on the mat.",
    "The animal didn't cross the street because it was too tired.",
    "She read the book, and he ran!",
    "The trophy doesn't fit in the suitcase because it is too big.",
    "It was tired.",
    "The street was wide; the animal was tired, and it sat.",
    "He read.",
]


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def double_model(request, tmp_path_factory):
    """A tiny random encoder (BERT) or causal decoder with no [CLS]/[SEP] (GPT-2), in float64."""
    folder = tmp_path_factory.mktemp(request.param)
    folder = make_tiny(folder) if request.param == "bert" else make_family(folder, "gpt2")
    model, tokenizer = load_model(folder)
    return model.double(), tokenizer


def alone(model, tokenizer, text: str) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """One text scored by itself, unpadded: stats.head_stats, its labels and its length."""
    enc = encode(tokenizer, text, max_length=model.config.max_position_embeddings)
    with torch.inference_mode():
        maps = np.stack([a[0].numpy() for a in model(enc.input_ids, enc.attention_mask, enc.token_type_ids).attentions])
    stats = text_head_stats(maps, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))
    return stats, pattern_labels(stats, len(enc.tokens)), len(enc.tokens)


def test_each_text_of_a_padded_batch_scores_as_it_does_alone(double_model):
    model, tokenizer = double_model
    rows = pd.DataFrame(score_batch(model, tokenizer, range(len(TEXTS)), TEXTS))
    n_layers, H = model.config.num_hidden_layers, model.config.num_attention_heads
    assert len(rows) == len(TEXTS) * n_layers * H
    for i, text in enumerate(TEXTS):
        stats, labels, L = alone(model, tokenizer, text)
        mine = rows[rows.text == i].sort_values(["layer", "head"])
        assert (mine.tokens == L).all()
        for name in STATS:
            np.testing.assert_allclose(mine[name].to_numpy(), stats[name].ravel(), rtol=0, atol=1e-6)
        assert mine.pattern.tolist() == labels.ravel().tolist()


def test_corpus_means_are_token_weighted_over_every_text(double_model):
    model, tokenizer = double_model
    frame = head_stats(model, tokenizer, TEXTS, batch_size=3)  # 3 batches, the last of one text
    scored = [alone(model, tokenizer, text) for text in TEXTS]
    lengths = np.array([L for _, _, L in scored])
    assert (frame.tokens == lengths.sum()).all()
    assert list(frame.columns) == ["layer", "head", "tokens", *STATS, *SHARES]
    for name in STATS:
        expected = sum(s[name] * L for s, _, L in scored) / lengths.sum()  # (n_layers, H)
        np.testing.assert_allclose(frame[name].to_numpy(), expected.ravel(), rtol=0, atol=1e-6)
    for label, share in zip(PATTERNS, SHARES):
        expected = np.mean([labels == label for _, labels, _ in scored], axis=0)
        np.testing.assert_allclose(frame[share].to_numpy(), expected.ravel(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(frame[list(SHARES)].sum(axis=1), 1.0)
    if not any(encode(tokenizer, t).special[0] for t in TEXTS):  # a decoder with no [CLS]/[SEP]: as stats.py
        assert (frame.to_cls == 0).all() and (frame.to_sep == 0).all()


def test_the_order_of_the_texts_changes_nothing(double_model):
    model, tokenizer = double_model
    forward = head_stats(model, tokenizer, TEXTS, batch_size=2)
    backward = head_stats(model, tokenizer, TEXTS[::-1], batch_size=4)
    pd.testing.assert_frame_equal(forward, backward, rtol=0, atol=1e-9)


def test_unknown_engine_and_empty_corpus_are_refused(double_model):
    model, tokenizer = double_model
    with pytest.raises(ValueError, match="engine"):
        head_stats(model, tokenizer, TEXTS, engine="spark")
    with pytest.raises(ValueError, match="at least one text"):
        head_stats(model, tokenizer, [])
    with pytest.raises(ValueError, match="encoder or a causal decoder"):
        head_stats(object(), tokenizer, TEXTS)


# ---- the command line: Parquet parts, resumed --------------------------------------------------------


def cli_args(corpus, folder, out, *extra) -> argparse.Namespace:
    return corpus_cli.parser().parse_args([str(corpus), "--model", str(folder), "--out", str(out), *extra])


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    folder = make_tiny(tmp_path_factory.mktemp("tiny"))
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 3) + "\n", encoding="utf-8")  # 21 texts
    return folder, corpus


def parts(out) -> pd.DataFrame:
    frame = pq.read_table(out / corpus_cli.PARTS).to_pandas()
    return frame.sort_values(["text", "layer", "head"]).reset_index(drop=True)


def test_a_stopped_run_resumes_and_counts_each_text_once(tiny_corpus, tmp_path):
    folder, corpus = tiny_corpus
    whole = corpus_cli.run(cli_args(corpus, folder, tmp_path / "whole", "--batch-size", "4"))
    stopped = cli_args(corpus, folder, tmp_path / "stopped", "--batch-size", "4")
    corpus_cli.run(stopped, stop_after=2)
    assert not (tmp_path / "stopped" / corpus_cli.AGGREGATE).exists()
    assert len(corpus_cli.done_texts(tmp_path / "stopped")) == 8
    (tmp_path / "stopped" / corpus_cli.PARTS / ".part-000000003.parquet").write_bytes(b"PAR1 cut short")  # killed
    corpus_cli.run(stopped)
    assert corpus_cli.done_texts(tmp_path / "stopped") == set(range(21))
    resumed = parts(tmp_path / "stopped")
    assert (resumed.groupby("text").size() == 2 * 4).all()  # every text once: 2 layers x 4 heads
    pd.testing.assert_frame_equal(resumed, parts(whole), rtol=0, atol=1e-6)
    ours = pd.read_parquet(tmp_path / "stopped" / corpus_cli.AGGREGATE)
    pd.testing.assert_frame_equal(ours, pd.read_parquet(whole / corpus_cli.AGGREGATE), rtol=0, atol=1e-6)
    model, tokenizer = load_model(folder)
    direct = head_stats(model, tokenizer, TEXTS * 3)
    pd.testing.assert_frame_equal(ours, direct, rtol=0, atol=1e-6)


def test_a_run_of_another_model_is_not_added_to(tiny_corpus, tmp_path):
    folder, corpus = tiny_corpus
    corpus_cli.run(cli_args(corpus, folder, tmp_path, "--limit", "3"))
    other = make_tiny(tmp_path / "other", seed=1)
    with pytest.raises(RunError, match="holds a run of another model: choose another --out"):
        corpus_cli.run(cli_args(corpus, other, tmp_path, "--limit", "3"))


# ---- Ray Data ----------------------------------------------------------------------------------------


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_ray_data_gives_the_local_numbers(tiny_corpus):
    folder, _ = tiny_corpus
    model, tokenizer = load_model(folder)
    local = head_stats(model, tokenizer, TEXTS * 3, batch_size=4)
    distributed = head_stats(model, tokenizer, TEXTS * 3, engine="ray", batch_size=4)
    pd.testing.assert_frame_equal(distributed, local, rtol=0, atol=1e-6)
    numbered = [(i, text, 10 * i + 3) for i, text in enumerate(TEXTS)]  # lines as a file with gaps gives them
    kept = pd.concat(map(pd.DataFrame, batches("ray", model, tokenizer, numbered, batch_size=4)))
    kept = kept.groupby("text")[["line", "content"]].agg(set)  # one line and text per text, in every row of it
    assert kept.to_dict("list") == {"line": [{10 * i + 3} for i in range(7)], "content": [{t} for t in TEXTS]}


@pytest.mark.slow  # 105 s on a busy 2-core machine
def test_a_killed_command_line_resumes_and_counts_each_text_once(tmp_path):
    """The command line in its own process, killed (SIGKILL) once some parts are written, then run again:
    every text of the corpus once in the parts, and the aggregate equal to scoring the corpus directly."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from attention.analysis.texts import read_texts

    corpus = ROOT / "data" / "gap-development.jsonl"
    out = tmp_path / "out"
    command = [sys.executable, "-m", "attention.analysis.corpus", str(corpus), "--out", str(out)]
    command += ["--batch-size", "2", "--limit", "60"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(corpus_cli.done_texts(out)) < 6 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    killed_at = corpus_cli.done_texts(out)
    assert 6 <= len(killed_at) < 60 and not (out / corpus_cli.AGGREGATE).exists()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert corpus_cli.done_texts(out) == set(range(60))
    model, tokenizer = load_model()
    counts = parts(out).groupby("text").size()
    assert (counts == model.config.num_hidden_layers * model.config.num_attention_heads).all()  # each text once
    direct = head_stats(model, tokenizer, read_texts(corpus, limit=60), batch_size=2)
    pd.testing.assert_frame_equal(pd.read_parquet(out / corpus_cli.AGGREGATE), direct, rtol=0, atol=1e-6)
