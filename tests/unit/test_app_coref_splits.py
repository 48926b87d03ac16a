"""Any suite with a `split` field: the best head chosen on one split and reported on the others."""

from __future__ import annotations

import pytest
from test_app import no_errors, start
from test_app_coref import span_lines, upload

from attention.analysis.coref import group, score_heads


@pytest.mark.parametrize("names", [("dev", "test"), ("b", "a")])
def test_a_split_field_gets_a_best_head_chosen_on_one_split_and_reported_on_the_other(tiny_dir, names):
    from attention import load_model
    from attention.analysis.coref.metrics import held_out_best

    rows = [{**r, "split": names[i % 2]} for i, r in enumerate(span_lines())]
    at = start(view="coref", coref="suite", model=str(tiny_dir))
    at, examples = upload(at, rows, name=f"split-{names[0]}.jsonl")
    no_errors(at)
    parts = group(score_heads(*load_model(str(tiny_dir)), examples), "split")
    chosen_on, other = names  # "dev" by its name; otherwise the first split in the file
    held = held_out_best(parts[chosen_on], parts[other])
    assert any(f"A best head chosen on “{chosen_on}”" in h.value for h in at.subheader)
    shown = next(d.value for d in at.dataframe if "that split's own best" in d.value.columns)
    assert list(shown["split"]) == [other]
    assert shown[f"L{held.layer} H{held.head}"].tolist() == [round(held.accuracy, 3)]


def test_a_suite_without_splits_has_no_such_report(tiny_dir):
    at = start(view="coref", coref="suite", model=str(tiny_dir))
    at, _ = upload(at, span_lines(), name="nosplit.jsonl")
    no_errors(at)
    assert not any("A best head chosen on" in h.value for h in at.subheader)
