"""Grouped-query conversion of a trained model, the per-head map change, and their figures."""

import copy
import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from attention import encode
from attention.analysis.gqa import kv_head_options, map_change, to_grouped
from attention.runs.run import stack_attentions
from viz.fused import fused_panel
from viz.gqa import gqa_change_grid

TEXT = "The animal didn't cross the street because it was too tired."
TEXTS = ["The cat sat on the mat.", "The trophy does not fit in the suitcase because it is too big."]
BENCH_JSON = Path(__file__).resolve().parents[2] / "data" / "fused_bench.json"


def forward(model, tokenizer, texts):
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return batch["attention_mask"], model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])


def cloned_state(model) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


# ---- to_grouped --------------------------------------------------------------


def test_as_many_kv_heads_as_heads_is_the_original_model_exactly(minilm):
    model, tokenizer = minilm
    H = model.config.num_attention_heads
    same = to_grouped(model, H)
    assert all(layer.attention.num_kv_heads == H for layer in same.layers)
    for name, tensor in model.state_dict().items():
        assert torch.equal(same.state_dict()[name], tensor), name
    _, ours = forward(model, tokenizer, TEXTS)
    _, theirs = forward(same, tokenizer, TEXTS)
    for a, b in zip(ours.hidden_states + ours.attentions, theirs.hidden_states + theirs.attentions, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("num_kv_heads", [1, 3, 4])
def test_kv_heads_are_the_means_of_their_groups(minilm, num_kv_heads):
    model, _ = minilm
    H, d = model.config.num_attention_heads, model.config.head_size
    group = H // num_kv_heads
    grouped = to_grouped(model, num_kv_heads)
    for layer_index in (0, model.config.num_hidden_layers - 1):
        old, new = model.layers[layer_index].attention, grouped.layers[layer_index].attention
        assert new.num_kv_heads == num_kv_heads and new.num_heads == H
        for proj in ("k_proj", "v_proj"):
            weight, bias = getattr(old, proj).weight, getattr(old, proj).bias  # (H·d, D), (H·d,)
            assert getattr(new, proj).weight.shape == (num_kv_heads * d, model.config.hidden_size)
            for g in range(num_kv_heads):
                heads = range(g * group, (g + 1) * group)  # consecutive query heads
                want_w = sum(weight[h * d : (h + 1) * d] for h in heads) / group  # (d, D)
                want_b = sum(bias[h * d : (h + 1) * d] for h in heads) / group  # (d,)
                torch.testing.assert_close(getattr(new, proj).weight[g * d : (g + 1) * d], want_w)
                torch.testing.assert_close(getattr(new, proj).bias[g * d : (g + 1) * d], want_b)
        for proj in ("q_proj", "o_proj"):  # queries and the output projection are kept as they are
            assert torch.equal(getattr(new, proj).weight, getattr(old, proj).weight)
            assert torch.equal(getattr(new, proj).bias, getattr(old, proj).bias)


def test_one_kv_head_is_the_mean_over_all_heads(minilm):
    model, _ = minilm
    d = model.config.head_size
    old, new = model.layers[2].attention, to_grouped(model, 1).layers[2].attention
    H = old.num_heads
    torch.testing.assert_close(new.k_proj.weight, old.k_proj.weight.view(H, d, -1).mean(0))
    torch.testing.assert_close(new.v_proj.bias, old.v_proj.bias.view(H, d).mean(0))


def test_the_given_model_is_not_changed(minilm):
    model, _ = minilm
    before = cloned_state(model)
    attention_modules = [layer.attention for layer in model.layers]
    for num_kv_heads in (1, 4):
        grouped = to_grouped(model, num_kv_heads)
        assert grouped is not model and grouped.layers[0] is not model.layers[0]
    assert [layer.attention for layer in model.layers] == attention_modules
    assert all(layer.attention.num_kv_heads == model.config.num_attention_heads for layer in model.layers)
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)
    # the copy is frozen and in eval mode like the loaded model
    assert not grouped.training and not any(p.requires_grad for p in grouped.parameters())


@pytest.mark.parametrize("num_kv_heads", [6, 2, 1])
def test_grouped_outputs_keep_their_shapes_and_rows_sum_to_one(minilm, num_kv_heads):
    model, tokenizer = minilm
    mask, base = forward(model, tokenizer, TEXTS)  # a padded batch of two
    _, out = forward(to_grouped(model, num_kv_heads), tokenizer, TEXTS)
    assert out.last_hidden_state.shape == base.last_hidden_state.shape
    assert len(out.hidden_states) == len(base.hidden_states)
    assert [a.shape for a in out.attentions] == [a.shape for a in base.attentions]
    for attn in out.attentions:  # (B, H, L, L)
        torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]))
        assert torch.all(attn[0, :, :, ~mask[0].bool()] == 0)  # padding still gets no attention
    assert not torch.allclose(out.attentions[0], base.attentions[0])  # sharing keys does change the maps


def test_regrouping_a_grouped_model(minilm):
    model, tokenizer = minilm
    four = to_grouped(model, 4)
    _, out4 = forward(four, tokenizer, TEXTS)
    _, back = forward(to_grouped(four, 12), tokenizer, TEXTS)  # each query head's shared k/v, spelled out
    for a, b in zip(out4.attentions, back.attentions, strict=True):
        torch.testing.assert_close(a, b)
    # groups of groups of equal size: the mean of the means is the mean
    two_direct, two_via_four = to_grouped(model, 2), to_grouped(four, 2)
    for layer_a, layer_b in zip(two_direct.layers, two_via_four.layers, strict=True):
        torch.testing.assert_close(layer_a.attention.k_proj.weight, layer_b.attention.k_proj.weight)
        torch.testing.assert_close(layer_a.attention.v_proj.bias, layer_b.attention.v_proj.bias)


@pytest.mark.parametrize("bad", [5, 7, 13, 24, 0, -1, 2.0, True])
def test_a_count_that_does_not_divide_the_heads_is_refused(minilm, bad):
    model, _ = minilm
    with pytest.raises(
        ValueError, match=r"num_kv_heads must divide the 12 attention heads \(one of 12, 6, 4, 3, 2, 1\)"
    ):
        to_grouped(model, bad)


def test_kv_head_options_are_the_divisors_descending():
    assert kv_head_options(12) == [12, 6, 4, 3, 2, 1]
    assert kv_head_options(4) == [4, 2, 1]
    assert kv_head_options(7) == [7, 1]
    assert kv_head_options(1) == [1]
    with pytest.raises(ValueError):
        kv_head_options(0)


# ---- map_change --------------------------------------------------------------


def test_map_change_is_zero_for_identical_maps(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, TEXT)
    with torch.inference_mode():
        maps = stack_attentions(model(enc.input_ids, enc.attention_mask, enc.token_type_ids).attentions)
    change = map_change(maps, maps.copy())
    assert change.shape == (model.config.num_hidden_layers, model.config.num_attention_heads)
    assert np.all(change == 0)


def test_map_change_by_hand():
    base = np.zeros((1, 2, 2, 2))
    base[0, 0] = [[1.0, 0.0], [0.0, 1.0]]
    base[0, 1] = [[0.5, 0.5], [0.25, 0.75]]
    grouped = base.copy()
    grouped[0, 0] = [[0.5, 0.5], [0.0, 1.0]]  # |Δ| = 0.5, 0.5, 0, 0 -> mean 0.25
    grouped[0, 1] = [[0.5, 0.5], [0.75, 0.25]]  # |Δ| = 0, 0, 0.5, 0.5 -> mean 0.25
    np.testing.assert_allclose(map_change(base, grouped), [[0.25, 0.25]])
    np.testing.assert_allclose(map_change(grouped, base), [[0.25, 0.25]])  # symmetric
    grouped[0, 1] = base[0, 1]
    np.testing.assert_allclose(map_change(base, grouped), [[0.25, 0.0]])


def test_map_change_refuses_mismatched_arrays():
    with pytest.raises(ValueError, match="same shape"):
        map_change(np.zeros((2, 4, 5, 5)), np.zeros((2, 4, 6, 6)))
    with pytest.raises(ValueError, match="n_layers, H, L, L"):
        map_change(np.zeros((4, 5, 5)), np.zeros((4, 5, 5)))


# ---- figures -----------------------------------------------------------------


def test_gqa_change_grid_shows_the_change_per_head():
    change = np.arange(24, dtype=float).reshape(2, 12) / 100
    fig = gqa_change_grid(change, num_kv_heads=4)
    heatmap = fig.data[0]
    assert isinstance(heatmap, go.Heatmap)
    np.testing.assert_array_equal(np.asarray(heatmap.z), change)
    assert list(fig.layout.xaxis.ticktext) == [f"H{h}" for h in range(12)]
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1"]
    assert list(fig.layout.yaxis.range) == [1.5, -0.5]  # layer 0 on top
    assert heatmap.hovertext[1][5] == "L1 H5: mean |Δ| = 0.1700"
    assert heatmap.hovertemplate == "%{hovertext}<extra></extra>"
    assert heatmap.zmin == 0 and heatmap.zmax == pytest.approx(0.23)
    # three borders between the four groups of three query heads
    assert sorted(shape.x0 for shape in fig.layout.shapes) == [2.5, 5.5, 8.5]
    subtitle = fig.layout.title.subtitle.text
    assert "4 key/value heads" in subtitle and "grouped-query" in subtitle and "3 query heads" in subtitle


def test_gqa_change_grid_names_the_two_extremes_and_draws_no_borders_for_one_group():
    zeros = np.zeros((6, 12))
    fig = gqa_change_grid(zeros, 12)
    assert "original" in fig.layout.title.subtitle.text and len(fig.layout.shapes) == 0
    assert fig.data[0].zmax == 1.0  # all zero still has a colour scale
    mqa = gqa_change_grid(zeros, 1)
    assert "multi-query" in mqa.layout.title.subtitle.text and len(mqa.layout.shapes) == 0
    with pytest.raises(ValueError, match="divide"):
        gqa_change_grid(zeros, 5)
    with pytest.raises(ValueError, match="n_layers, n_heads"):
        gqa_change_grid(np.zeros(12), 4)


def test_gqa_change_grid_of_a_real_conversion(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, TEXT)
    with torch.inference_mode():
        base = stack_attentions(model(enc.input_ids, enc.attention_mask, enc.token_type_ids).attentions)
        mqa = stack_attentions(to_grouped(model, 1)(enc.input_ids, enc.attention_mask, enc.token_type_ids).attentions)
    change = map_change(base, mqa)
    assert np.all(change > 0) and np.all(change <= 2 / enc.input_ids.shape[1])  # rows sum to 1
    np.testing.assert_array_equal(np.asarray(gqa_change_grid(change, 1).data[0].z), change)


BENCH = {
    "machine": {
        "cpu": "Some <CPU>",
        "cores": 2,
        "torch_threads": 2,
        "platform": "Linux",
        "torch": "2.13.0",
        "date": "2025-01-02T03:04:05+00:00",
    },
    "shape": {"batch": 1, "heads": 12, "head_dim": 32, "dtype": "float32", "mask": None},
    "rows": [
        {"tokens": 512, "explicit_ms": 30.0, "fused_ms": 10.0, "explicit_peak_mb": 13.0, "fused_peak_mb": 1.5},
        {"tokens": 128, "explicit_ms": 2.0, "fused_ms": 1.0, "explicit_peak_mb": 1.0, "fused_peak_mb": 0.0},
    ],
}


def test_fused_panel_plots_time_and_memory_per_length():
    fig = fused_panel(BENCH)
    by_name = {}
    for trace in fig.data:
        assert list(trace.x) == [128, 512]  # sorted by tokens
        by_name.setdefault(trace.name, []).append(trace)
    explicit_time, explicit_memory = by_name["explicit (probabilities kept)"]
    fused_time, fused_memory = by_name["fused (PyTorch SDPA)"]
    assert (explicit_time.xaxis, explicit_memory.xaxis) == ("x", "x2")
    assert list(explicit_time.y) == [2.0, 30.0] and list(fused_time.y) == [1.0, 10.0]
    assert list(explicit_memory.y) == [1.0, 13.0]
    assert list(fused_memory.y) == [None, 1.5]  # a peak of 0 cannot sit on a log axis
    buffer = by_name["one (B, H, L, L) float32 buffer"][0]
    np.testing.assert_allclose(buffer.y, [12 * 128**2 * 4 / 2**20, 12 * 512**2 * 4 / 2**20])
    assert "%{x} tokens: %{y:.3g} ms" in explicit_time.hovertemplate
    assert "MB" in explicit_memory.hovertemplate
    for axis in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.yaxis, fig.layout.yaxis2):
        assert axis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [128, 512]
    title = fig.layout.title.subtitle.text  # the machine the numbers come from
    assert "Some &lt;CPU&gt;, 2 threads" in title and "torch 2.13.0" in title and "2025-01-02" in title


def test_fused_panel_of_the_recorded_benchmark():
    bench = json.loads(BENCH_JSON.read_text(encoding="utf-8"))
    tokens = sorted(row["tokens"] for row in bench["rows"])
    fig = fused_panel(bench)
    assert all(list(trace.x) == tokens for trace in fig.data)
    explicit_time = next(t for t in fig.data if t.name.startswith("explicit") and t.xaxis == "x")
    assert list(explicit_time.y) == [row["explicit_ms"] for row in sorted(bench["rows"], key=lambda r: r["tokens"])]
    assert bench["machine"]["cpu"].split()[0] in fig.layout.title.subtitle.text


def test_conversion_keeps_a_layer_s_own_scaling(minilm):
    model, tokenizer = minilm
    changed = copy.deepcopy(model)
    changed.layers[0].attention.scaling = 0.5
    enc = encode(tokenizer, "The cat sat on the mat.")
    with torch.inference_mode():
        before = changed(enc.input_ids, enc.attention_mask, enc.token_type_ids)
        after = to_grouped(changed, changed.config.num_attention_heads)(
            enc.input_ids, enc.attention_mask, enc.token_type_ids
        )
    assert to_grouped(changed, 4).layers[0].attention.scaling == 0.5
    assert torch.equal(before.last_hidden_state, after.last_hidden_state)


@pytest.mark.parametrize("font_size, width", [(14, 800), (22, 1040), (14, 600)])
def test_change_grid_fits_the_width_it_is_given(font_size, width):
    change = np.random.default_rng(0).random((6, 12))
    fig = gqa_change_grid(change, 4, font_size=font_size, width=width)
    assert fig.layout.width <= width
    cell = (fig.layout.width - fig.layout.margin.l - fig.layout.margin.r - 10) / 12
    size = fig.data[0].textfont.size
    assert 5 * 0.6 * size <= cell  # "0.123" fits inside its cell
    assert size >= 8
    wide = gqa_change_grid(change, 4, font_size=font_size)
    assert wide.layout.width >= fig.layout.width  # without a width, the cells keep their full size
