"""A long input's run (attention/runs/longrun.py): its thumbnails and strongest entries are those of the explicit
maps, pooled as a big run pools them; what it keeps is within its bound, sized before the work; whole layers are
refused."""

from __future__ import annotations

import numpy as np
import pytest
from families import make_family, make_seq2seq

from attention import EncoderDecoder, load_model
from attention.runs.bigrun import NeedsSmallerInput
from attention.runs.inputs import encode
from attention.runs.longrun import is_long, keeping, kept_bytes, long_run, longest
from attention.runs.pooling import head_tiles
from attention.runs.run import run_encoded
from viz.long import block_edges

TEXT = "the cat sat on the mat because it was tired and she read the book . " * 3


@pytest.fixture(scope="module", params=["llama", "bert", "t5"])
def model_and_input(request, tmp_path_factory):
    made = make_seq2seq if request.param == "t5" else make_family  # an encoder-decoder: the app reads its encoder
    model, tokenizer = load_model(str(made(tmp_path_factory.mktemp(request.param), request.param)))
    model = model.encoder if isinstance(model, EncoderDecoder) else model
    return model, encode(tokenizer, TEXT, max_length=model.config.max_position_embeddings)


def test_thumbnails_and_strongest_entries_are_the_explicit_maps(model_and_input):
    model, enc = model_and_input
    assert len(enc.tokens) > 32  # pooled: more tokens than thumbnail cells
    seen = []
    run = long_run(model, enc, lambda done, total: seen.append((done, total)))
    explicit = np.asarray(run_encoded(model, enc).attentions)  # (layers, H, L, L)
    strongest = head_tiles(explicit, 32)[1]
    edges = block_edges(explicit.shape[-1], 32)  # numpy.array_split's 32 blocks (LongMaps.blocks's)
    sums = np.add.reduceat(np.add.reduceat(explicit.astype(np.float64), edges[:-1], -1), edges[:-1], -2)
    pooled = sums / np.outer(np.diff(edges), np.diff(edges))
    # the same probabilities, a tile at a time: float32 rounding of values at most 1, summed over at most 4 cells
    np.testing.assert_allclose(run.pooled, pooled, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(run.strongest[..., :2], strongest[..., :2])
    np.testing.assert_allclose(run.strongest[..., 2], strongest[..., 2], atol=1e-6, rtol=0)
    n = explicit.shape[0] * explicit.shape[1]
    assert seen == [(i, 2 * n) for i in range(1, 2 * n + 1)]  # after every head of the pass, then its strongest
    assert all(kept.blocks is not None for kept in run.maps.layers)  # the thumbnails made in the pass
    tile = run.maps.tile(1, 2, slice(5, 20), slice(0, 30))
    np.testing.assert_allclose(tile, explicit[1, 2, 5:20, :30], atol=1e-6, rtol=0)


def test_whole_layers_are_refused_and_the_bound_holds(model_and_input):
    model, enc = model_and_input
    run = long_run(model, enc)
    with pytest.raises(NeedsSmallerInput, match="every head's full map at once"):
        run.attentions[0]
    with pytest.raises(NeedsSmallerInput):
        np.asarray(run.attentions)
    assert run.maps.nbytes <= kept_bytes(model, len(enc.tokens))
    assert run.maps.nbytes > 0


def test_a_bound_keeps_layer_inputs_and_makes_the_same_run(model_and_input):
    """Past its bound, the run keeps a few layer inputs (`keeping`), not every layer's q and k: the thumbnails and
    strongest entries read in the pass, and every tile made again after it, are the unbounded run's to the bit."""
    model, enc = model_and_input
    L = len(enc.tokens)
    whole = long_run(model, enc)
    seen = []
    bounded = long_run(model, enc, lambda done, total: seen.append(done), bound=kept_bytes(model, L) - 1)
    every = keeping(model, L, kept_bytes(model, L) - 1)
    assert (
        every is not None
        and bounded.maps.keep.every == every
        and bounded.maps.layers == [None] * len(whole.maps.layers)
    )
    np.testing.assert_array_equal(bounded.pooled, whole.pooled)
    np.testing.assert_array_equal(bounded.strongest, whole.strongest)
    assert seen == list(range(1, 2 * whole.pooled.shape[0] * whole.pooled.shape[1] + 1))
    for layer in range(whole.pooled.shape[0]):
        np.testing.assert_array_equal(bounded.maps.tile(layer, 1, slice(3, 40), slice(None)),
                                      whole.maps.tile(layer, 1, slice(3, 40), slice(None)))  # fmt: skip
    assert bounded.maps.nbytes <= kept_bytes(model, L, every)
    assert keeping(model, L, kept_bytes(model, L)) is None  # within the bound: every layer's q and k


def test_longest_is_the_most_tokens_kept_within_a_bound(model_and_input):
    model = model_and_input[0]
    bound = kept_bytes(model, 40)

    def fits(n: int) -> bool:
        return kept_bytes(model, n, keeping(model, n, bound)) <= bound

    most = longest(model, bound)
    assert most >= 40 and fits(most) and not fits(most + 1)
    assert longest(model, 10**12) == model.config.max_position_embeddings and longest(model, 0) == 0


def test_long_is_one_layers_maps_past_the_bound():
    assert not is_long(8, 1773) and is_long(8, 1774)  # 8 heads: 8·1773²·4 B ≤ 96 MiB < 8·1774²·4 B
    assert is_long(32, 1000)
