"""A lines figure is sized from its counts before it is built (issue 44, attack 5 and the Cross-attention Lines
expander): the Head view's Lines with 12 heads at 512 tokens built a 233 MB figure (+1.3 GB peak), past the 50 MB
message limit, and one cross-attention head at about 1,000 × 1,000 tokens 77.7 MB. Each head now draws its
strongest lines, its share of MAX_LINES, and the estimate bounds the JSON the page sends."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from peak import peak_bytes
from test_app import decode, no_errors, start

import viz
from attention.runs.bigrun import BIG_RUN_BYTES
from viz.lines import MAX_LINES, MESSAGE_BYTES, TooManyLines, figure_bytes, strongest

ROOT = Path(__file__).resolve().parents[2]
BUILD = """
import numpy as np, plotly.io, viz
from viz.lines import figure_bytes
rng = np.random.default_rng(0)
maps = rng.random(({heads}, {rows}, {cols}), dtype=np.float32)
maps /= maps.sum(-1, keepdims=True)
tokens, keys = [f"tok{{i}}" for i in range({rows})], [f"key{{i}}" for i in range({cols})]
names = [f"L0 H{{h}}" for h in range({heads})]
"""
DRAW = """
fig = viz.lines_view(maps, tokens, heads=names, key_tokens=keys)
result["json"] = len(plotly.io.to_json(fig, validate=False))
result["lines"] = sum(len(t.x) // 3 for t in fig.data if t.mode == "lines")
result["estimate"] = figure_bytes(result["lines"], len(fig.data), [*tokens, *keys, *names])
"""


def test_the_message_limit_is_the_servers():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert MESSAGE_BYTES == config["server"]["maxMessageSize"] * 2**20


@pytest.mark.parametrize(
    "heads, rows, cols",
    [(12, 512, 512), (1, 1000, 1000)],  # the Head view's 12 heads; the Cross-attention expander's one head
)
def test_a_lines_figure_stays_within_the_message_limit_and_the_bound(heads, rows, cols):
    measured = peak_bytes(BUILD.format(heads=heads, rows=rows, cols=cols), DRAW)
    assert measured["lines"] <= MAX_LINES < heads * rows * cols
    assert measured["json"] <= measured["estimate"] < MESSAGE_BYTES
    assert measured["peak"] < BIG_RUN_BYTES, f"building the lines raised the peak by {measured['peak'] / 2**20:.0f} MB"


def test_each_head_draws_its_strongest_lines_and_the_title_says_so():
    rng = np.random.default_rng(1)
    maps = rng.random((3, 40, 40))
    maps[1, 5] = 0.5  # a row of ties at the cut
    fig = viz.lines_view(maps, [f"t{i}" for i in range(40)], max_lines=300)
    (note,) = fig.layout.annotations
    assert note.text == "The 100 strongest lines of each head<br>are drawn (of up to 1,600)."
    for head, attn in enumerate(maps):
        traces = [t for t in fig.data if t.mode == "lines" and t.legendgroup == f"head {head}"]
        pairs = np.concatenate([decode(t.y).reshape(-1, 3)[:, :2] for t in traces]).astype(int)
        drawn = attn[pairs[:, 0], pairs[:, 1]]
        assert len(pairs) == 100 and drawn.min() >= np.sort(attn.ravel())[-100]
    small = viz.lines_view(maps[0][:10, :10], [f"t{i}" for i in range(10)])
    assert not small.layout.annotations and sum(len(t.x) // 3 for t in small.data if t.mode == "lines") == 100


def test_strongest_keeps_the_first_of_equal_weights_and_leaves_a_short_map_whole():
    attn = np.array([[0.2, 0.5, 0.2], [0.2, 0.1, 0.0]])
    drawn = attn > 0
    assert strongest(drawn, attn, None) is drawn and strongest(drawn, attn, 5) is drawn
    kept = strongest(drawn, attn, 3)
    assert kept.tolist() == [[True, True, True], [False, False, False]]  # 0.5, then the first two of the 0.2s


def test_a_figure_past_the_limit_is_refused_before_it_is_built():
    labels = ["x" * 200_000] * 40  # long labels alone pass the limit
    assert figure_bytes(0, 2, labels * 2) > MESSAGE_BYTES
    with pytest.raises(TooManyLines, match="more than the 50 MB the page sends"):
        viz.lines_view(np.eye(40), labels)


def test_the_head_views_lines_with_12_heads_at_512_tokens():
    heads = ",".join(str(h) for h in range(12))
    at = start(s="word " * 600, view="head", draw="lines", heads=heads)  # the bundled MiniLM: 12 heads, 512 tokens
    no_errors(at)
    (chart,) = [c for c in at.get("plotly_chart") if "strongest lines" in c.proto.spec]
    spec = json.loads(chart.proto.spec)
    assert spec["layout"]["annotations"][0]["text"].startswith(f"The {MAX_LINES // 12:,} strongest lines of each head")
    assert len(chart.proto.spec) < MESSAGE_BYTES // 4
