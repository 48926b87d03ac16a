"""The corpus command's --measures: each text's first-token shares (raw and value-weighted) and the statistics of its
value-weighted maps, per head, equal to computing them directly on the text alone (mixing.sink_shares, norm_maps
with stats.head_stats); the corpus means token-weighted as the other statistics; without --measures, no new column."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import make_tiny
from families import make_family

from attention import encode, load_model
from attention.analysis.corpus import STATS, head_stats, score_batch
from attention.analysis.corpus import cli as corpus_cli
from attention.analysis.mixing import norm_maps, sink_shares
from attention.analysis.runs import RunError
from attention.analysis.stats import head_stats as text_head_stats
from attention.analysis.stats import punctuation_mask

pytestmark = pytest.mark.xdist_group("ray")  # the modules that start Ray share one worker, so one Ray (conftest.py)
TEXTS = ["The cat sat on the mat.", "The animal didn't cross the street because it was too tired.", "He read."]
MEASURED = ("to_first", "to_first_weighted", *(f"{name}_weighted" for name in STATS))


@pytest.fixture(scope="module", params=["bert", "llama"])
def tiny(request, tmp_path_factory):
    """A tiny random encoder (BERT, [CLS]/[SEP]) or grouped-query causal decoder (Llama): folder, model, tokenizer."""
    folder = tmp_path_factory.mktemp(request.param)
    folder = make_tiny(folder) if request.param == "bert" else make_family(folder, "llama")
    return (folder, *load_model(folder))


def direct(model, tokenizer, text: str) -> tuple[dict[str, np.ndarray], int]:
    """MEASURED of one text computed from the library's own functions, (n_layers, H) each, and its length."""
    enc = encode(tokenizer, text, max_length=model.config.max_position_embeddings)
    found = dict(sink_shares(model, enc.input_ids))
    norms = np.stack(norm_maps(model, enc.input_ids).heads).astype(np.float64)  # (n_layers, H, L, L)
    shares = norms / norms.sum(axis=-1, keepdims=True)
    stats = text_head_stats(shares, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))
    found |= {f"{name}_weighted": stats[name] for name in STATS}
    return found, len(enc.tokens)


def test_each_texts_measures_are_the_library_functions_on_it_alone(tiny):
    folder, model, tokenizer = tiny
    plain = pd.DataFrame(score_batch(model, tokenizer, range(len(TEXTS)), TEXTS))
    assert not set(MEASURED) & set(plain.columns)  # the default is unchanged
    rows = pd.DataFrame(score_batch(model, tokenizer, range(len(TEXTS)), TEXTS, measures=("weighted", "sinks")))
    assert list(rows.columns) == [*plain.columns[: 5 + len(STATS)], *MEASURED, "pattern", "content"]
    pd.testing.assert_frame_equal(rows[plain.columns], plain)
    for i, text in enumerate(TEXTS):
        expected, _ = direct(model, tokenizer, text)
        mine = rows[rows.text == i].sort_values(["layer", "head"])
        for name in MEASURED:  # norm_maps keeps float32 maps: its shares to 1e-5
            np.testing.assert_allclose(mine[name].to_numpy(), expected[name].ravel(), rtol=0, atol=1e-5, err_msg=name)
    assert not np.allclose(rows.to_first, rows.to_first_weighted, atol=1e-3)
    only = pd.DataFrame(score_batch(model, tokenizer, [0], TEXTS[:1], measures=("sinks",)))
    assert {"to_first", "to_first_weighted"} <= set(only.columns) and "entropy_weighted" not in only.columns


def test_the_command_writes_token_weighted_means_and_keeps_its_measures(tiny, tmp_path, capsys):
    folder, model, tokenizer = tiny
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 2) + "\n", encoding="utf-8")
    argv = [str(corpus), "--model", str(folder), "--out", str(tmp_path / "out"), "--batch-size", "2"]
    assert corpus_cli.main([*argv, "--measures", "sinks,weighted"]) == 0
    frame = pq.read_table(tmp_path / "out" / corpus_cli.AGGREGATE).to_pandas()
    scored = [direct(model, tokenizer, text) for text in TEXTS * 2]
    total = sum(L for _, L in scored)
    for name in MEASURED:
        expected = sum(found[name] * L for found, L in scored) / total
        np.testing.assert_allclose(frame[name].to_numpy(), expected.ravel(), rtol=0, atol=1e-5, err_msg=name)
    plain = head_stats(model, tokenizer, TEXTS * 2)
    pd.testing.assert_frame_equal(frame[plain.columns], plain, rtol=0, atol=1e-6)
    with pytest.raises(RunError, match="holds a run of another"):  # resumed with other columns: refused
        corpus_cli.run(corpus_cli.parser().parse_args(argv))
    with pytest.raises(SystemExit) as exit:
        corpus_cli.main([*argv, "--measures", "sinks,flow"])
    assert exit.value.code == 2 and "unknown measure 'flow'" in capsys.readouterr().err


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_ray_data_gives_the_local_measures(tiny):
    folder, model, tokenizer = tiny
    local = head_stats(model, tokenizer, TEXTS, batch_size=2, measures=("sinks", "weighted"))
    distributed = head_stats(model, tokenizer, TEXTS, engine="ray", batch_size=2, measures=("sinks", "weighted"))
    pd.testing.assert_frame_equal(distributed, local, rtol=0, atol=1e-6)  # as test_corpus.py
    assert set(MEASURED) <= set(local.columns)
