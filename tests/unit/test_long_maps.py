"""attention.long_maps: one fused pass keeps q, k, the mask and each row's log-sum-exp per layer, and any head's
blocks or tile made from them equals the explicit map's (Transformer.forward's attentions) to 1e-6, for every kind
of family: learned, sinusoid, rotary and no positions, fused Q·K·V, grouped K/V, windows, a soft-cap, DeBERTa's
position terms, T5's bias, causal and padded inputs, both stacks of an encoder-decoder. A pass over 8,192 tokens
keeps far below one layer's (H, L, L) map."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import make_family, make_more, make_seq2seq
from peak import peak_bytes

import attention.core.long as long
from attention import EncoderDecoder, load_model
from attention.core.implementations import IMPLEMENTATIONS
from attention.core.request import Call, MapRequest
from attention.long_maps import TILE_CELLS, long_maps

TOL = 1e-6  # float32 rounding of the same scores, taken in another order, and of exp(s - lse) against a softmax
L, L_DEC = 23, 17
CASES = {  # name -> (maker, family): what each adds
    "bert": (make_family, "bert"),  # learned positions, an encoder
    "gpt2": (make_family, "gpt2"),  # fused Q·K·V, causal
    "llama": (make_family, "llama"),  # rotary, 2 K/V heads for 4
    "mistral": (make_family, "mistral"),  # a causal window of 5
    "smollm3": (make_more, "smollm3"),  # a layer with no positions
    "gemma2": (make_more, "gemma2"),  # a soft-cap, a window, its own scaling
    "gpt_oss": (make_more, "gpt_oss"),  # learned sinks, alternating windows, yarn rotary, experts
    "gemma4_text": (make_more, "gemma4_text"),  # wider heads on the full layers, proportional rotary, v_norm
    "modernbert": (make_more, "modernbert"),  # an encoder's band
    "deberta-v2": (make_more, "deberta-v2"),  # c2p and p2c position terms
    "t5": (make_seq2seq, "t5"),  # the relative bias on the scores, both stacks
    "marian": (make_seq2seq, "marian"),  # sinusoid positions, both stacks
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = {}

    def load(case: str):
        if case not in cache:
            maker, family = CASES[case]
            cache[case] = load_model(str(maker(tmp_path_factory.mktemp(case), family)))[0]
        return cache[case]

    return load


def batch(vocab: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(3, length) ids and their mask: element 0 whole, 1 left padded by 4, 2 right padded by 5."""
    ids = torch.randint(3, min(vocab, 250), (3, length), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(3, length, dtype=torch.long)
    mask[1, :4], mask[2, -5:] = 0, 0
    return ids, mask


def explicit_maps(model, part: str) -> tuple[tuple[torch.Tensor, ...], dict]:
    """Our explicit forward's maps of `part` (each (3, H, L, L)), and the inputs long_maps takes."""
    vocab = model.config.vocab_size
    ids, mask = batch(vocab, L)
    with torch.inference_mode():
        if not isinstance(model, EncoderDecoder):
            return model(ids, mask).attentions, dict(input_ids=ids, attention_mask=mask)
        dec_ids, dec_mask = batch(vocab, L_DEC, seed=1)
        out = model(ids, mask, decoder_input_ids=dec_ids, decoder_attention_mask=dec_mask)
    inputs = dict(input_ids=ids, attention_mask=mask, part=part, decoder_input_ids=dec_ids)
    inputs["decoder_attention_mask"] = dec_mask
    return (out.encoder_attentions if part == "encoder" else out.decoder_attentions), inputs


def tolerance(largest: torch.Tensor) -> float:
    """TOL, or where a layer's scores are large, 4 of their last bits: a score s summed in another order (another
    tile's shape) may differ in its last bits, ulp(s), and p = exp(s - lse) then by p · that. Only Marian's first
    layers here, whose random weights make scores of 44 (ulp 3.8e-6); every other layer's are below 4."""
    return max(TOL, 4 * float(np.spacing(np.float32(largest.abs().max()))))


def pooled(full: np.ndarray, n: int, how) -> np.ndarray:
    return np.array([[how(p) for p in np.array_split(r, n, axis=1)] for r in np.array_split(full, n, axis=0)])


PARAMS = [(case, part) for case in CASES for part in ("encoder", "decoder") if part == "encoder" or "t5" in case]
PARAMS += [("marian", "decoder")]


@pytest.mark.parametrize("tiles", ["whole", "3 rows"])
@pytest.mark.parametrize(("case", "part"), PARAMS)
def test_blocks_and_tiles_equal_the_explicit_maps(built, case, part, tiles, monkeypatch):
    """Every layer, head and batch element (whole, left and right padded); "3 rows": every block and tile made
    3 query rows at a time, so that tiles cut the blocks' runs unevenly (the pass's own tiles: the next test)."""
    model = built(case)
    reference, inputs = explicit_maps(model, part)
    usual = long.TILE_BYTES
    for b in range(3):
        monkeypatch.setattr(long, "TILE_BYTES", usual)
        maps = long_maps(model, **inputs, batch=b)
        monkeypatch.setattr(long, "TILE_BYTES", 4 * 3 * max(L, L_DEC) if tiles == "3 rows" else usual)
        assert maps.shape == (len(reference), *reference[0].shape[1:])
        for layer, heads in enumerate(reference):
            tol = tolerance(maps.layers[layer].largest)
            for head in range(heads.size(1)):
                full = heads[b, head].numpy()  # (L, L)
                whole = maps.tile(layer, head, slice(None), slice(None))
                np.testing.assert_allclose(whole, full, atol=tol, rtol=0, err_msg=f"{case} {layer} {head} {b}")
                some = maps.tile(layer, head, slice(3, 20, 2), slice(1, None, 3))
                np.testing.assert_allclose(some, full[3:20:2, 1::3], atol=tol, rtol=0)
                np.testing.assert_allclose(maps.blocks(layer, head, 5), pooled(full, 5, np.mean), atol=tol, rtol=0)
                np.testing.assert_allclose(maps.blocks(layer, head, 7, "max"), pooled(full, 7, np.max), atol=tol)
                mean, most = maps.pooled(layer, head, 6)  # both reductions from one pass
                np.testing.assert_allclose(mean, pooled(full, 6, np.mean), atol=tol, rtol=0)
                np.testing.assert_allclose(most, pooled(full, 6, np.max), atol=tol, rtol=0)
                np.testing.assert_allclose(maps.row(layer, head, 9), full[9], atol=tol, rtol=0)
        assert maps.blocks(0, 0, full.shape[0]).shape == full.shape  # one cell a block: the map itself


@pytest.mark.parametrize("tiles", ["whole", "3 rows"])
@pytest.mark.parametrize(("case", "part"), PARAMS)
def test_blocks_pooled_in_the_pass_equal_the_explicit_maps(built, case, part, tiles, monkeypatch):
    """pool=6: every head's mean and max blocks made in the pass from the scores its output is made of ("3 rows":
    3 query rows a tile, so that tiles cut the row blocks), equal to the explicit maps' and read by blocks and
    pooled; the pass's outputs and log-sum-exps equal the pass that does not pool; progress after every head."""
    model = built(case)
    reference, inputs = explicit_maps(model, part)
    plain = long_maps(model, **inputs, batch=1)
    if tiles == "3 rows":
        monkeypatch.setattr(long, "TILE_BYTES", 4 * 3 * max(L, L_DEC))
    done: list[int] = []
    maps = long_maps(model, **inputs, batch=1, pool=6, progress=done.append)
    assert done == list(range(1, len(reference) * reference[0].size(1) + 1))
    for layer, heads in enumerate(reference):
        kept, tol = maps.layers[layer], tolerance(maps.layers[layer].largest)
        assert kept.blocks is not None and kept.blocks[0].shape == (heads.size(1), 6, 6)  # made in the pass
        torch.testing.assert_close(kept.q, plain.layers[layer].q, atol=1e-5, rtol=0)
        torch.testing.assert_close(kept.lse, plain.layers[layer].lse, atol=max(tol, 1e-5), rtol=0)
        for head in range(heads.size(1)):
            full = heads[1, head].numpy()  # (L, L)
            mean, most = maps.pooled(layer, head, 6)
            np.testing.assert_allclose(mean, pooled(full, 6, np.mean), atol=tol, rtol=0, err_msg=f"{layer} {head}")
            np.testing.assert_allclose(most, pooled(full, 6, np.max), atol=tol, rtol=0)
            np.testing.assert_array_equal(maps.blocks(layer, head, 6, "max"), most)
            np.testing.assert_allclose(maps.blocks(layer, head, 5), pooled(full, 5, np.mean), atol=tol, rtol=0)


@pytest.mark.parametrize(("case", "part"), PARAMS)
def test_the_pass_in_row_tiles_gives_the_same_outputs_and_log_sum_exps(built, case, part, monkeypatch):
    """The pass's fused kernel (or, with a soft-cap or score terms, its explicit steps) and each row's log-sum-exp
    3 query rows at a time: the outputs of the whole pass's to float error (the sums of a tile's rows taken in
    another order, as the fused kernel's are: 1e-5, as tests/test_rows.py allows), the first layer's
    log-sum-exps (which read the same inputs) to float rounding."""
    model = built(case)
    _, inputs = explicit_maps(model, part)
    whole = long_maps(model, **inputs, batch=2)
    monkeypatch.setattr(long, "TILE_BYTES", 4 * 3 * max(L, L_DEC))
    tiled = long_maps(model, **inputs, batch=2)
    for a, b in zip(whole.layers, tiled.layers):
        torch.testing.assert_close(b.q, a.q, atol=1e-5, rtol=0)  # the layer's input, from the layers before
    first = tolerance(whole.layers[0].largest)
    torch.testing.assert_close(tiled.layers[0].lse, whole.layers[0].lse, atol=first, rtol=0)
    torch.testing.assert_close(tiled.layers[-1].lse, whole.layers[-1].lse, atol=1e-5, rtol=0)


@pytest.mark.parametrize("every", [1, 2])
@pytest.mark.parametrize("case", ["llama", "gpt_oss", "gemma4_text", "deberta-v2", "t5"])
def test_layers_made_again_from_kept_inputs_equal_the_kept_ones_to_the_bit(built, case, every):
    """every=k: the pass keeps every k-th layer's input, not q and k (2 layers: every=1 resumes layer 1 from its
    kept input, every=2 both from the embeddings); each layer is made again when asked for, and every tile, row
    and block is the kept pass's to the bit (the same steps on the same numbers), the thumbnails made in the
    pass too. on_layer reads each layer while the pass holds its q and k."""
    model = built(case)
    _, inputs = explicit_maps(model, "encoder")
    kept = long_maps(model, **inputs, batch=1, pool=6)
    seen: list[tuple[int, int]] = []

    def on_layer(m, layer: int) -> None:  # the layer's head 0, read while the pass holds its q and k
        seen.append((layer, int(m.tile(layer, 0, slice(None), slice(None)).argmax())))

    maps = long_maps(model, **inputs, batch=1, pool=6, every=every, on_layer=on_layer)
    n_layers, H, _, _ = maps.shape
    assert maps.shape == kept.shape and maps.layers == [None] * n_layers
    assert sorted(maps.keep.inputs) == list(range(every, n_layers, every))  # layer 0's is the embeddings'
    assert maps.nbytes < kept.nbytes
    for layer in range(n_layers):
        assert maps.made_again(layer) == (layer not in maps.live)
        first = maps.tile(layer, 0, slice(None), slice(None))
        assert seen[layer] == (layer, int(first.argmax()))
        assert sorted(maps.live) == list(range(layer // every * every, min(layer // every * every + every, n_layers)))
        for head in range(H):
            every_key = slice(None)
            np.testing.assert_array_equal(maps.tile(layer, head, every_key, every_key),
                                          kept.tile(layer, head, every_key, every_key))  # fmt: skip
            np.testing.assert_array_equal(maps.pooled(layer, head, 6)[0], kept.pooled(layer, head, 6)[0])
            np.testing.assert_array_equal(maps.blocks(layer, head, 4), kept.blocks(layer, head, 4))
    with pytest.raises(ValueError, match="every must be a positive number of layers"):
        long_maps(model, **inputs, every=0)


def test_the_pass_keeps_what_a_map_needs_and_no_map(built):
    """A long request runs "long" in every layer: outputs as the fused pass's, no map, one kept layer each."""
    model = built("llama")
    ids, mask = batch(model.config.vocab_size, L)
    keep = long.LongKeep(batch=1)
    with torch.inference_mode():
        ours = model(ids, mask, request=MapRequest(keep=keep))
        fused = model(ids, mask, request=MapRequest(layers=()))
    assert ours.attentions == (None, None) and len(keep.layers) == 2
    torch.testing.assert_close(ours.last_hidden_state, fused.last_hidden_state, atol=1e-5, rtol=0)
    H, G, d = 4, 2, 8
    kept = keep.layers[0]
    assert (kept.q.shape, kept.k.shape, kept.lse.shape) == ((H, L, d), (G, L, d), (H, L))
    assert "long" in IMPLEMENTATIONS and MapRequest(keep=keep).call(0, 1).implementation == "long"
    with pytest.raises(ValueError, match="records no step and ablates no head"):
        MapRequest(keep=keep).call(0, 1, head_mask=torch.ones(H))
    with pytest.raises(ValueError, match="no attention implementation"):
        Call("longest")


def test_bad_requests_say_what_is_wrong(built):
    model = built("gpt2")
    ids, mask = batch(model.config.vocab_size, L)
    maps = long_maps(model, ids, mask)
    for bad, message in [
        (lambda: maps.blocks(0, 0, 0), "n must be from 1 to 23"),
        (lambda: maps.blocks(0, 0, 24), "n must be from 1 to 23"),
        (lambda: maps.blocks(0, 0, 4, "median"), "reduce must be one of mean, max"),
        (lambda: maps.blocks(2, 0, 4), "no layer 2, head 0: 2 layers of 4 heads"),
        (lambda: maps.tile(0, 4, slice(None), slice(None)), "no layer 0, head 4"),
        (lambda: maps.tile(0, 0, slice(None, None, -1), slice(None)), "rows must run forwards"),
        (lambda: maps.tile(0, 0, slice(None), 3), "cols must be a slice, got int"),
        (lambda: maps.row(0, 0, 23), "query must be from 0 to 22"),
        (lambda: maps.pooled(0, 0, 4, ("mean", "median")), "median"),
        (lambda: long_maps(model, ids, mask, batch=3), "batch element 3"),
        (lambda: long_maps(built("t5"), ids, mask, part="cross"), "part must be one of encoder, decoder"),
        (lambda: long_maps(built("t5"), ids, mask, part="decoder"), "need decoder_input_ids"),
    ]:
        with pytest.raises(ValueError, match=message):
            bad()
    assert TILE_CELLS == 4096 * 4096


SETUP = """
import torch
from attention import load_model
from attention.long_maps import long_maps
model, _ = load_model({folder!r})
ids = torch.randint(3, 250, (1, 8192), generator=torch.Generator().manual_seed(0))
long_maps(model, ids[:, :64]).blocks(0, 0, 8)  # warmed
"""
WORK = """
maps = long_maps(model, ids, pool=256)
blocks = maps.blocks(0, 3, 256)
maps.blocks(0, 3, 128)  # not pooled in the pass: its own pass of row tiles
tile = maps.tile(0, 3, slice(4096, 4608), slice(0, 512))
result["blocks"] = float(blocks.sum())
result["tile"] = list(tile.shape)
"""


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "t5"])
def test_8192_tokens_keep_far_below_one_layers_maps(tmp_path, monkeypatch, family):
    """A causal model (and T5's encoder) of 4 heads over 8,192 tokens: one layer's maps would be H · L² · 4 bytes,
    1 GiB, one head's 256 MiB, and so would T5's relative bias made as a mask. The pass, every block of a head and
    a 512 × 512 tile raise the resident set by the model's own boolean causal mask (L² bytes, 64 MiB; T5's
    encoder has none), the kept q and k (a few MiB) and a few tiles of rows (16 MiB each: a tile's scores, their
    exponentials, its rows of the mask or T5's bias): measured 128 MiB. Made whole, a head's map alone would be
    past the bound, and so would T5's bias."""
    if family == "t5":  # relative positions: any length the config allows
        folder = make_seq2seq(tmp_path / "t5-8k", "t5", n_positions=8192, num_layers=1, num_decoder_layers=1)
    else:
        folder = make_family(
            tmp_path / "llama-8k", "llama", max_position_embeddings=8192, hidden_size=64, num_hidden_layers=1
        )
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(2**16))  # freed blocks leave the resident set
    measured = peak_bytes(SETUP.format(folder=str(folder)), WORK)
    H, n = 4, 8192
    assert measured["tile"] == [512, 512]
    assert abs(measured["blocks"] - n / 32**2) < 1e-3  # every row sums to 1; 32 × 32 cells a block
    bound = n * n + 6 * 16 * 2**20  # the causal mask and six 16 MiB tiles (long.TILE_BYTES): 160 MiB
    assert long.TILE_BYTES == 16 * 2**20 and bound < n * n * 4 < H * n * n * 4
    assert measured["peak"] < bound, f"peak {measured['peak'] / 2**20:.0f} MiB"
