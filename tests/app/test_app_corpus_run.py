"""A corpus run's folder opened in the Head stats view (ui/views/corpus_stats.py): the layer × head grid of the
chosen pattern's share or the entropy, and the table of every head, both the aggregate's figures; the folder
and the choice come from the link. A folder that is not a finished run, or lies outside ATTENTION_FILE_DIRS,
is one line of error, and the page keeps what it had. The aggregate's rows are bounded by its footer."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from test_app import decode, heatmaps, start
from test_corpus_results import tiny_run

from attention.analysis import runs
from attention.analysis.corpus import cli as corpus_cli
from attention.analysis.stats import PATTERNS
from ui.page.page import as_written
from ui.serve import corpus_runs
from ui.serve.sources import FILES_VAR, FileRefused
from ui.state.state import STATS_MEASURES


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    return tiny_run(tmp_path_factory.mktemp("corpus"))[0]


def grid(at) -> dict:
    (fig,) = [f for f in heatmaps(at) if "corpus" in f["layout"]["title"]["text"]]
    return fig


def errors(at) -> list[str]:
    """The page's error lines as a reader sees them (markdown's escapes undone)."""
    return [as_written(e.value) for e in at.error]


def test_a_run_opens_as_a_grid_of_the_chosen_measure_and_a_table_of_every_head(finished):
    heads = pd.read_parquet(finished / corpus_cli.AGGREGATE)
    at = start(view="stats", over="corpus", run=str(finished), measure="diagonal")
    assert not at.exception and not errors(at), errors(at)
    fig = grid(at)
    n_layers, n_heads = heads.layer.max() + 1, heads["head"].max() + 1
    expected = heads.sort_values(["layer", "head"]).share_diagonal.to_numpy().reshape(n_layers, n_heads)
    np.testing.assert_array_equal(decode(fig["data"][0]["z"]), expected)
    assert "diagonal" in fig["layout"]["title"]["text"]
    assert fig["layout"]["xaxis"]["ticktext"] == [f"H{h}" for h in range(n_heads)]
    assert fig["layout"]["yaxis"]["ticktext"] == [f"L{layer}" for layer in range(n_layers)]
    assert fig["data"][0]["colorbar"]["title"]["text"] == "share of texts"
    assert fig["layout"]["width"] <= 1280
    assert (at.query_params["run"], at.query_params["measure"]) == (str(finished), "diagonal")  # kept in the link
    table = at.dataframe[0].value
    pd.testing.assert_frame_equal(table.reset_index(drop=True), heads[list(corpus_runs.COLUMNS)])
    at.selectbox(key="stats_measure").set_value(STATS_MEASURES["entropy"]).run()
    fig = grid(at)
    np.testing.assert_array_equal(decode(fig["data"][0]["z"]), heads.entropy.to_numpy().reshape(n_layers, n_heads))
    assert fig["data"][0]["colorbar"]["title"]["text"] == "entropy (nats)"
    assert at.query_params["run"] == str(finished) and "measure" not in at.query_params  # the default: left out


def not_finished(finished, tmp_path) -> list[tuple[str, str]]:
    """Folders that are no finished run, each with what the page says of it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    stopped = shutil.copytree(finished, tmp_path / "stopped")
    (stopped / corpus_cli.AGGREGATE).unlink()  # as a run stopped before its aggregate leaves it
    lost = shutil.copytree(finished, tmp_path / "lost")
    record = json.loads((lost / runs.RUN).read_text())
    record["parts"]["part-000000099.parquet"] = "0" * 64
    (lost / runs.RUN).write_text(json.dumps(record))
    (lost / corpus_cli.AGGREGATE).touch()  # written after the record: only the missing part is wrong
    return [
        (str(empty), "it has no run.json"),
        (str(stopped), "its heads.parquet is missing or older than its run.json"),
        (str(lost), "texts/part-000000099.parquet, listed, is not there"),
        (str(tmp_path / "nowhere"), "there is no folder"),
    ]


def test_a_folder_that_is_not_a_finished_run_is_one_line_and_the_page_keeps_its_state(finished, tmp_path):
    at = start(view="stats", over="corpus", run=str(finished))
    sentence = at.text_area(key="text").value
    for typed, said in not_finished(finished, tmp_path):
        at.text_input(key="stats_run").input(typed).run()
        assert not at.exception
        (line,) = errors(at)
        assert said in line and "\n" not in line, line
        assert not [f for f in heatmaps(at) if "corpus" in f["layout"]["title"]["text"]]
        assert at.text_input(key="stats_run").value == typed and at.text_area(key="text").value == sentence
        assert at.radio(key="stats_over").value == "A corpus run (folder)"
    at.text_input(key="stats_run").input(str(finished)).run()
    assert not errors(at) and grid(at)


def test_a_folder_outside_the_operators_folders_is_refused(finished, tmp_path, monkeypatch):
    listed = tmp_path / "listed"
    listed.mkdir()
    monkeypatch.setenv(FILES_VAR, str(listed))
    at = start(view="stats", over="corpus", run=str(finished))
    assert not at.exception
    assert errors(at) == ["this server reads folders only under the folders its operator lists (ATTENTION_FILE_DIRS)"]
    assert not at.dataframe


def test_the_aggregates_rows_are_bounded_by_its_footer_before_it_is_read(finished, monkeypatch):
    rows = pq.ParquetFile(finished / corpus_cli.AGGREGATE).metadata.num_rows
    monkeypatch.setattr(corpus_runs, "MAX_HEADS", rows - 1)

    def never(*args, **kwargs):
        raise AssertionError("the rows were read")

    monkeypatch.setattr(pq.ParquetFile, "read", never)
    with pytest.raises(corpus_runs.RunFolderError, match=f"{rows:,} rows, more than the {rows - 1:,} read"):
        corpus_runs.read_corpus_run(str(finished))


def tile_hovers(at) -> dict[tuple[int, int], str]:
    """The Overview's hover text of each head, by (layer, head)."""
    for chart in at.get("plotly_chart"):
        for trace in json.loads(chart.proto.spec)["data"]:
            if trace.get("hovertext") and trace.get("customdata"):
                points = decode(trace["customdata"]) if isinstance(trace["customdata"], dict) else trace["customdata"]
                heads = [tuple(int(v) for v in p) for p in np.asarray(points).reshape(-1, 2)]
                return dict(zip(heads, trace["hovertext"], strict=True))
    raise AssertionError("no tiles")


def test_the_overview_labels_each_head_with_its_most_frequent_pattern_over_the_run(finished):
    heads = pd.read_parquet(finished / corpus_cli.AGGREGATE).sort_values(["layer", "head"])
    shares = heads[[f"share_{p}" for p in PATTERNS]].to_numpy()
    expected = {(int(r.layer), int(r.head)): PATTERNS[int(np.argmax(s))] for r, s in zip(heads.itertuples(), shares)}
    assert len(set(expected.values())) > 1  # the run tells heads apart: the labels below are not all one word
    at = start(view="overview", patterns="1", over="corpus", run=str(finished))
    assert not at.exception and not errors(at), errors(at)
    hovers = tile_hovers(at)
    assert set(hovers) == set(expected)
    for head, pattern in expected.items():
        assert hovers[head].endswith(f"<br>{pattern}"), (head, hovers[head])
    assert at.query_params["over"] == "corpus" and at.query_params["run"] == str(finished)  # the link keeps them
    sentence = start(view="overview", patterns="1")  # this sentence's patterns, as before
    assert not sentence.exception and tile_hovers(sentence) != hovers


def test_the_overview_says_when_a_run_is_of_a_model_of_another_shape(finished, tmp_path):
    from families import make_family

    folder = make_family(tmp_path / "gpt2", "gpt2")
    at = start(model=str(folder), view="overview", patterns="1", over="corpus", run=str(finished))
    assert not at.exception
    assert any("6 layers × 12 heads; the model in use has" in as_written(i.value) for i in at.info)


def test_a_run_folder_swapped_for_a_link_after_the_check_is_refused_when_the_aggregate_is_opened(
    finished, tmp_path, monkeypatch
):
    """A link put in place of the run's folder after server_path checked the aggregate's path (a race a visitor
    may win) is not followed when it is opened: it is opened as ui/serve/sources.py's open_under opens files."""
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    shutil.copytree(finished, run)
    shutil.copytree(finished, elsewhere)
    checked = corpus_runs.server_path

    def check_then_swap(typed: str, folder: bool = False):
        where = checked(typed, folder)
        if where.name == corpus_cli.AGGREGATE:
            run.rename(tmp_path / "moved")
            run.symlink_to(elsewhere)
        return where

    assert corpus_runs.read_corpus_run(str(run)).n_layers > 0  # the copy reads as a run
    monkeypatch.setattr(corpus_runs, "server_path", check_then_swap)
    with pytest.raises(FileRefused, match=r"only under the folders its operator lists \(ATTENTION_FILE_DIRS\)$"):
        corpus_runs.read_corpus_run(str(run))
    assert run.is_symlink()
