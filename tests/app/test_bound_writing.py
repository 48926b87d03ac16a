"""Writing keeps to the big-run bound (issue 44, attack 3): Continue and the Next token view on an 8-layer,
8-head model at 2,001 tokens kept every layer's full maps (+0.88 GB / +1.19 GB). The continuation is written
with no map made (the views read the written ids' maps through ui/compute/runs.py, pooled past the bound), the
next-token
pass makes none either, and attention.generate sizes the maps it keeps before it starts, refusing past the bound."""

from __future__ import annotations

import pytest
import torch
from families import make_family, make_seq2seq
from peak import peak_bytes

from attention import generate, load_model
from attention.runs.bigrun import BIG_RUN_BYTES, KeepsTooMuch, maps_bytes
from attention.writing.generate_seq2seq import kept_bytes

PROMPT = "zq" * 1000  # 2,000 tokens of the tiny byte-level BPE
SHAPE = dict(n_layer=8, n_head=8, n_embd=64, n_positions=2048)
# BART-base's maps (6 + 6 layers of 12 heads, 1,024 positions), narrower: the maps' size is what is tried here
BART_BASE = dict(
    d_model=96,
    encoder_layers=6,
    decoder_layers=6,
    encoder_attention_heads=12,
    decoder_attention_heads=12,
    max_position_embeddings=1024,
)


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    return make_family(tmp_path_factory.mktemp("gpt2-8x8"), "gpt2", **SHAPE)


SETUP = """
from ui.compute.generation import Settings, continuation, final_hidden
from ui.compute.models import get_model
source = {source!r}
greedy = Settings(1, False, 1.0, None, None, None)
model, tokenizer = get_model(source)
final_hidden(source, tuple(continuation(source, "zq zq", greedy).ids))  # the LM head read, the first pass made
"""


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_continue_at_2001_tokens_stays_within_the_bound(decoder):
    every_map = maps_bytes(8, 8, 2001)
    assert every_map > 10 * BIG_RUN_BYTES  # what keeping them would cost: about 1 GB
    work = f"written = continuation(source, {PROMPT!r}, greedy)\nresult['ids'] = len(written.ids)"
    measured = peak_bytes(SETUP.format(source=str(decoder)), work)
    assert measured["ids"] == 2001
    assert measured["peak"] < BIG_RUN_BYTES, f"Continue raised the peak by {measured['peak'] / 2**20:.0f} MB"


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_the_next_token_pass_at_2001_tokens_stays_within_the_bound(decoder):
    work = "ids = tuple(range(3, 300)) * 6 + tuple(range(3, 222))\nresult['rows'] = len(final_hidden(source, ids))"
    measured = peak_bytes(SETUP.format(source=str(decoder)), work)
    assert measured["rows"] == 2001
    assert measured["peak"] < BIG_RUN_BYTES, f"Next token raised the peak by {measured['peak'] / 2**20:.0f} MB"


def test_generate_refuses_before_the_work_past_the_bound_and_writes_the_same_without_maps(decoder):
    model, tokenizer = load_model(str(decoder))
    calls = []
    hook = model.layers[0].register_forward_hook(lambda *args: calls.append(1))
    with pytest.raises(KeepsTooMuch, match=f"{maps_bytes(8, 8, 2001) / 2**20:,.0f} MB here, more than the 96 MB"):
        generate(model, tokenizer, PROMPT, max_new_tokens=1)
    assert not calls  # refused before any layer ran
    hook.remove()
    kept = generate(model, tokenizer, "zq zq zq", max_new_tokens=5)
    bare = generate(model, tokenizer, "zq zq zq", max_new_tokens=5, keep_maps=False)
    assert torch.equal(kept.ids, bare.ids) and torch.equal(kept.top_ids, bare.top_ids)
    torch.testing.assert_close(kept.top_probs, bare.top_probs)  # fused and eager attention: rounding apart
    assert len(kept.attentions) == 8 and bare.attentions == ()
    long = generate(model, tokenizer, PROMPT[:1000], max_new_tokens=1, keep_maps=False)
    assert long.ids.size(1) == 1001 and long.attentions == ()
    with pytest.raises(KeepsTooMuch, match="more than the 1 MB its bound allows"):
        generate(model, tokenizer, "zq zq zq", max_new_tokens=300, maps_bound=2**20)
    assert maps_bytes(8, 8, 801) > BIG_RUN_BYTES
    unbound = generate(model, tokenizer, PROMPT[:800], max_new_tokens=1, maps_bound=None)  # past it, as asked
    assert [a.shape for a in unbound.attentions] == [(1, 8, 801, 801)] * 8


def test_an_encoder_decoder_sizes_its_three_maps_before_writing(tmp_path):
    model, tokenizer = load_model(str(make_seq2seq(tmp_path / "bart", "bart", **BART_BASE)))
    enc, dec = model.encoder.config, model.decoder.config
    S, T = 10, 4
    assert kept_bytes(model, S, T) == 4 * (
        enc.num_hidden_layers * enc.num_attention_heads * S * S
        + dec.num_hidden_layers * dec.num_attention_heads * (T * T + T * S)
    )
    with pytest.raises(KeepsTooMuch, match="shorter text"):
        generate(model, tokenizer, "zq" * 480, max_new_tokens=900)
    kept = generate(model, tokenizer, "zq zq zq", max_new_tokens=3)
    bare = generate(model, tokenizer, "zq zq zq", max_new_tokens=3, keep_maps=False)
    assert torch.equal(kept.ids, bare.ids) and len(kept.cross_attentions) == dec.num_hidden_layers
    assert bare.encoder_attentions == bare.decoder_attentions == bare.cross_attentions == ()


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_the_walk_over_the_written_text_keeps_one_heads_maps_within_the_bound(decoder):
    """The walk (and the Query·Key and shape-flow views) trace one layer. At 2,001 tokens on 8 layers × 8 heads
    the trace kept every head's scores, masked scores and probabilities, 379 MB against the 96 MB bound, sized
    after the work; the other layers made and held their full maps during that pass too (+1,379 MB). It is now
    sized first: past the bound it keeps the chosen head's maps only; the pass holds no other layer's map."""
    work = f"""
written = continuation(source, {PROMPT!r}, greedy)
trace = get_trace(source, (written.text,), "", 3, 5)
result["kept"] = size_of(trace)
result["sized"] = kept_bytes(model, 1, 2001, 5)
result["head"] = trace.head
result["shape"] = list(trace.step("probs").shape)
"""
    setup = (
        SETUP
        + "from ui.compute.runs import get_trace\nfrom ui.compute.stores import size_of\n"
        + "from attention.tracing.trace import kept_bytes\n"
    )
    measured = peak_bytes(setup.format(source=str(decoder)), work)
    one_layer = maps_bytes(1, 8, 2001)  # the traced layer's map, (H, L, L): the pass's own buffer of it
    assert 2 * maps_bytes(1, 1, 2001) < measured["kept"] <= measured["sized"] <= BIG_RUN_BYTES, f"{measured}"
    assert measured["head"] == 5 and measured["shape"] == [1, 8, 2001, 2001]  # the diagram's shapes: every head
    assert measured["peak"] - measured["kept"] < 2 * one_layer, f"{measured}"
