"""The notebook views of whole outputs: an encoder-decoder's forward and generation (tiny BART) with the Attention
menu choosing its kinds, and a causal generation (tiny GPT-2) with its written tokens marked; every map drawn is
the output's own."""

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from families import make_family, make_seq2seq

import viz
from attention import generate, load_model
from viz.kind_menu import HIDDEN_RANGE

TEXT = "The animal didn't cross the street"
N_NEW = 5
KINDS = ("encoder", "decoder", "cross")


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    model, tokenizer = load_model(make_seq2seq(tmp_path_factory.mktemp("bart"), "bart", seed=2))
    return model, tokenizer, generate(model, tokenizer, TEXT, max_new_tokens=N_NEW)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    model, tokenizer = load_model(make_family(tmp_path_factory.mktemp("gpt2"), "gpt2"))
    return generate(model, tokenizer, TEXT, max_new_tokens=N_NEW)


def menu(fig, name):
    return next(m for m in fig.layout.updatemenus if m.name == name)


def press(fig, name, label):
    """Apply a menu button's arguments to the figure, as plotly.js does in the browser."""
    button = next(b for b in menu(fig, name).buttons if b.label == label)
    if button.method == "relayout":
        fig.update_layout(button.args[0])
        return
    for key, values in button.args[0].items():
        for trace, value in zip(fig.data, values):
            trace[key] = value


def drawn(fig):
    """The maps the reader sees: visible, opaque heatmaps on shown axes whose range covers their cells."""
    out = []
    for t in fig.data:
        if not isinstance(t, go.Heatmap) or t.visible is False or t.opacity == 0:
            continue
        x_axis = fig.layout["xaxis" + t.xaxis[1:]]
        if x_axis.visible is not False and list(x_axis.range) != HIDDEN_RANGE:
            out.append(t)
    return out


def maps(output, kind, layer, head):
    return getattr(output, f"{kind}_attentions")[layer][0, head].numpy()


def test_head_view_of_a_generation_draws_its_three_kinds(bart):
    _, _, out = bart
    fig = viz.head_view(out, layer=1, heads=0)
    shown = drawn(fig)
    assert len(shown) == 3
    n_enc, n_dec = len(out.encoder_tokens), len(out.tokens)
    for trace, kind, shape in zip(shown, KINDS, ((n_enc, n_enc), (n_dec, n_dec), (n_dec, n_enc))):
        assert np.asarray(trace.z).shape == shape
        np.testing.assert_array_equal(trace.z, maps(out, kind, 1, 0))
    cross = shown[2]
    assert n_dec != n_enc and len(cross.y) == n_dec and len(cross.x) == n_enc  # decoder rows × encoder columns
    assert fig.layout.yaxis3.title.text == "decoder query" and fig.layout.xaxis3.title.text == "cross: encoder key"
    press(fig, "Layer", "Layer 0")
    press(fig, "Head", "Head 1")
    for trace, kind in zip(drawn(fig), KINDS):
        np.testing.assert_array_equal(trace.z, maps(out, kind, 0, 1))
    press(fig, "Head", "Head 3")  # the encoder's 4 heads, the decoder's 2
    [encoder] = drawn(fig)
    np.testing.assert_array_equal(encoder.z, maps(out, "encoder", 0, 3))


def test_attention_menu_shows_one_kind_where_all_were(bart):
    _, _, out = bart
    fig = viz.head_view(out)
    assert [b.label for b in menu(fig, "Attention").buttons] == ["All", "Encoder", "Decoder", "Cross"]
    first_start = fig.layout.xaxis.domain[0]
    press(fig, "Attention", "Cross")
    [cross] = drawn(fig)
    np.testing.assert_array_equal(cross.z, maps(out, "cross", 0, 0))
    assert fig.layout.xaxis3.domain[0] == pytest.approx(first_start, abs=0.02)  # moved to the left edge
    assert not fig.layout.xaxis.visible and not fig.layout.yaxis2.visible
    press(fig, "Head", "Head 1")  # the other menus still choose among the shown kind's maps
    np.testing.assert_array_equal(drawn(fig)[0].z, maps(out, "cross", 0, 1))
    press(fig, "Attention", "All")
    assert [t.yaxis for t in drawn(fig)] == ["y", "y2", "y3"]
    grid = viz.model_view(out)
    press(grid, "Attention", "Decoder")
    [decoder] = drawn(grid)
    np.testing.assert_array_equal(decoder.z[: len(out.tokens), : len(out.tokens)], maps(out, "decoder", 0, 0))
    assert grid.layout.yaxis2.domain[1] == pytest.approx(grid.layout.yaxis.domain[1])  # moved to the top


def test_a_forward_output_with_its_tokens_as_bertviz_takes_them(bart):
    model, tokenizer, out = bart
    with torch.no_grad():
        forward = model(out.encoder_ids, decoder_input_ids=out.ids)
    as_kinds = viz.head_view(
        encoder_attention=forward.encoder_attentions,
        decoder_attention=forward.decoder_attentions,
        cross_attention=forward.cross_attentions,
        encoder_tokens=out.encoder_tokens,
        decoder_tokens=out.tokens,
    )
    as_output = viz.head_view(forward, encoder_tokens=out.encoder_tokens, decoder_tokens=out.tokens)
    as_pair = viz.head_view(forward, (out.encoder_tokens, out.tokens))
    as_generation = viz.head_view(out)
    for fig in (as_output, as_pair):
        assert fig.to_plotly_json() == as_kinds.to_plotly_json()
    # generate's maps come from its steps: the forward's up to float rounding (1e-6), the figure otherwise the same
    written, forwarded = as_generation.to_plotly_json(), as_kinds.to_plotly_json()
    assert written["layout"] == forwarded["layout"] and len(written["data"]) == len(forwarded["data"])
    for ours, theirs in zip(written["data"], forwarded["data"], strict=True):
        assert {k: v for k, v in ours.items() if k != "z"} == {k: v for k, v in theirs.items() if k != "z"}
    for ours, theirs in zip(as_generation.data, as_kinds.data, strict=True):
        if isinstance(theirs, go.Heatmap):
            np.testing.assert_allclose(np.asarray(ours.z, float), np.asarray(theirs.z, float), atol=1e-6, rtol=0)
    grid = viz.model_view(forward, encoder_tokens=out.encoder_tokens, decoder_tokens=out.tokens)
    cross = [t for t in grid.data if isinstance(t, go.Heatmap)][2]
    np.testing.assert_allclose(
        cross.z[: len(out.tokens), : len(out.encoder_tokens)], maps(out, "cross", 0, 0), atol=1e-6
    )
    with pytest.raises(ValueError, match="encoder_tokens and decoder_tokens"):
        viz.head_view(forward, out.tokens)
    with pytest.raises(ValueError, match="not both"):
        viz.head_view(forward, cross_attention=forward.cross_attentions)


def test_causal_generation_marks_its_written_tokens(gpt2):
    out = gpt2
    n, first_new = len(out.tokens), len(out.tokens) - N_NEW
    fig = viz.head_view(out, layer=1, heads=1)
    [shown] = drawn(fig)
    assert np.asarray(shown.z).shape == (n, n)
    np.testing.assert_array_equal(shown.z, out.attentions[1][0, 1].numpy())
    assert [s.x0 for s in fig.layout.shapes] == [first_new - 0.5, -0.5]  # the line between prompt and written
    ticks = list(fig.layout.xaxis.ticktext)
    assert all("<span" not in t for t in ticks[:first_new]) and all("<span" in t for t in ticks[first_new:])
    assert "written" in fig.layout.xaxis.title.text
    assert "Attention" not in [m.name for m in fig.layout.updatemenus]
    grid = viz.model_view(out)
    np.testing.assert_array_equal(grid.data[0].z[:n, :n], out.attentions[0][0, 0].numpy())
    with pytest.raises(ValueError, match="sentence pair"):
        viz.head_view(out, sentence_b_start=2)
