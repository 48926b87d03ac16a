"""The notebook API: head_view and model_view as self-contained figures, offline HTML, the docs notebook."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

import viz
from viz._maps import FLOAT32_BUDGET, decode

ROOT = Path(__file__).resolve().parents[2]
TOKENS = ["[CLS]", "the", "<b>cat</b>", "sat", "[SEP]", "on", "&amp;", "it", "[SEP]"]


def random_maps(*shape, seed=0):
    weights = np.random.default_rng(seed).random(shape)
    return (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)


def menu(fig, name):
    return next(m for m in fig.layout.updatemenus if m.name == name)


def select(fig, name, label):
    """Apply a menu button's restyle arguments to the figure, as plotly.js does in the browser."""
    button = next(b for b in menu(fig, name).buttons if b.label == label)
    assert button.method == "restyle"
    for key, values in button.args[0].items():
        for trace, value in zip(fig.data, values):
            trace[key] = value


def seen(fig):
    """The maps the reader sees: visible, opaque heatmaps."""
    return [t for t in fig.data if isinstance(t, go.Heatmap) and t.visible is not False and t.opacity != 0]


# ---- head_view --------------------------------------------------------------


def test_head_view_starts_on_the_chosen_layer_and_head_and_menus_switch_maps():
    attn = random_maps(3, 4, len(TOKENS), len(TOKENS))
    fig = viz.head_view(attn, TOKENS, layer=1, heads=2)
    assert isinstance(fig, go.Figure)
    [shown] = seen(fig)
    np.testing.assert_array_equal(shown.z, attn[1, 2])
    assert shown.z.dtype == np.float32
    assert [b.label for b in menu(fig, "Layer").buttons] == ["Layer 0", "Layer 1", "Layer 2"]
    assert menu(fig, "Layer").active == 1 and menu(fig, "Head").active == 2
    for layer in range(3):
        select(fig, "Layer", f"Layer {layer}")
        for head in range(4):
            select(fig, "Head", f"Head {head}")
            [shown] = seen(fig)
            np.testing.assert_array_equal(shown.z, attn[layer, head])
            assert shown.hoverinfo == "all" and f"L{layer} H{head}" in shown.hovertemplate
            assert all(t.hoverinfo == "skip" for t in fig.data if t.opacity == 0)


def test_several_heads_start_on_their_overlay_as_in_bertviz():
    attn = random_maps(3, 4, len(TOKENS), len(TOKENS))
    fig = viz.head_view(attn, TOKENS, layer=1, heads=[3, 1])
    [shown] = seen(fig)
    np.testing.assert_array_equal(shown.z, np.maximum(attn[1, 3], attn[1, 1]))
    np.testing.assert_array_equal(shown.customdata, np.where(attn[1, 3] >= attn[1, 1], 3, 1))
    assert shown.name == "L1 H3 + H1 (max)" and "(H%{customdata})" in shown.hovertemplate
    assert menu(fig, "Head").buttons[0].label == "H3 + H1 (max)" and menu(fig, "Head").active == 0
    select(fig, "Layer", "Layer 2")
    [shown] = seen(fig)
    np.testing.assert_array_equal(shown.z, np.maximum(attn[2, 3], attn[2, 1]))
    select(fig, "Head", "Head 1")  # each head alone, then back to the overlay
    [shown] = seen(fig)
    np.testing.assert_array_equal(shown.z, attn[2, 1])
    select(fig, "Head", "H3 + H1 (max)")
    assert seen(fig)[0].name == "L2 H3 + H1 (max)"
    assert [b.label for b in menu(viz.head_view(attn, TOKENS, heads=[2]), "Head").buttons][0] == "Head 0"
    with pytest.raises(ValueError, match="heads 0–3"):
        viz.head_view(attn, TOKENS, heads=[1, 4])


def test_overlay_of_large_views_is_compact_and_names_its_heads():
    attn = random_maps(6, 12, 128, 128)
    fig = viz.head_view(attn, [f"t{i}" for i in range(128)], layer=5, heads=[0, 11])
    [shown] = seen(fig)
    assert shown.z.dtype == np.uint8 and shown.customdata.dtype == np.uint8
    np.testing.assert_allclose(decode(shown.z), np.maximum(attn[5, 0], attn[5, 11]), atol=0.005 + 1e-6)
    assert set(np.unique(shown.customdata)) == {0, 11}


def test_head_view_accepts_every_layout_of_attentions():
    attn = random_maps(2, 3, 5, 5)
    tokens = list("abcde")
    reference = viz.head_view(attn, tokens).to_plotly_json()
    as_tensors = tuple(torch.from_numpy(a)[None] for a in attn)  # (batch, H, L, S) per layer
    for given in (as_tensors, list(as_tensors), torch.from_numpy(attn), attn[:, None]):
        assert viz.head_view(given, tokens).to_plotly_json() == reference
    assert viz.head_view(attention=as_tensors, tokens=tokens).to_plotly_json() == reference
    with pytest.raises(ValueError, match="5 × 5 but 4 query"):
        viz.head_view(attn, tokens[:4])
    with pytest.raises(ValueError, match="output_attentions"):
        viz.head_view(None, tokens)


def test_tokens_are_data_not_markup():
    fig = viz.head_view(random_maps(1, 1, len(TOKENS), len(TOKENS)), TOKENS)
    labels = list(fig.data[0].x) + list(fig.layout.xaxis.ticktext) + list(fig.layout.yaxis.ticktext)
    assert "&lt;b&gt;cat&lt;/b&gt;·2" in fig.data[0].x
    assert "&amp;amp;" in fig.layout.yaxis.ticktext
    assert not any("<b>" in label for label in labels)


def test_prettify_tokens_as_bertviz():
    fig = viz.head_view(random_maps(1, 1, 2, 2), ["Ġthe", "▁cat"])
    assert list(fig.layout.xaxis.ticktext) == [" the", " cat"]
    raw = viz.head_view(random_maps(1, 1, 2, 2), ["Ġthe", "▁cat"], prettify_tokens=False)
    assert list(raw.layout.xaxis.ticktext) == ["Ġthe", "▁cat"]


def test_include_layers_limits_the_layer_menu():
    attn = random_maps(4, 2, 3, 3)
    fig = viz.head_view(attn, list("abc"), include_layers=[1, 3])
    assert [b.label for b in menu(fig, "Layer").buttons] == ["Layer 1", "Layer 3"]
    assert len(fig.data) == 4
    np.testing.assert_array_equal(seen(fig)[0].z, attn[1, 0])
    select(fig, "Layer", "Layer 3")
    select(fig, "Head", "Head 1")
    np.testing.assert_array_equal(seen(fig)[0].z, attn[3, 1])


def test_sentence_pair_divider_and_block_filter():
    n, b = len(TOKENS), 5
    fig = viz.head_view(random_maps(1, 2, n, n), TOKENS, sentence_b_start=b)
    assert [s.x0 for s in fig.layout.shapes] == [b - 0.5, -0.5]
    assert [s.y0 for s in fig.layout.shapes] == [-0.5, b - 0.5]
    filter_ = menu(fig, "Sentences")
    assert [x.label for x in filter_.buttons] == ["All", "A → A", "A → B", "B → A", "B → B"]
    a_to_b = filter_.buttons[2]
    assert a_to_b.method == "relayout"
    # A's queries (rows 0..b-1, first on top) attending to B's keys (columns b..n-1)
    assert a_to_b.args[0] == {"xaxis.range": [b - 0.5, n - 0.5], "yaxis.range": [b - 0.5, -0.5]}
    assert filter_.buttons[0].args[0] == {"xaxis.range": [-0.5, n - 0.5], "yaxis.range": [n - 0.5, -0.5]}
    assert "Sentences" not in [m.name for m in viz.head_view(random_maps(1, 1, n, n), TOKENS).layout.updatemenus]


def seq2seq_maps():
    enc, dec = ["▁Hello", "▁world", "</s>"], ["<pad>", "▁Hallo", "▁Welt", "</s>"]
    return dict(
        encoder_attention=random_maps(2, 3, 3, 3, seed=1),
        decoder_attention=random_maps(2, 3, 4, 4, seed=2),
        cross_attention=random_maps(2, 3, 4, 3, seed=3),
        encoder_tokens=enc,
        decoder_tokens=dec,
    )


def test_encoder_decoder_panels_with_their_own_tokens():
    maps = seq2seq_maps()
    fig = viz.head_view(**maps, layer=1, heads=2)
    panels = seen(fig)
    assert [(t.xaxis, t.yaxis) for t in panels] == [("x", "y"), ("x2", "y2"), ("x3", "y3")]
    for trace, kind in zip(panels, ("encoder", "decoder", "cross")):
        np.testing.assert_array_equal(trace.z, maps[f"{kind}_attention"][1, 2])
    cross = panels[2]
    assert cross.z.shape == (4, 3)  # decoder queries × encoder keys
    assert list(cross.y) == ["&lt;pad&gt;·0", " Hallo·1", " Welt·2", "&lt;/s&gt;·3"]
    assert list(cross.x) == [" Hello·0", " world·1", "&lt;/s&gt;·2"]
    assert fig.layout.xaxis3.title.text == "cross: encoder key"
    select(fig, "Layer", "Layer 0")
    select(fig, "Head", "Head 1")
    for trace, kind in zip(seen(fig), ("encoder", "decoder", "cross")):
        np.testing.assert_array_equal(trace.z, maps[f"{kind}_attention"][0, 1])


def test_encoder_decoder_needs_its_tokens():
    maps = seq2seq_maps()
    with pytest.raises(ValueError, match="cross attention needs"):
        viz.head_view(cross_attention=maps["cross_attention"], encoder_tokens=maps["encoder_tokens"])
    with pytest.raises(ValueError, match="not both"):
        viz.head_view(random_maps(1, 1, 3, 3), list("abc"), encoder_attention=maps["encoder_attention"])


def test_large_views_send_whole_percents():
    attn = random_maps(6, 12, 128, 128)
    assert attn.nbytes > FLOAT32_BUDGET
    fig = viz.head_view(attn, [f"t{i}" for i in range(128)], layer=5, heads=11)
    [shown] = seen(fig)
    assert shown.z.dtype == np.uint8 and shown.z.max() <= 100
    np.testing.assert_allclose(decode(shown.z), attn[5, 11], atol=0.005 + 1e-6)
    assert "%{z}%" in shown.hovertemplate
    assert viz.head_view(attn[:1, :1], [f"t{i}" for i in range(128)]).data[0].z.dtype == np.float32


# ---- model_view -------------------------------------------------------------


def test_model_view_tiles_every_head():
    attn = random_maps(3, 4, 6, 6)
    fig = viz.model_view(attn, list("abcdef"))
    grid = fig.data[0].z  # tiles 6 cells square, one NaN row / column apart
    for layer in range(3):
        for head in range(4):
            tile = grid[layer * 7 : layer * 7 + 6, head * 7 : head * 7 + 6]
            np.testing.assert_array_equal(tile, attn[layer, head])
    assert list(fig.layout.xaxis.ticktext) == ["H0", "H1", "H2", "H3"]
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1", "L2"]
    assert fig.data[1].hovertext[5] == "L1 H1"
    limited = viz.model_view(attn, list("abcdef"), include_layers=[2], include_heads=[1, 3])
    np.testing.assert_array_equal(limited.data[0].z[:, 7:], attn[2, 3])
    assert list(limited.data[1].hovertext) == ["L2 H1", "L2 H3"]


def test_model_view_sentence_filter_and_seq2seq():
    attn = random_maps(2, 2, 6, 6)
    fig = viz.model_view(attn, list("abcdef"), sentence_b_start=2, display_mode="dark")
    select(fig, "Sentences", "A → B")
    [shown] = seen(fig)
    np.testing.assert_array_equal(shown.z[:2, :4], attn[0, 0, :2, 2:])  # A's 2 queries × B's 4 keys
    assert np.isnan(shown.z[2:6, :4]).all()  # the rest of the tile is blank
    assert fig.layout.paper_bgcolor == "#111111"
    maps = seq2seq_maps()
    fig = viz.model_view(**maps)
    cross = [t for t in fig.data if isinstance(t, go.Heatmap)][2]
    np.testing.assert_array_equal(cross.z[:4, :3], maps["cross_attention"][0, 0])
    assert fig.layout.xaxis3.title.text == "Cross"


# ---- ours and transformers' outputs -----------------------------------------


def test_ours_and_transformers_outputs_give_the_same_figure(tiny_dir):
    from transformers import AutoTokenizer, BertModel

    from attention import load_model

    model, tokenizer = load_model(tiny_dir)
    reference = BertModel.from_pretrained(str(tiny_dir), attn_implementation="eager").eval()
    hf_tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    inputs = hf_tok("the cat sat", "on the mat", return_tensors="pt")
    tokens = hf_tok.convert_ids_to_tokens(inputs["input_ids"][0])
    b_start = inputs["token_type_ids"][0].tolist().index(1)
    with torch.no_grad():
        theirs = reference(**inputs, output_attentions=True).attentions
        ours = model(inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"]).attentions
    for view in (viz.head_view, viz.model_view):
        a, b = view(ours, tokens, sentence_b_start=b_start), view(theirs, tokens, sentence_b_start=b_start)
        assert a.layout == b.layout
        for x, y in zip(a.data, b.data):
            if isinstance(x, go.Heatmap):
                np.testing.assert_allclose(x.z, y.z, atol=1e-5)
                x, y = x.update(z=None), y.update(z=None)
            assert x.to_plotly_json() == y.to_plotly_json()


# ---- offline HTML -----------------------------------------------------------


@pytest.fixture(scope="module")
def page_html(tmp_path_factory):
    tokens = [f"w{i}" for i in range(128)]
    tokens[3] = "<img src=x onerror=alert(1)>"
    attn = random_maps(6, 12, 128, 128)
    path = tmp_path_factory.mktemp("html") / "head_view.html"
    viz.head_view(attn, tokens, sentence_b_start=64).write_html(path, include_plotlyjs=True)
    return path, attn


def test_head_view_html_at_128_tokens_is_under_8_mb(page_html):
    path, _ = page_html
    size = path.stat().st_size
    print(f"head view, 6 layers × 12 heads × 128 tokens: {size / 1e6:.2f} MB")
    assert size <= 8_000_000


@pytest.mark.browser
def test_offline_html_draws_and_menus_switch_in_chromium(page_html):
    from browser import launch
    from playwright.sync_api import sync_playwright

    path, attn = page_html
    shown_js = """() => { const d = document.querySelector('.js-plotly-plot').data;
        const i = d.findIndex(t => t.visible !== false && t.opacity !== 0); return [i, d[i].name]; }"""
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        page.wait_for_selector(".js-plotly-plot .heatmaplayer image", timeout=30_000)
        assert page.evaluate(shown_js) == [0, "L0 H0"]
        assert page.locator(".xtick text", has_text="<img").count() == 1  # shown as text, not an element
        assert page.locator("img").count() == 0
        for menu_index, label in ((0, "Layer 4"), (1, "Head 7")):
            page.locator(".updatemenu-header").nth(menu_index).click()
            page.locator(".updatemenu-dropdown-button", has_text=label).click()
            page.wait_for_timeout(300)
        assert page.evaluate(shown_js) == [4 * 12 + 7, "L4 H7"]
        z = page.evaluate("() => Array.from(document.querySelector('.js-plotly-plot')._fullData[55].z[3])")
        np.testing.assert_allclose(np.array(z) / 100, attn[4, 7, 3], atol=0.005 + 1e-6)
        browser.close()
    assert all(url.startswith("file:") for url in requests)


@pytest.mark.browser
def test_overlay_hover_names_the_head_in_chromium(tmp_path):
    from browser import launch
    from playwright.sync_api import sync_playwright

    attn = random_maps(2, 4, 6, 6, seed=4)
    path = tmp_path / "overlay.html"
    viz.head_view(attn, list("abcdef"), layer=1, heads=[2, 0]).write_html(path, include_plotlyjs=True)
    shown_js = """() => { const d = document.querySelector('.js-plotly-plot')._fullData;
        const t = d.find(t => t.visible === true && t.opacity !== 0);
        return [t.name, Array.from(t.customdata[3]), Array.from(t.z[3])]; }"""
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".js-plotly-plot .heatmaplayer image", timeout=30_000)
        name, heads, weights = page.evaluate(shown_js)
        browser.close()
    assert name == "L1 H2 + H0 (max)"
    assert heads == np.where(attn[1, 2, 3] >= attn[1, 0, 3], 2, 0).tolist()
    np.testing.assert_allclose(weights, np.maximum(attn[1, 2, 3], attn[1, 0, 3]), rtol=1e-6)


# ---- the docs notebook ------------------------------------------------------


@pytest.mark.slow  # 26 s on a busy 2-core machine
def test_docs_notebook_runs_top_to_bottom():
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "docs" / "notebook.ipynb", as_version=4)
    # the kernel runs this interpreter, from the repository root, offline
    kernel = "python3"
    client = NotebookClient(notebook, timeout=120, kernel_name=kernel, resources={"metadata": {"path": str(ROOT)}})
    client.execute(env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 3
    executable = [o for o in outputs if o.output_type == "stream" and f"kernel: {sys.executable}" in o.text]
    assert executable, "the notebook's kernel is this interpreter"
