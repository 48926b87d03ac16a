"""The Overview outlines each head by its share of attention to the first token (AppTest): the raw share is Head
stats' to_first, the value-weighted one stats.first_share of mixing.norm_maps' maps; both named in each tile's
hover, in the link and in presentation mode; a model with no value-weighted maps says so and shows the raw share."""

from __future__ import annotations

import numpy as np
from test_app import SENTENCE, decode, figures, no_errors, start

from attention.analysis.mixing import norm_maps
from attention.analysis.stats import first_share, head_stats, punctuation_mask
from attention.runs.run import run_sentence
from viz.stats import STAT_DECIMALS


def tiles_of(at) -> dict:
    """The Overview grid's tile markers (the scatter carrying [layer, head] over a heatmap of tiles)."""
    [tiles] = [t for fig in figures(at) for t in fig["data"] if t["type"] == "scatter" and "customdata" in t]
    return tiles


def outlines(at) -> tuple[np.ndarray, list[str]]:
    """The tiles' outline colours (layer-major) and hovers of the Overview's figure."""
    tiles = tiles_of(at)
    assert tiles["marker"]["symbol"] == "square-open"
    return np.asarray(decode(tiles["marker"]["color"]), dtype=np.float64), list(tiles["hovertext"])


def shares(minilm):
    """The sentence's run and each head's first-token share, raw and value-weighted, (layers, H) each, as the
    library makes them."""
    model, tokenizer = minilm
    run = run_sentence(model, tokenizer, SENTENCE)
    enc = run.encoded
    raw = head_stats(run.attentions, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))["to_first"]
    weighted = np.stack([first_share(h) for h in norm_maps(model, enc.input_ids, enc.attention_mask).heads])
    return run, raw, weighted


def test_heads_outlined_by_their_raw_and_value_weighted_first_token_shares(minilm):
    run, raw, weighted = shares(minilm)
    at = start(view="overview", sink="raw")
    no_errors(at)
    colours, hovers = outlines(at)
    np.testing.assert_allclose(colours, raw.reshape(-1), atol=1e-6)
    assert "to the first token: " in hovers[0] and "raw" in hovers[0]

    for present in ("0", "1"):  # the page, and presentation mode's first screen
        at = start(view="overview", sink="weighted", present=present)
        no_errors(at)
        colours, hovers = outlines(at)
        np.testing.assert_allclose(colours, weighted.reshape(-1), atol=1e-5)
        assert not np.allclose(colours, raw.reshape(-1), atol=1e-3)
        last = (run.n_layers - 1, run.n_heads - 1)
        assert f"{weighted[last]:.3f} value-weighted, {raw[last]:.3f} raw" in hovers[-1]
        assert at.query_params["sink"] == ["weighted"] or at.query_params["sink"] == "weighted"


def test_no_outline_by_default():
    at = start(view="overview")
    no_errors(at)
    tiles = tiles_of(at)
    assert tiles["marker"].get("symbol") == "square" and "to the first token" not in str(tiles["hovertext"])


def test_head_stats_lists_both_first_token_shares(minilm):
    _, raw, weighted = shares(minilm)
    at = start(view="stats")
    no_errors(at)
    frame = at.dataframe[0].value.sort_values(["layer", "head"])
    step = 10.0**-STAT_DECIMALS  # the table's rounding, and the float32 maps' last digits
    np.testing.assert_allclose(frame["to_first"].to_numpy(), raw.reshape(-1), atol=step, rtol=0)
    np.testing.assert_allclose(frame["to_first_weighted"].to_numpy(), weighted.reshape(-1), atol=step, rtol=0)
