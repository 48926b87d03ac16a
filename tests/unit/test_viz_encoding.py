"""What the head view's and the overview's figures send at 512 tokens: every map as a base64 typed array
(not a JSON list of decimal numbers), within a byte budget, and decoding to the weights the hover names."""

import base64
import json

import numpy as np

import viz
from attention.runs.pooling import head_tiles, pool_map
from viz.overview import overview_figure

N = 512
TOKENS = [f"tok{i % 40}" for i in range(N)]
WIDTH = 1100  # about the page's main column (ui.page.layout.main_px) on a wide window


def random_maps(*shape, seed=0):
    """Row-stochastic float32 maps, peaked like real heads (a few keys take most of each row)."""
    weights = np.random.default_rng(seed).random(shape, dtype=np.float32) ** 8
    return weights / weights.sum(axis=-1, keepdims=True)


def sent(fig) -> tuple[dict, int]:
    """The figure as the page receives it (plotly's JSON, as st.plotly_chart writes it) and its size."""
    text = fig.to_json()
    return json.loads(text), len(text)


def typed(value) -> np.ndarray:
    """A trace's array as sent: it must be a typed array ({"dtype", "bdata", "shape"}), not a list."""
    assert isinstance(value, dict) and set(value) >= {"dtype", "bdata"}, f"sent as {type(value).__name__}"
    array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return array.reshape([int(n) for n in str(value.get("shape", array.size)).split(",")])


def test_head_heatmap_at_512_tokens_sends_float32_bytes_equal_to_the_map():
    attn = random_maps(N, N)
    data, size = sent(viz.head_heatmap(attn, TOKENS, title="Layer 0, head 0"))
    z = typed(data["data"][0]["z"])
    assert z.dtype == np.float32 and z.shape == (N, N)
    np.testing.assert_array_equal(z, attn)  # what the hover formats is the weight itself
    assert "%{z:.3f}" in data["data"][0]["hovertemplate"]
    # 512² weights are 1 MB as float32, 1.4 MB in base64; labels, ticks and layout add little.
    # As a JSON list of decimals the same weights would be about 5 MB.
    assert size < 1.5e6, f"{size / 1e6:.2f} MB"


def test_overview_at_512_tokens_sends_one_float32_heatmap_under_a_budget():
    maps = random_maps(6, 12, N, N, seed=1)  # the bundled model's shape
    fig = viz.overview_grid(maps, TOKENS, width=WIDTH)
    data, size = sent(fig)
    z = typed(data["data"][0]["z"])
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, np.asarray(fig.data[0].z))
    cells = int(np.isnan(z[:, 0]).argmax())  # the first NaN row ends the first tile
    np.testing.assert_allclose(z[:cells, :cells], pool_map(maps[0, 0], cells), rtol=1e-6)
    assert size < 0.5e6, f"{size / 1e6:.2f} MB"


def test_overview_of_16_layers_by_32_heads_at_512_tokens_stays_light_and_honest():
    layers = [head_tiles(random_maps(32, N, N, seed=layer)) for layer in range(16)]  # as a big run keeps them
    pooled = np.stack([p for p, _ in layers])  # (16, 32, 32, 32)
    strongest = np.stack([s for _, s in layers])  # (16, 32, 3)
    fig = overview_figure(pooled, strongest, N, TOKENS, width=WIDTH)
    data, size = sent(fig)
    assert typed(data["data"][0]["z"]).dtype == np.float32
    assert size < 0.8e6, f"{size / 1e6:.2f} MB"
    # each tile's hover names its head's strongest weight, to the three decimals it shows
    hovers = data["data"][1]["hovertext"]
    query, key, weight = strongest[15, 31]
    assert hovers[-1].endswith(f"max {TOKENS[int(query)]} → {TOKENS[int(key)]}: {weight:.3f}")
    last = random_maps(32, N, N, seed=15)[31]
    assert f"{last.max():.3f}" == f"{weight:.3f}" and last[int(query), int(key)] == last.max()
