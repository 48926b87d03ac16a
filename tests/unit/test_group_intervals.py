"""Group by: each group's counts, baselines and exact 95% intervals in the groups' table, in the grids' hover,
in the note where the groups do not pair up, and in the grouped CSV."""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest
from test_app import chart, no_errors, start
from test_app_coref import span_lines, upload

from attention.analysis.coref import group, score_heads
from attention.analysis.coref.metrics import best_head
from attention.analysis.coref.stats import clopper_pearson


def said(k: int, n: int) -> str:
    low, high = clopper_pearson(k, n)
    return f"{k} of {n}, [{float(low):.2f}, {float(high):.2f}]"


@pytest.fixture
def scored(tiny_dir):
    """The page grouped by gender over lines without another field (so no pairing), and the same scores."""
    from attention import load_model

    at = start(view="coref", coref="suite", model=str(tiny_dir))
    rows = [{k: v for k, v in r.items() if k != "frame"} for r in span_lines()]
    at, examples = upload(at, rows, name="genders.jsonl")
    at.selectbox(key="coref_by").select("gender").run()
    no_errors(at)
    result = score_heads(*load_model(str(tiny_dir)), examples)
    return at, result, group(result, "gender")


def test_the_groups_table_has_counts_baselines_and_intervals(scored):
    at, result, groups = scored
    table = next(d.value for d in at.dataframe if "gender" in d.value.columns)
    layer, head = best_head(result)
    assert list(table["gender"]) == ["male", "female"]
    for i, name in enumerate(["male", "female"]):
        g = groups[name]
        own_layer, own_head, accuracy = g.ranked(1)[0]
        row = table.iloc[i]
        assert (row["examples counted"], row["left out"]) == (g.n, len(g.excluded))
        assert (row["baseline nearest"], row["baseline first"]) == (
            round(g.baselines["nearest"], 3),
            round(g.baselines["first"], 3),
        )
        assert (row["best head"], row["best accuracy"]) == (f"L{own_layer} H{own_head}", round(accuracy, 3))
        assert row["right, 95% interval"] == said(int(g.correct[:, own_layer, own_head].sum()), g.n)
        assert row[f"L{layer} H{head} (best overall)"] == said(int(g.correct[:, layer, head].sum()), g.n)


def test_each_head_of_a_group_grid_says_its_count_and_interval_on_hover(scored):
    at, _, groups = scored
    g = groups["female"]
    markers = chart(at, "accuracy, gender = female")["data"][-1]  # the invisible click markers carry the hover
    right = g.correct.sum(axis=0)
    n_layers, n_heads = g.accuracy.shape
    expected = [said(int(right[layer, head]), g.n) for layer in range(n_layers) for head in range(n_heads)]
    assert [text.split(", ", 1)[1] for text in markers["hovertext"]] == expected
    assert markers["hovertext"][0].startswith("L0 H0: accuracy ")


def test_groups_that_do_not_pair_up_are_compared_by_their_intervals(scored):
    at, result, groups = scored
    layer, head = best_head(result)
    note = next(c.value for c in at.caption if "do not pair up" in c.value).replace("\\", "")
    male, female = (said(int(groups[v].correct[:, layer, head].sum()), groups[v].n) for v in ("male", "female"))
    assert f"layer {layer}, head {head}, is right on {male} on male and on {female} on female" in note


def test_the_grouped_csv_holds_every_head_of_every_group(scored):
    from attention.analysis.coref.groups_csv import HEADER, groups_csv_text

    at, _, groups = scored
    assert any(b.label == "Download every head's accuracy per group (CSV)" for b in at.get("download_button"))
    text = groups_csv_text("gender", [("male", groups["male"]), ("female", groups["female"])])
    rows = list(csv.DictReader(text.splitlines()))
    assert list(rows[0]) == HEADER
    n_layers, n_heads = groups["male"].accuracy.shape
    assert len(rows) == 2 * n_layers * n_heads
    for row in rows:
        g, layer, head = groups[row["group"]], int(row["layer"]), int(row["head"])
        k = int(g.correct[:, layer, head].sum())
        low, high = clopper_pearson(k, g.n)
        assert row["field"] == "gender" and (int(row["correct"]), int(row["examples"])) == (k, g.n)
        assert row["accuracy"] == f"{g.accuracy[layer, head]:.4f}"
        assert (row["ci95_low"], row["ci95_high"]) == (f"{float(low):.4f}", f"{float(high):.4f}")
        assert (row["baseline_nearest"], row["baseline_first"]) == (
            f"{g.baselines['nearest']:.4f}",
            f"{g.baselines['first']:.4f}",
        )
    np.testing.assert_equal(sorted({r["group"] for r in rows}), ["female", "male"])


def test_the_grouped_csvs_file_name_says_the_field_the_model_and_the_examples(scored, tiny_dir, monkeypatch):
    """Two models' (or two suites') grouped CSVs do not overwrite each other in a downloads folder."""
    import streamlit as st

    at, _, _ = scored
    names = {}
    real = st.download_button

    def recording(label, *args, **kwargs):
        names[label] = kwargs.get("file_name")
        return real(label, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    at.run()
    no_errors(at)
    name = names["Download every head's accuracy per group (CSV)"]
    assert name.startswith("coreference-heads-by-gender_") and name.endswith(".csv")
    assert f"_{tiny_dir.name}_" in name and "genders" in name.rsplit("_", 1)[1]
    assert re.fullmatch(r"[A-Za-z0-9._-]+", name)
