"""Generation with our own model: greedy ids equal transformers' generate token for token on tiny random causal
decoders, the key/value cache gives a full forward's logits at every step, seeded sampling repeats itself and
keeps to top_k, and the maps returned are the forward's over the written sequence."""

import importlib
import json

import pytest
import torch
from families import DECODERS, make_family, make_more

from attention import generate, load_lm_head, load_model
from attention.core.mha import KeyValueCache
from attention.core.request import MapRequest
from attention.models.decoding import decode, decode_masks
from attention.writing.generate import lm_head
from attention.writing.search import BufferedCache

PROMPT = "The animal didn't cross the street because"
N_NEW = 12
MORE = ("qwen3", "gpt_neox", "opt", "olmo2")


def make(folder, family):
    return make_family(folder, family) if family in ("gpt2", *DECODERS) else make_more(folder, family)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = {}

    def get(family):
        if family not in cache:
            folder = make(tmp_path_factory.mktemp(family), family)
            cache[family] = (folder, *load_model(folder))
        return cache[family]

    return get


def reference_ids(folder, tokenizer, **options):
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    enc = tokenizer(PROMPT, return_tensors="pt")
    eos = ref.generation_config.eos_token_id
    pad = eos[0] if isinstance(eos, list) else eos
    with torch.no_grad():
        out = ref.generate(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            do_sample=False,
            max_new_tokens=N_NEW,
            pad_token_id=pad,
            **options,
        )
    return out


@pytest.mark.parametrize("family", ["gpt2", *DECODERS, *MORE])
def test_greedy_ids_equal_transformers(built, family):
    folder, model, tokenizer = built(family)
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    theirs = reference_ids(folder, tokenizer)
    assert torch.equal(ours.ids, theirs), (ours.ids, theirs)
    prompt_len = tokenizer(PROMPT, return_tensors="pt")["input_ids"].size(1)
    assert torch.equal(ours.new_ids, ours.ids[:, prompt_len:])
    assert ours.top_ids.shape == ours.top_probs.shape == (ours.new_ids.size(1), 5)
    assert torch.equal(ours.top_ids[:, 0], ours.new_ids[0])  # greedy: the most probable token each time
    assert ours.tokens == tokenizer.convert_ids_to_tokens(ours.ids[0].tolist())


def test_generation_config_penalties_followed(tmp_path):
    """repetition_penalty and no_repeat_ngram_size of generation_config.json change what greedy search writes,
    as transformers' generate reads them."""
    folder = make_family(tmp_path / "llama", "llama")
    path = folder / "generation_config.json"
    values = json.loads(path.read_text())
    plain_model, tokenizer = load_model(folder)
    plain = generate(plain_model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    path.write_text(json.dumps({**values, "repetition_penalty": 1.5, "no_repeat_ngram_size": 2}))
    model, tokenizer = load_model(folder)
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    assert torch.equal(ours.ids, reference_ids(folder, tokenizer))
    assert not torch.equal(ours.ids, plain.ids)
    ids = ours.ids[0].tolist()
    bigrams = list(zip(ids, ids[1:]))
    assert len(bigrams) == len(set(bigrams))


def test_beam_search_refused(tmp_path):
    folder = make_family(tmp_path / "gpt2", "gpt2")
    path = folder / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "num_beams": 4}))
    model, tokenizer = load_model(folder)
    with pytest.raises(ValueError, match="beam search"):
        generate(model, tokenizer, PROMPT)


CACHES = {"concatenated": KeyValueCache, "buffered": lambda: BufferedCache(64)}


@pytest.mark.parametrize("kind", CACHES)
@pytest.mark.parametrize("family", ["gpt2", *DECODERS, *MORE])
def test_cache_logits_equal_full_forward(built, family, kind):
    """Every step's logits through the key/value cache equal those of a forward over the whole sequence."""
    _, model, tokenizer = built(family)
    head = load_lm_head(model)
    ids = tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    cache = [CACHES[kind]() for _ in model.layers]
    with torch.inference_mode():
        hidden = decode(model, ids, cache).last_hidden_state
        for _ in range(8):
            cached = head(hidden[:, -1])  # (1, V)
            full = head(model(ids).last_hidden_state[:, -1])  # (1, V)
            torch.testing.assert_close(cached, full, atol=1e-5, rtol=0)
            token = cached.argmax(-1, keepdim=True)
            ids = torch.cat((ids, token), dim=1)
            hidden = decode(model, token, cache).last_hidden_state
    assert cache[0].length == ids.size(1)  # every position once, the last token's included


def test_buffered_cache_holds_its_capacity_only():
    cache = BufferedCache(3)
    k, v = torch.randn(1, 2, 2, 4), torch.randn(1, 2, 2, 4)
    cache.extend(k, v)
    keys, values = cache.extend(k[:, :, :1], v[:, :, :1])
    assert cache.length == 3 and torch.equal(keys, torch.cat((k, k[:, :, :1]), dim=2))
    assert torch.equal(values, torch.cat((v, v[:, :, :1]), dim=2))
    with pytest.raises(ValueError, match="exceed"):
        cache.extend(k[:, :, :1], v[:, :, :1])


def test_decode_takes_the_new_positions_rows_only(built):
    """decode's rotary angles and T5's buckets for new positions are those rows of all positions' (nothing else
    computed); one new query sees every key but beyond a sliding window, so it needs no mask within one; a forward
    that keeps only maps can keep no hidden state, with the same maps."""

    from attention.core.rotary import angles_for
    from attention.models.positions import relative_buckets

    _, model, _ = built("mistral")  # rotary, sliding_window 5
    dynamic = model.config.replace(rope_type="dynamic", rope_factor=2.0, max_position_embeddings=6)
    for config in (model.config, dynamic):
        rows, whole = angles_for(config, 3, torch.device("cpu"), start=5), angles_for(config, 8, torch.device("cpu"))
        assert all(torch.equal(r, w[:, 5:]) for r, w in zip(rows, whole))
    assert torch.equal(relative_buckets(3, 40, False, 32, 16, start=37), relative_buckets(40, 40, False, 32, 16)[37:])
    assert decode_masks(model.config, 1, 1, 5, torch.device("cpu")) == (None, None)
    mask, window = decode_masks(model.config, 1, 1, 9, torch.device("cpu"))
    assert mask is None and window is not None and window[0, 0, 0].tolist() == [False] * 4 + [True] * 5
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.inference_mode():
        kept, bare = (
            model(ids, request=MapRequest(stop=True)),
            model(ids, request=MapRequest(stop=True, keep_hidden=False)),
        )
    assert bare.hidden_states == () and all(torch.equal(a, b) for a, b in zip(kept.attentions, bare.attentions))
    mask, window = decode_masks(model.config, 1, 2, 4, torch.device("cpu"))
    assert mask is not None and mask[0, 0].tolist() == [[True, True, True, False], [True] * 4]


def test_lm_head_read_once_per_model(tmp_path, monkeypatch):
    """The LM head is read from the checkpoint on the first call for a model and kept: later calls read no file."""
    folder = make_family(tmp_path / "llama", "llama")
    model, tokenizer = load_model(folder)
    first = generate(model, tokenizer, PROMPT, max_new_tokens=3)
    head = lm_head(model)

    def unread(*args, **kwargs):
        raise AssertionError("the checkpoint was read again")

    monkeypatch.setattr(importlib.import_module("attention.writing.search"), "read_checkpoint", unread)
    assert torch.equal(generate(model, tokenizer, PROMPT, max_new_tokens=3).ids, first.ids)
    assert lm_head(model) is head


@pytest.mark.parametrize("family", ["gpt2", "mistral"])
def test_attentions_equal_forward_over_ids(built, family):
    _, model, tokenizer = built(family)
    assert_maps_equal_forward(model, tokenizer, 6)


def assert_maps_equal_forward(model, tokenizer, max_new_tokens: int) -> None:
    """generate's maps, kept step by step, are our forward's over the ids it returns up to float rounding, one
    (1, H, T, T) per layer, each row summing to 1 with nothing above the diagonal (no row missing or misplaced)."""
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=max_new_tokens)
    with torch.inference_mode():
        maps = model(ours.ids).attentions
    T = ours.ids.size(1)
    assert len(ours.attentions) == model.config.num_hidden_layers
    atol = rounding_of_maps(model, ours.ids)
    for a, b in zip(ours.attentions, maps):
        assert a.shape == (1, model.config.num_attention_heads, T, T)
        torch.testing.assert_close(a, b, atol=atol, rtol=0)
        assert_causal_rows(a, sinks=model.layers[0].attention.sink is not None)


def rounding_of_maps(model, ids: torch.Tensor) -> float:
    """How far float32 rounding alone may move a causal map of `ids` (1, T) computed in another order.

    generate makes a row as one query against the cached keys, the forward as part of a T-row block: other
    matmul kernels, other orders of each sum (and other again at another thread count). A score s = q·k·scaling
    ends reductions over the hidden width D (projections, norms) and the head width (≤ D here); a float32 sum
    of n terms is exact to n·eps of its terms' magnitude, about the scores' own, so a score may round
    differently by D·eps·max|s|. A probability moves by at most half the largest score change (∂p_j/∂s_i =
    p_j(δ_ij - p_i)), and the softmax's own sum over T keys rounds to T·eps. Hence eps·(D·max|s| + T), max|s|
    the largest scaled score before any cap (Gemma 2's tanh cap only shrinks a change). Measured on the tiny
    checkpoints at 1, 2, 3, 4 and 8 threads: at most 1.01·2⁻²⁴·max|s| (Gemma 2: 1.28e-6 at one and two threads
    with max|s| 26.9, where this allows 1.06e-4); a misplaced row moves a probability by far more."""
    largest = 0.0

    def record(name: str, tensor):
        nonlocal largest
        if name == "scores":  # read at once: the next steps overwrite the buffer in place
            largest = max(largest, float(tensor.abs().max()))
        return tensor

    with torch.inference_mode():
        model(ids, recorders=dict.fromkeys(range(model.config.num_hidden_layers), record))
    assert largest > 0
    return torch.finfo(torch.float32).eps * (model.config.hidden_size * largest + ids.size(1))


def assert_causal_rows(probs: torch.Tensor, sinks: bool = False) -> None:
    """Every query row of a causal map (1, H, T, T) sums to 1 (with `sinks`, gpt-oss's, to less: each row's sink
    share goes to no key), and nothing lies above its diagonal."""
    T = probs.size(-1)
    if sinks:
        assert 0 < probs.sum(-1).min() and probs.sum(-1).max() < 1
    else:
        torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-5, rtol=0)
    assert not probs.masked_select(torch.ones(T, T, dtype=torch.bool).triu(1)).any()


def test_seeded_sampling_repeats_and_keeps_to_top_k(built):
    _, model, tokenizer = built("llama")
    options = dict(max_new_tokens=N_NEW, do_sample=True, temperature=1.5, top_k=3, seed=7)
    first, again = generate(model, tokenizer, PROMPT, **options), generate(model, tokenizer, PROMPT, **options)
    assert torch.equal(first.ids, again.ids)
    other = [generate(model, tokenizer, PROMPT, **{**options, "seed": s}).ids for s in range(5)]
    assert any(not torch.equal(first.ids, o) for o in other)  # the seed matters
    assert first.new_ids.size(1) == first.top_ids.size(0)
    for step, token in enumerate(first.new_ids[0]):
        assert token in first.top_ids[step, :3]  # sampled among the 3 best
    # top_k=3: the probabilities the choice was made from sit on 3 tokens only
    torch.testing.assert_close(first.top_probs[:, :3].sum(-1), torch.ones(first.top_ids.size(0)))
    assert torch.all(first.top_probs[:, 3:] == 0)


@pytest.mark.parametrize("options", [{}, dict(do_sample=True, top_p=0.5, seed=1), dict(temperature=0.5)])
def test_top_probs_sorted_and_at_most_one(built, options):
    _, model, tokenizer = built("qwen2")
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=8, top=7, **options)
    assert ours.top_probs.shape[1] == 7
    assert torch.all(ours.top_probs.sum(-1) <= 1 + 1e-6)
    assert torch.all(ours.top_probs[:, :-1] >= ours.top_probs[:, 1:])
    if "top_p" in options:  # the fewest tokens that reach 0.5, then nothing
        kept = ours.top_probs > 0
        assert torch.all(kept[:, 0])
        reached = (ours.top_probs.cumsum(-1) - ours.top_probs) >= 0.5  # before this token, 0.5 was reached
        assert not torch.any(kept & reached)


def test_lm_head_read_from_checkpoint(built):
    """Llama here saves its own lm_head.weight (untied): the head is that, not the embeddings; GPT-2 ties wte."""
    from safetensors.torch import load_file

    folder, model, _ = built("llama")
    saved = load_file(str(folder / "model.safetensors"))["lm_head.weight"]
    head = load_lm_head(model)
    assert torch.equal(head.weight, saved)
    assert not torch.equal(head.weight, model.embeddings.word_embeddings.weight)
    # its own head is kept by columns (one hidden state's product reads it faster: bench/generate.py); a tied one
    # is the table itself, never a copy
    assert head.weight.stride() == (1, saved.size(0)) and saved.stride() == (saved.size(1), 1)
    hidden = torch.randn(3, saved.size(1))
    assert torch.allclose(head(hidden), hidden @ saved.T, rtol=0, atol=1e-5)
    _, gpt2, _ = built("gpt2")
    table = gpt2.embeddings.word_embeddings.weight.detach().clone()
    tied = load_lm_head(gpt2).weight
    # tied: the head is the word-embedding table itself, laid out by columns in place with the same values
    assert tied is gpt2.embeddings.word_embeddings.weight and tied.stride() == (1, table.size(0))
    assert torch.equal(tied, table) and load_lm_head(gpt2).weight is tied


def test_rotation_is_the_rotate_half_formula_to_the_bit():
    """rotary_angles gives the sines signed (first half negated), and rotate turns x by one roll of its halves:
    x·cos + rotate_half(x)·sin exactly, rotate_half(x1, x2) = (-x2, x1), as transformers' Llama writes it."""
    from attention.core.rotary import rotary_angles, rotate

    inv_freq = 1.0 / 10000 ** (torch.arange(0, 16, 2).float() / 16)
    cos, sin = rotary_angles(torch.arange(5), inv_freq)  # (1, 5, 16) each
    angles = torch.arange(5).float()[:, None] * inv_freq  # (5, 8)
    assert torch.equal(sin[0], torch.cat((-angles.sin(), angles.sin()), dim=-1))
    assert torch.equal(cos[0], torch.cat((angles, angles), dim=-1).cos())
    x = torch.randn(2, 3, 5, 16)
    plain_sin = torch.cat((angles, angles), dim=-1).sin()
    turned = torch.cat((-x[..., 8:], x[..., :8]), dim=-1)
    assert torch.equal(rotate(x, cos, sin), x * cos[:, None] + turned * plain_sin)
    wide = torch.randn(2, 3, 5, 24)  # GPT-NeoX's partial rotary: the last 8 dims pass unchanged
    assert torch.equal(rotate(wide, cos, sin)[..., 16:], wide[..., 16:])
    assert torch.equal(rotate(wide, cos, sin)[..., :16], rotate(wide[..., :16].contiguous(), cos, sin))


def test_options_checked(built):
    _, model, tokenizer = built("gpt2")
    for bad in (dict(max_new_tokens=0), dict(temperature=0), dict(top_k=0), dict(top_p=1.5), dict(top=0)):
        with pytest.raises(ValueError):
            generate(model, tokenizer, PROMPT, **bad)
    with pytest.raises(ValueError, match="positions"):
        generate(model, tokenizer, PROMPT, max_new_tokens=64)


def test_end_of_sequence_stops(tmp_path):
    """An end-of-sequence id of generation_config.json stops the search right after it, as transformers does."""
    folder = make_family(tmp_path / "gpt2", "gpt2")
    model, tokenizer = load_model(folder)
    first = int(generate(model, tokenizer, PROMPT, max_new_tokens=2).new_ids[0, 0])
    path = folder / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "eos_token_id": [0, first]}))
    model, tokenizer = load_model(folder)
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    assert ours.new_ids.tolist() == [[first]] and ours.top_ids.shape == (1, 5)
    assert torch.equal(ours.ids, reference_ids(folder, tokenizer))


def test_a_forced_token_is_written_in_place_of_the_models_and_the_rest_follows_it(built):
    """A branch: the token picked at new token 1, then the model writes on after it as it would after that text."""
    _, model, tokenizer = built("llama")
    options = dict(max_new_tokens=4, keep_maps=False)
    plain = generate(model, tokenizer, PROMPT, **options).ids[0].tolist()
    start = len(plain) - 4
    token = next(t for t in range(5, 50) if t != plain[start + 1])
    branched = generate(model, tokenizer, PROMPT, forced={1: token}, **options).ids[0].tolist()
    assert branched[: start + 1] == plain[: start + 1] and branched[start + 1] == token
    with torch.inference_mode():  # the next token is the model's most probable after the branch
        logits = model(torch.tensor([branched[: start + 2]]), request=MapRequest((), keep_hidden=False))
        expected = int(lm_head(model)(logits.last_hidden_state[0, -1]).argmax())
    assert branched[start + 2] == expected
    with pytest.raises(ValueError, match="not in the model's"):
        generate(model, tokenizer, PROMPT, forced={0: 10**6}, **options)
