"""Big-model runs (attention/runs/bigrun.py, ui/compute/runs.py): when every map of a run would be larger than
BIG_RUN_BYTES,
the run keeps pooled tiles, gathered layer by layer as one forward pass goes, and reads a layer's full maps on
demand."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from families import make_family

from attention import load_model
from attention.analysis.stats import head_stats, punctuation_mask
from attention.runs import bigrun
from attention.runs.inputs import encode
from attention.runs.pooling import head_tiles, pool_map
from attention.runs.run import run_sentence
from ui.compute import runs
from ui.compute.runs import big_run_loader
from viz.overview import overview_figure, overview_grid

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = make_family(tmp_path_factory.mktemp("big") / "llama", "llama", num_hidden_layers=3)
    model, tokenizer = load_model(str(folder))
    enc = encode(tokenizer, TEXT, None, max_length=model.config.max_position_embeddings)
    return folder, model, enc, run_sentence(model, tokenizer, TEXT)


def watch_forward(model, monkeypatch):
    """Record the layers each forward pass kept the maps of (its request) and the attentions it returned."""
    calls = []
    forward = model.forward

    def recording(*args, **kwargs):
        out = forward(*args, **kwargs)
        calls.append((kwargs["request"].layers if "request" in kwargs else None, out.attentions))
        return out

    monkeypatch.setattr(model, "forward", recording)
    return calls


def test_big_run_never_holds_two_layers_maps(llama, monkeypatch):
    _, model, enc, full = llama
    alive_at_layer = []  # per layer: how many earlier layers' maps were still held apart from its own
    earlier: list[weakref.ref] = []
    buffers = set()  # the memory each layer's maps were written into

    def watch(module, args, output):
        probs = output[1]
        alive_at_layer.append(sum(ref() is not None and ref() is not probs for ref in earlier))
        earlier.append(weakref.ref(probs))
        buffers.add(probs.data_ptr())

    handles = [layer.register_forward_hook(watch) for layer in model.layers]  # before the run's own hooks
    calls = watch_forward(model, monkeypatch)
    try:
        run = bigrun.pooled_run(model, enc, False, big_run_loader(("", TEXT, "", False)), head_tiles)
    finally:
        for handle in handles:
            handle.remove()
    assert alive_at_layer == [0, 0, 0]
    assert len(buffers) == 1  # every layer wrote its scores over the last one's (dot_product.reused_scores)
    assert len(calls) == 1 and calls[0][0] is None  # one forward pass for every layer
    assert all(a is None for a in calls[0][1])  # the model handed back no map
    assert all(ref() is None for ref in earlier)
    # what it kept is what the full maps give
    np.testing.assert_allclose(run.pooled, pool_map(full.attentions, bigrun.POOL_CELLS), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run.strongest, head_tiles(full.attentions)[1], rtol=1e-5)
    np.testing.assert_allclose(run.head_means, full.attentions.mean(axis=1), rtol=1e-5, atol=1e-7)
    assert (run.n_layers, run.n_heads) == full.attentions.shape[:2]


def test_stats_of_a_big_run_are_those_of_its_maps(llama, monkeypatch):
    _, model, enc, full = llama
    calls = watch_forward(model, monkeypatch)
    found = bigrun.pooled_stats(model, enc, False)
    stats = head_stats(full.attentions, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))
    assert set(found) == set(stats)
    for name, values in stats.items():
        np.testing.assert_allclose(found[name], values, rtol=1e-5, atol=1e-9, err_msg=name)
    assert len(calls) == 1 and all(a is None for a in calls[0][1])


def test_a_layer_on_demand_runs_the_others_fused(llama, monkeypatch):
    _, model, enc, full = llama
    calls = watch_forward(model, monkeypatch)
    maps = bigrun.layer_maps(model, enc, False, 1)
    np.testing.assert_allclose(maps, full.attentions[1], rtol=1e-5, atol=1e-7)
    assert [c[0] for c in calls] == [{1}]
    assert not maps.flags.writeable


def test_hooks_leave_another_threads_forward_alone(llama):
    import threading

    _, model, enc, full = llama
    seen = []
    with bigrun.layer_hooks(model, lambda i, maps: seen.append(i)):
        out = []
        thread = threading.Thread(
            target=lambda: out.append(model(enc.input_ids, enc.attention_mask, enc.token_type_ids))
        )
        thread.start()
        thread.join()
    assert seen == []
    assert all(a is not None for a in out[0].attentions)


def test_lazy_maps_read_one_layer_or_a_small_selection(llama):
    folder, _, enc, full = llama
    maps = bigrun.LayerMaps(big_run_loader((str(folder), TEXT, "", False)), *full.attentions.shape[:3])
    np.testing.assert_allclose(maps[2, 1], full.attentions[2, 1], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(maps[1], full.attentions[1], rtol=1e-5, atol=1e-7)
    rows = [3, 4]
    np.testing.assert_allclose(maps[:, :, rows, :], full.attentions[:, :, rows, :], rtol=1e-5, atol=1e-7)
    with pytest.raises(bigrun.NeedsSmallerInput, match="shorter input"):
        np.asarray(maps)
    with pytest.raises(bigrun.NeedsSmallerInput):
        maps[:2]
    with pytest.raises(IndexError):
        maps[3]


def test_index_keys_tell_long_arrays_apart():
    a, b = np.arange(2000), np.arange(2000)
    b[1000] = -1
    assert repr(a) == repr(b)  # numpy abbreviates both the same way
    assert runs._index_key((slice(None), a)) != runs._index_key((slice(None), b))


def test_bundled_model_at_512_tokens_keeps_every_map():
    assert bigrun.maps_bytes(6, 12, 512) <= bigrun.BIG_RUN_BYTES < bigrun.maps_bytes(16, 32, 512)


def test_overview_from_tiles_is_the_overview_of_the_maps(llama):
    *_, full = llama
    pooled, strongest = head_tiles(full.attentions, bigrun.POOL_CELLS)
    from_tiles = overview_figure(pooled, strongest, len(full.tokens), full.tokens, highlight=(1, 2))
    direct = overview_grid(full.attentions, full.tokens, highlight=(1, 2))
    np.testing.assert_allclose(np.asarray(from_tiles.data[0].z, float), np.asarray(direct.data[0].z, float), rtol=1e-5)
    assert from_tiles.data[1].hovertext == direct.data[1].hovertext


def test_overview_of_32_heads_fits_the_column_and_thins_labels():
    rng = np.random.default_rng(0)
    pooled = rng.random((16, 32, 32, 32)).astype(np.float32)
    strongest = np.zeros((16, 32, 3))
    fig = overview_figure(pooled, strongest, 512, width=800)
    assert fig.layout.width <= 800
    ticks = list(fig.layout.xaxis.ticktext)
    assert 8 <= len(ticks) < 32 and ticks[:2] == ["H0", "H2"]
    tile = (fig.layout.width - 140) / 32
    assert tile * (int(ticks[1][1:]) - int(ticks[0][1:])) >= len("H31") * 14 * 0.6  # labels do not overlap
    assert len(fig.to_json()) < 1_000_000
    labelled = overview_figure(pooled, strongest, 512, width=800, labels={(3, 5): "diagonal"})
    assert not labelled.layout.annotations  # 20 px tiles: not written on, where it would pile up
    assert labelled.data[1].hovertext[3 * 32 + 5].endswith("<br>diagonal")
    wide = overview_figure(pooled[:2, :4], strongest[:2, :4], 512, width=800, labels={(1, 2): "diagonal"})
    assert [a.text for a in wide.layout.annotations] == ["diagonal"]


# ---- the app (AppTest) -------------------------------------------------------------------------------


def app_figures(at) -> list[dict]:
    import json

    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def titled(at, start: str) -> dict:
    return next(f for f in app_figures(at) if ((f["layout"].get("title") or {}).get("text") or "").startswith(start))


def test_gqa_view_shows_the_models_own_grouping(llama):
    from test_app import decode, no_errors, start

    from attention.runs.aggregate import pairwise_change

    folder, _, _, full = llama
    at = start(model=str(folder), s=TEXT, view="efficient", layer="1", head="0")
    no_errors(at)
    assert any("this model's own grouping" in s.value for s in at.subheader)
    assert any(
        "trained with grouped-query attention" in c.value and "2 key/value heads for its 4 query heads" in c.value
        for c in at.caption
    )
    groups = titled(at, "Layer 1: query heads by the key/value head they share")
    assert list(groups["layout"]["yaxis"]["ticktext"]) == ["K/V 0", "K/V 1"]
    markers = groups["data"][1]
    rows = {tuple(d): y for d, y in zip(markers["customdata"], markers["y"])}
    assert rows[(1, 0)] == rows[(1, 1)] < rows[(1, 2)] == rows[(1, 3)]  # heads 0, 1 share K/V 0; 2, 3 K/V 1
    pairs = titled(at, "Layer 1: how far apart every two heads' maps are")
    np.testing.assert_allclose(decode(pairs["data"][0]["z"]), pairwise_change(full.attentions[1]), rtol=1e-4, atol=1e-7)
    # the further what-if stays: 2 key/value heads can still become 1
    assert any(s.value == "What-if: fewer key/value heads" for s in at.subheader)
    assert at.select_slider(key="gqa_kv").value == 1


def test_gqa_view_of_an_encoder_is_the_what_if_only():
    from test_app import SENTENCE, no_errors, start

    at = start(s=SENTENCE, view="efficient")
    no_errors(at)
    assert not any("own grouping" in s.value for s in at.subheader)
    assert any(s.value == "Grouped-query attention (what-if)" for s in at.subheader)
    assert any("A what-if" in c.value for c in at.caption)
    assert at.select_slider(key="gqa_kv")


def test_every_view_of_a_big_run_draws_or_says_why_not(tmp_path, monkeypatch, llama):
    """With the threshold at 0 every run is big: no run keeps every map, and each view either draws or
    says that it needs a shorter input; none shows an error."""
    from test_app import decode, head_figure, no_errors, start

    _, _, _, full = llama
    folder = make_family(tmp_path / "llama", "llama", num_hidden_layers=3)  # a source of its own: nothing cached
    monkeypatch.setattr(runs, "BIG_RUN_BYTES", 0)

    def forbidden(*args, **kwargs):
        raise AssertionError("a big run kept every map")

    monkeypatch.setattr(runs, "run_encoded", forbidden)
    at = start(model=str(folder), s=TEXT, layer="2", head="3")
    no_errors(at)
    np.testing.assert_allclose(
        decode(head_figure(at)["data"][0]["z"]), full.attentions[2, 3], rtol=1e-4, atol=1e-6
    )  # the layer read on demand
    said = []
    for view in at.segmented_control(key="view").options:
        at.segmented_control(key="view").set_value(view).run()
        no_errors(at)
        refused = [i.value for i in at.info if "needs every head's full map" in i.value]
        assert at.get("plotly_chart") or refused, view
        if refused:
            said.append(view)
    assert "Overview" not in said and "Head" not in said and "GQA & fused" not in said
    assert "Rollout & flow" not in said  # rollout and flow read the head-averaged maps the run keeps
    print("views that ask for a shorter input:", ", ".join(said))


def test_rollout_and_flow_of_a_big_run_are_those_of_its_maps(llama):
    """Rollout and flow average the heads first: a big run's head-averaged maps give what every map gives."""
    from attention.analysis.rollout import as_attention_tuple, attention_flow, rollout
    from ui.compute.computations import through_layer

    _, model, enc, full = llama
    run = bigrun.pooled_run(model, enc, False, big_run_loader(("", TEXT, "", False)), head_tiles)
    for layer in range(run.n_layers):
        expected = as_attention_tuple(full.attentions[: layer + 1])
        np.testing.assert_allclose(
            rollout(through_layer(run, layer))[-1, 0], rollout(expected)[-1, 0], rtol=1e-5, atol=1e-6
        )
    np.testing.assert_allclose(
        attention_flow(through_layer(run, 1)), attention_flow(as_attention_tuple(full.attentions[:2])), atol=1e-6
    )


@pytest.mark.parametrize("heads, kv_heads, width", [(4, 2, 800), (4, 1, 800), (32, 8, 800), (4, 2, 300)])
def test_the_grouping_figures_titles_are_never_cut(heads, kv_heads, width):
    """A few heads make a narrow figure: it widens for its title and subtitle (drawn from the plot's left
    edge), or wraps them where the column is narrower than they are."""
    from viz.gqa import CHAR_WIDTH, gqa_groups_figure, head_change_matrix

    kv = [h // (heads // kv_heads) for h in range(heads)]
    for fig in (
        gqa_groups_figure(np.random.rand(heads, 8, 8), kv, 1, width=width),
        head_change_matrix(np.random.rand(heads, heads), kv, 1, width=width),
    ):
        layout = fig.layout
        assert layout.width <= max(width, 240 + layout.margin.l + 110)
        for text, size in (
            (layout.title.text, layout.title.font.size),
            (layout.title.subtitle.text, layout.title.subtitle.font.size),
        ):
            widest = max(len(line) for line in text.split("<br>"))
            assert layout.margin.l + widest * size * CHAR_WIDTH <= layout.width, text
