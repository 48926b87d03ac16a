"""The analysis views in the app (AppTest): each figure shows the numbers its function computes."""

from __future__ import annotations

import json

import numpy as np
from test_app import SENTENCE, decode, no_errors, start, submit

from attention.analysis.ablation import ablate
from attention.analysis.gqa import map_change, to_grouped
from attention.analysis.query_key import query_key
from attention.analysis.rollout import as_attention_tuple, attention_flow, rollout
from attention.analysis.stats import head_stats, pattern_labels, punctuation_mask
from attention.runs.run import run_sentence
from attention.tracing.trace import trace_layer
from ui.compute.workers import flow_workers
from viz.overview import SHORT_LABELS


def figures(at) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def traces_named(at, name: str) -> list[dict]:
    return [t for fig in figures(at) for t in fig["data"] if t.get("name") == name]


def test_head_stats_table_and_patterns_on_the_overview(minilm):
    model, tokenizer = minilm
    run = run_sentence(model, tokenizer, SENTENCE)
    enc = run.encoded
    stats = head_stats(run.attentions, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))
    labels = pattern_labels(stats, len(enc.tokens))
    at = start(view="stats", layer="2", head="5")
    no_errors(at)
    frame = at.dataframe[0].value
    assert len(frame) == run.n_layers * run.n_heads
    row = frame[(frame["layer"] == 2) & (frame["head"] == 5)].iloc[0]
    assert row["pattern"] == labels[2, 5]
    assert abs(row["entropy"] - stats["entropy"][2, 5]) < 1e-3
    # the 2-D map of heads: one point per head, each carrying [layer, head]
    points = [
        tuple(int(v) for v in p)
        for fig in figures(at)
        for t in fig["data"]
        if t.get("name") == "heads"
        for p in decode(t["customdata"]).reshape(-1, 2)
    ]
    assert sorted(points) == [(layer, h) for layer in range(run.n_layers) for h in range(run.n_heads)]

    at.segmented_control(key="view").set_value("Overview").run()
    at.checkbox(key="overview_patterns").check().run()
    no_errors(at)
    written = {a["text"] for fig in figures(at) for a in fig["layout"].get("annotations", [])}
    assert {SHORT_LABELS.get(label, label) for label in np.unique(labels)} <= written  # "heterogeneous": "hetero."


def test_rollout_and_flow_beside_raw_attention(minilm, monkeypatch):
    model, tokenizer = minilm
    solved, workers = [], flow_workers()
    real = workers.solve_rows
    monkeypatch.setattr(workers, "solve_rows", lambda *args: solved.append(args[1]) or real(*args))
    # a sentence of its own: flows are kept for the process, and a flow another test asked for is not solved again
    own = "The trophy would not fit in the brown suitcase because it was too big."
    run = run_sentence(model, tokenizer, own)
    at = start(view="rollout", layer="3", s=own)
    no_errors(at)
    [raw] = traces_named(at, "attention")
    [derived] = traces_named(at, "derived")
    np.testing.assert_allclose(decode(raw["z"]), run.attentions[3].mean(axis=0), atol=1e-6)
    expected = rollout(as_attention_tuple(run.attentions))[3, 0].numpy()
    np.testing.assert_allclose(decode(derived["z"]), expected, atol=1e-6)

    at.radio(key="rollout_kind").set_value("Flow").run()
    no_errors(at)
    [derived] = traces_named(at, "derived")
    flow = attention_flow(as_attention_tuple(run.attentions[:4]))
    np.testing.assert_allclose(decode(derived["z"]), flow, atol=1e-6)
    assert len(solved) == 1 and len(solved[0]) == len(flow)  # in a worker process (ui/compute/workers.py): every row


def test_flow_above_its_limit_is_explained_not_run():
    at = start(view="rollout")
    at.radio(key="rollout_kind").set_value("Flow").run()
    submit(at, " ".join(["word"] * 80))
    no_errors(at)
    assert any("offered up to 64 tokens" in i.value for i in at.info)
    assert traces_named(at, "derived")  # rollout shown instead


def test_query_key_panel_reads_the_recorded_pass(minilm):
    model, tokenizer = minilm
    enc = tokenizer(SENTENCE, return_tensors="pt")
    trace = trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=1)
    at = start(view="qk", layer="1", head="4")
    at.selectbox(key="qk_query").set_value(9).run()
    no_errors(at)
    qk = query_key(trace, 4, 9)
    np.testing.assert_allclose(decode(traces_named(at, "k")[0]["z"]), qk.k, atol=1e-5)
    np.testing.assert_allclose(decode(traces_named(at, "probability")[0]["x"]), qk.probs, atol=1e-6)


def test_ablation_view_compares_before_and_after(minilm):
    model, tokenizer = minilm
    at = start(view="ablation", layer="1", head="2")
    no_errors(at)
    assert at.multiselect(key="ablate_heads").value == [(1, 2)]
    enc = tokenizer(SENTENCE, return_tensors="pt")
    mask = np.ones((6, 12), dtype=np.float32)
    mask[1, 2] = 0
    expected = ablate(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], head_mask=mask)
    [cosine] = traces_named(at, "hidden-state cosine")
    np.testing.assert_allclose(decode(cosine["y"]), expected.hidden_cosine, atol=1e-6)
    assert any(f"{expected.embedding_cosine:.4f}" in m.value for m in at.markdown)
    assert any("no masked-language-model head" in c.value.replace("\\", "") for c in at.caption)  # MiniLM has none

    at.multiselect(key="ablate_heads").set_value([]).run()
    no_errors(at)
    assert any("Pick one or more heads" in i.value for i in at.info)


def test_grouped_query_comparison_and_fused_panel(minilm):
    model, tokenizer = minilm
    run = run_sentence(model, tokenizer, SENTENCE)
    at = start(view="efficient")
    at.select_slider(key="gqa_kv").set_value(4).run()
    no_errors(at)
    grouped = run_sentence(to_grouped(model, 4), tokenizer, SENTENCE)
    grid = next(
        t for fig in figures(at) for t in fig["data"] if t["type"] == "heatmap" and np.shape(decode(t["z"])) == (6, 12)
    )
    np.testing.assert_allclose(decode(grid["z"]), map_change(run.attentions, grouped.attentions), atol=1e-6)
    assert sum(t["type"] == "scatter" for fig in figures(at) for t in fig["data"]) >= 2  # the fused panel


def test_analysis_views_survive_the_url():
    for view in ("stats", "rollout", "qk", "ablation", "efficient"):
        at = start(view=view)
        no_errors(at)
        assert at.query_params["view"] == view


def test_ablation_shows_mask_predictions_for_a_checkpoint_with_an_mlm_head(tmp_path):
    from conftest import make_tiny

    from attention import load_bert
    from attention.mlm import load_mlm_head

    folder = make_tiny(tmp_path / "mlm", "BertForMaskedLM")
    at = start(view="ablation", layer="1", head="2")
    at.text_input(key="model_input").input(str(folder))
    next(b for b in at.button if b.label == "Load model").click()
    at.run()
    submit(at, "the cat sat on the [MASK] .")
    no_errors(at)
    model, tokenizer = load_bert(str(folder))
    enc = tokenizer("the cat sat on the [MASK] .", return_tensors="pt")
    mask = np.ones((2, 4), dtype=np.float32)
    mask[1, 2] = 0
    expected = ablate(
        model,
        enc["input_ids"],
        enc["attention_mask"],
        enc["token_type_ids"],
        head_mask=mask,
        mlm_head=load_mlm_head(model),
        tokenizer=tokenizer,
    )
    table = at.dataframe[-1].value
    assert list(table["before"]) == [token for token, _ in expected.predictions.before]
    assert list(table["after"]) == [token for token, _ in expected.predictions.after]
    np.testing.assert_allclose(table["p after"], [round(p, 4) for _, p in expected.predictions.after], atol=1e-4)


def load_in_sidebar(at, folder):
    at.text_input(key="model_input").input(str(folder))
    next(b for b in at.button if b.label == "Load model").click()
    return at.run()


def test_a_broken_mlm_head_is_a_caption_and_ablation_still_works(tmp_path):
    import torch
    from test_ablation import mlm_with_edited_weights

    folder = mlm_with_edited_weights(tmp_path / "broken", lambda w: w.update({"cls.predictions.bias": torch.zeros(98)}))
    at = load_in_sidebar(start(view="ablation", layer="1", head="2"), folder)
    no_errors(at)
    assert traces_named(at, "hidden-state cosine")
    assert any("masked-LM head does not load" in c.value.replace("\\", "") for c in at.caption)


def test_every_analysis_view_on_a_one_layer_one_head_checkpoint(tmp_path):
    from conftest import make_tiny

    folder = make_tiny(tmp_path / "one", num_hidden_layers=1, num_attention_heads=1)
    at = load_in_sidebar(start(view="ablation", layer="3", head="5"), folder)
    for view in ("Head stats", "Rollout & flow", "Query·key", "Ablation", "GQA & fused"):
        at.segmented_control(key="view").set_value(view).run()
        no_errors(at)
    at.segmented_control(key="view").set_value("Ablation").run()
    assert at.multiselect(key="ablate_heads").value == [(0, 0)]  # the clamped selection, ablated


def test_heads_chosen_on_a_bigger_model_are_dropped_with_a_notice(tiny_dir):
    at = start(view="ablation", layer="5", head="11")
    assert at.multiselect(key="ablate_heads").value == [(5, 11)]
    at = load_in_sidebar(at, tiny_dir)
    no_errors(at)
    assert any("no longer ablated: L5 H11" in i.value for i in at.info)
