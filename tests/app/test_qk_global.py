"""The global Q·K view: the normalisation keeps attention and meets the means and mean norms, the vectors
collected are the ones the model used, the figure draws 20,000 points with WebGL, the command line
writes Parquet that the view reads, and the view computes on the bundled model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from families import make_family
from streamlit.proto.WidgetStates_pb2 import WidgetState
from test_app import decode, head_figure, no_errors, start

from attention import load_model
from attention.analysis import qk_global
from attention.analysis.qk_global import COLUMNS, collect, context, head_points, main, read_folder, write_folder
from attention.analysis.qk_project import joint_plane, normalise, project
from attention.analysis.texts import read_texts
from attention.tracing.trace import trace_layer
from ui.compute import stores
from ui.compute.limits import too_long_message
from ui.compute.slots import TooLong
from ui.serve import settings
from ui.views.global_qk import LAID_OUT_TOKENS, token_cap
from viz.global_qk import global_qk_figure, small_multiples

GAP = "data/gap-development.jsonl"


def softmax_rows(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    scores = q.astype(np.float64) @ k.astype(np.float64).T
    scores -= scores.max(1, keepdims=True)
    p = np.exp(scores)
    return p / p.sum(1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_normalise_meets_means_and_mean_norms_and_keeps_attention(seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(2.0, 1.0, (300, 16)) * 0.3  # short queries far from the keys
    k = rng.normal(-1.0, 3.0, (300, 16)) + 5.0
    n = normalise(q, k)
    np.testing.assert_allclose(n.k.mean(0), n.q.mean(0), atol=1e-4)
    q_norm, k_norm = np.linalg.norm(n.q, axis=1).mean(), np.linalg.norm(n.k, axis=1).mean()
    assert abs(q_norm - k_norm) < 1e-4 * q_norm
    assert abs(np.linalg.norm(k, axis=1).mean() - np.linalg.norm(q, axis=1).mean()) > 1.0  # it had work to do
    np.testing.assert_allclose(softmax_rows(n.q, n.k), softmax_rows(q, k), atol=1e-4)


def test_projection_gives_one_point_per_vector():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(120, 8))
    assert project(points, "pca").shape == (120, 2)
    assert project(points, "tsne").shape == (120, 2)
    q_xy, k_xy = joint_plane(points[:60], points[60:], "pca")
    assert q_xy.shape == k_xy.shape == (60, 2)
    with pytest.raises(ValueError, match="method"):
        project(points, "mds")


@pytest.mark.slow  # 65 s on a busy 2-core machine
def test_umap_lays_out_a_small_sample():
    rng = np.random.default_rng(0)
    clusters = np.concatenate([rng.normal(0, 0.1, (40, 6)), rng.normal(5, 0.1, (40, 6))])
    xy = project(clusters, "umap")
    assert xy.shape == (80, 2) and np.isfinite(xy).all()
    inside = np.linalg.norm(xy[:40].mean(0) - xy[:40], axis=1).mean()
    between = np.linalg.norm(xy[:40].mean(0) - xy[40:].mean(0))
    assert between > 3 * inside  # the two clusters stay apart


def test_collected_vectors_are_the_models_and_batches_change_nothing(minilm):
    model, tokenizer = minilm
    texts = read_texts(GAP, limit=5)
    sample = collect(model, tokenizer, texts, layer=3, max_tokens=350)
    assert sample.q.shape == sample.k.shape == (12, 350, 32) and len(sample.tokens) == 350
    one = collect(model, tokenizer, texts[:1], layer=3, max_tokens=10_000)
    n = len(one.tokens)
    trace = trace_layer(model, tokenizer(texts[0], return_tensors="pt")["input_ids"], layer=3)
    np.testing.assert_allclose(one.q, trace.tensor("q_heads")[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(one.k, trace.tensor("k_heads")[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(sample.q[:, :n], one.q, atol=1e-4)  # the first text, padded in a batch of five
    assert sample.tokens[:n] == one.tokens and list(sample.position[:n]) == list(range(n))
    assert one.tokens[0] == "[CLS]" and one.token_kind[0] == "special"


def test_a_rotary_grouped_query_model_gives_its_rotated_and_shared_keys(tmp_path):
    model, tokenizer = load_model(str(make_family(tmp_path / "llama", "llama", num_key_value_heads=2)))
    text = "The cat sat on the mat."
    sample = collect(model, tokenizer, [text], layer=1, heads=[3])
    trace = trace_layer(model, tokenizer(text, return_tensors="pt")["input_ids"], layer=1)
    np.testing.assert_allclose(sample.q[0], trace.tensor("q_rot")[0, 3].numpy(), atol=1e-5)
    np.testing.assert_allclose(sample.k[0], trace.tensor("k_shared")[0, 3].numpy(), atol=1e-5)


def test_context_marks_the_token_among_its_words():
    text = "one two three four five six seven eight nine ten"
    start = text.index("six")
    assert context(text, start, start + 3, words=2) == "… four five «six» seven eight …"
    assert context(text, 0, 3, words=2) == "«one» two three …"
    assert context("a blackboard here", 2, 7) == "a «black»board here"
    assert context(text, 0, 0, "[SEP]", at_end=True, words=2).endswith("seven eight nine ten «[SEP]»")


def synthetic_frame(n_tokens: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    texts, positions = np.divmod(np.arange(n_tokens), 100)  # each token once
    return pd.DataFrame(
        {
            "x": rng.normal(size=2 * n_tokens),
            "y": rng.normal(size=2 * n_tokens),
            "kind": ["query"] * n_tokens + ["key"] * n_tokens,
            "text": np.concatenate([texts, texts]),
            "position": np.concatenate([positions, positions]),
            "token": ["<b>it"] * (2 * n_tokens),
            "token_kind": rng.choice(["word", "piece", "punctuation", "special"], 2 * n_tokens),
            "context": ["the <i>animal</i> «it» was"] * (2 * n_tokens),
            "layer": 2,
            "head": 5,
        }
    )


@pytest.mark.parametrize("colour_by", ["kind", "position", "token_kind"])
def test_the_figure_draws_20000_points_with_webgl(colour_by):
    fig = global_qk_figure(synthetic_frame(10_000), colour_by)
    assert {t.type for t in fig.data} == {"scattergl"}
    assert sum(len(t.x) for t in fig.data) == 20_000
    assert all(t.marker.size <= 3 and t.marker.opacity < 0.5 for t in fig.data)
    hover = fig.data[0].text[0]
    assert "&lt;b&gt;it" in hover and "&lt;i&gt;animal&lt;/i&gt;" in hover and "<i>" not in hover
    assert list(fig.data[0].customdata[0][2:]) == [2, 5]  # layer and head, for a click
    if colour_by == "kind":
        assert [t.name for t in fig.data] == ["queries", "keys"]


def test_small_multiples_draw_the_same_tokens_in_every_head():
    frames = {h: synthetic_frame(3_000, seed=0).assign(head=h) for h in range(6)}
    fig = small_multiples(frames, per_head=500)
    assert {t.type for t in fig.data} == {"scattergl"}
    assert [a.text for a in fig.layout.annotations] == [f"L2 H{h}" for h in range(6)]
    per_head = [sum(len(t.x) for t in fig.data if t.xaxis == ("x" if h == 0 else f"x{h + 1}")) for h in range(6)]
    assert per_head == [1000] * 6


def test_the_command_line_writes_parquet_that_the_view_reads(tmp_path, capsys):
    out = tmp_path / "points"
    assert main([GAP, "--layer", "1", "--out", str(out), "--tokens", "300", "--method", "pca"]) == 0
    assert "300 tokens" in capsys.readouterr().out
    frames, texts = read_folder(out)
    assert sorted(frames) == [(1, h) for h in range(12)]
    frame = frames[1, 4]
    assert tuple(frame.columns) == COLUMNS and len(frame) == 600
    assert set(frame["kind"]) == {"query", "key"}
    assert texts == read_texts(GAP, limit=len(texts))

    at = start(view="global", layer="1", head="4")
    at.selectbox(key="gqk_corpus").set_value("A folder of computed points").run()
    at.text_input(key="gqk_folder").input(str(out)).run()
    no_errors(at)
    assert points_drawn(at) == 600
    at.radio(key="gqk_scope").set_value("Every head of the layer").run()
    no_errors(at)
    assert points_drawn(at) == 12 * 600  # under 4,000 tokens a head: every point of every head


def scattergl_x(at) -> np.ndarray:
    xs = [
        decode(t["x"])
        for e in at.get("plotly_chart")
        for t in json.loads(e.proto.spec)["data"]
        if t["type"] == "scattergl"
    ]
    return np.concatenate(xs) if xs else np.empty(0)


def points_drawn(at) -> int:
    return len(scattergl_x(at))


def test_the_command_line_says_what_is_wrong(tmp_path, capsys):
    assert main([str(tmp_path / "none.jsonl"), "--layer", "0", "--out", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main([GAP, "--layer", "9", "--out", str(tmp_path)]) == 2
    assert "layer must be from 0 to 5" in capsys.readouterr().err


def test_a_bad_folder_is_said_plainly(tmp_path):
    (tmp_path / "qk-L0-H0.parquet").write_text("not parquet")
    with pytest.raises(qk_global.FolderError, match="not a Parquet file"):
        read_folder(tmp_path)
    with pytest.raises(qk_global.FolderError, match="no such folder"):
        read_folder(tmp_path / "gone")


def test_the_view_computes_on_the_bundled_model(minilm):
    at = start(view="global", layer="2", head="1")
    no_errors(at)
    at.radio(key="gqk_method").set_value("pca").run()
    assert points_drawn(at) == 0  # nothing is computed before it is asked for
    next(b for b in at.button if b.key == "gqk_compute").click().run()
    no_errors(at)
    assert points_drawn(at) == 2 * 2_000
    # the drawn points are the head's own: the same numbers as head_points on the same tokens
    model, tokenizer = minilm
    sample = collect(model, tokenizer, read_texts(GAP, limit=100), 2, [1], 2_000)
    expected = head_points(sample, 1, "pca")
    np.testing.assert_allclose(np.sort(scattergl_x(at)), np.sort(expected["x"].to_numpy()), atol=1e-3)


def test_write_folder_round_trip(tmp_path):
    frame = synthetic_frame(50)[list(COLUMNS)]
    write_folder([frame], [f"text {i}" for i in range(10)], tmp_path)
    frames, texts = read_folder(tmp_path)
    pd.testing.assert_frame_equal(frames[2, 5], frame, check_dtype=False)
    assert texts[7] == "text 7"


def test_padding_side_is_right_for_any_tokenizer(minilm):
    _, tokenizer = minilm
    batch = qk_global._encode(tokenizer, ["a b c d e", "a"], 64)
    assert batch["attention_mask"][1, 0] == 1 and batch["attention_mask"][1, -1] == 0
    assert torch.equal(batch["attention_mask"].sum(1), torch.tensor([7, 3]))


# ---- a click opens the sentence; the choices are in the URL; UMAP and t-SNE are capped ------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Layer 1's points of 300 GAP tokens, every head, as the command line writes them."""
    out = tmp_path_factory.mktemp("points")
    assert main([GAP, "--layer", "1", "--out", str(out), "--tokens", "300", "--method", "pca"]) == 0
    return out


def click(at, chart_key: str, trace: int, index: int):
    """Click point `index` of trace `trace` as the browser reports it: the chart's selection, as a JSON
    string, in the widget state of the next run (what Streamlit's frontend sends for on_select). The
    numeric customdata is a typed array in the browser, which JSON writes as {"0": …, "1": …}."""
    chart = next(e for e in at.get("plotly_chart") if e.key == chart_key)
    data = json.loads(chart.proto.spec)["data"][trace]
    index %= len(decode(data["x"]))
    point = {
        "curve_number": trace,
        "point_number": index,
        "point_index": index,
        "x": float(decode(data["x"])[index]),
        "y": float(decode(data["y"])[index]),
        "customdata": {str(i): int(v) for i, v in enumerate(decode_rows(data["customdata"])[index])},
    }
    selection = {"selection": {"points": [point], "point_indices": [index], "box": [], "lasso": []}}
    states = at._tree.get_widget_states()
    states.widgets.append(WidgetState(id=chart.proto.id, string_value=json.dumps(selection)))
    return at._run(states), list(point["customdata"].values())


def decode_rows(array) -> np.ndarray:
    """Plotly's customdata: rows of numbers, as a typed array or as lists."""
    if isinstance(array, dict):
        return decode(array)
    return np.array(array, dtype=float)


def test_a_click_on_a_point_opens_its_sentence_in_the_head_view(folder):
    at = start(view="global", layer="1", head="4", corpus="folder", folder=str(folder))
    no_errors(at)
    _, texts = read_folder(folder)
    at, (text, _, layer, head) = click(at, "gqk_chart", trace=1, index=-1)  # the last text's last key
    no_errors(at)
    assert (layer, head) == (1, 4) and text > 0  # a sentence other than the first
    assert at.session_state.view == "Head" and at.session_state.layer == 1 and at.session_state.head == 4
    assert at.text_area(key="text").value == texts[text] and at.session_state.submitted == (texts[text], "")
    assert head_figure(at)["layout"]["title"]["text"].startswith("Layer 1, head 4")
    assert at.query_params["view"] == "head" and at.query_params["s"] == texts[text]


def test_a_click_in_the_small_multiples_opens_that_panels_head(folder):
    at = start(view="global", layer="1", head="0", corpus="folder", folder=str(folder), scope="layer")
    no_errors(at)
    spec = json.loads(next(e for e in at.get("plotly_chart") if e.key == "gqk_chart").proto.spec)
    trace = next(i for i, t in enumerate(spec["data"]) if t.get("xaxis") == "x8")  # head 7's panel
    at, (_, _, layer, head) = click(at, "gqk_chart", trace, index=5)
    no_errors(at)
    assert (layer, head) == (1, 7)
    assert at.session_state.view == "Head" and (at.session_state.layer, at.session_state.head) == (1, 7)
    assert head_figure(at)["layout"]["title"]["text"].startswith("Layer 1, head 7")


def test_a_link_reopens_the_same_choices(folder):
    at = start(view="global", layer="1", head="2", corpus="folder", folder=str(folder), colour="position")
    no_errors(at)
    assert at.selectbox(key="gqk_corpus").value == "A folder of computed points"
    assert at.text_input(key="gqk_folder").value == str(folder) and at.radio(key="gqk_colour").value == "position"
    assert points_drawn(at) == 600
    at.radio(key="gqk_scope").set_value("Every head of the layer").run()
    assert {k: at.query_params[k] for k in ("corpus", "folder", "colour", "scope")} == {
        "corpus": "folder",
        "folder": str(folder),
        "colour": "position",
        "scope": "layer",
    }
    at = start(view="global", corpus="examples", layout="umap", tokens="4000", colour="token_kind")
    no_errors(at)
    assert at.selectbox(key="gqk_corpus").value == "Coreference examples"
    assert at.radio(key="gqk_method").value == "umap" and at.slider(key="gqk_tokens").value == 4000
    assert {k: at.query_params[k] for k in ("corpus", "layout", "tokens", "colour")} == {
        "corpus": "examples",
        "layout": "umap",
        "tokens": "4000",
        "colour": "token_kind",
    }
    assert "tokens" not in start(view="head", tokens="7000").query_params  # a Param of this view only


@pytest.mark.parametrize(
    "tokens, why", [("25000", "from 2,000 to 20,000"), ("2500", "multiple of 1,000"), ("9" * 40, "not a multiple")]
)
def test_a_links_tokens_are_bounded(tokens, why):
    at = start(view="global", layout="pca", tokens=tokens)
    no_errors(at)
    assert at.slider(key="gqk_tokens").value == 2_000
    assert any(why in i.value for i in at.info), [i.value for i in at.info]


@pytest.fixture
def asked(monkeypatch):
    """The keys of the heavy computations the page asks for, none of them done."""
    keys = []
    monkeypatch.setattr(
        stores.BoundedStore, "get_or_compute_heavy", lambda self, key, kind, work: keys.append((*key, kind))
    )
    return keys


def test_umap_and_tsne_are_capped_before_any_work_starts(asked):
    at = start(view="global", layer="2", head="1", layout="umap", tokens="20000")  # 20,000 is for PCA
    no_errors(at)
    assert at.slider(key="gqk_tokens").value == at.slider(key="gqk_tokens").max == LAID_OUT_TOKENS["umap"] == 5_000
    assert any("UMAP lays out at most 5,000 tokens and t-SNE 2,000" in c.value for c in at.caption)
    next(b for b in at.button if b.key == "gqk_compute").click().run()
    assert [key[4:] for key in asked] == [(5_000, "umap", "global")]  # tokens, method, time limit kind
    at.radio(key="gqk_method").set_value("pca").run()
    assert at.slider(key="gqk_tokens").max == 20_000
    at.radio(key="gqk_method").set_value("tsne").run()
    assert not [s for s in at.slider if s.key == "gqk_tokens"] and at.session_state.gqk_tokens == 2_000  # one end
    next(b for b in at.button if b.key == "gqk_compute").click().run()
    assert [key[4:] for key in asked] == [(5_000, "umap", "global"), (2_000, "tsne", "global")]
    at.radio(key="gqk_scope").set_value("Every head of the layer").run()  # 12 heads: too few tokens of each
    assert not [b for b in at.button if b.key == "gqk_compute"]
    assert any("choose PCA or one head" in i.value for i in at.info)
    assert len(asked) == 2


def test_the_views_time_limit_is_its_own():
    assert (
        settings.TIME_LIMITS["global"] == 180 and settings.SETTINGS["limit_global"].var == "ATTENTION_TIME_LIMIT_GLOBAL"
    )
    assert "try fewer tokens, one head, or PCA" in too_long_message(TooLong("global", 180))


def test_token_cap_counts_every_head_laid_out():
    assert token_cap("pca", 12) == 20_000 and token_cap("umap", 1) == 5_000 and token_cap("tsne", 1) == 2_000
    assert token_cap("umap", 2) == 2_000 and token_cap("umap", 3) < 2_000 and token_cap("tsne", 2) < 2_000
