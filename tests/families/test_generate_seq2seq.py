"""Generation by an encoder-decoder: greedy ids equal transformers' generate(num_beams=1) token for token on tiny
random BART, mBART, Marian and T5 checkpoints, the generation config's processors followed, every step's logits
through the caches equal a full forward's, seeded sampling repeats itself, and the maps returned are the forward's
over the written sequence."""

import json

import pytest
import torch
import transformers
from families import SEQ2SEQ_CONFIGS, make_seq2seq
from test_generate import assert_causal_rows

from attention import generate, load_model
from attention.core.mha import KeyValueCache
from attention.errors import ModelLoadError
from attention.load.checkpoint import read_checkpoint
from attention.writing.generate_seq2seq import CrossKeys, decode_step, load_seq2seq_head

TEXT = "The animal didn't cross the street because it was too tired"
N_NEW = 12
FAMILIES = ("bart", "mbart", "marian", "t5", "t5-gated")
# transformers' T5 cache holds num_layers layers: a decoder deeper than the encoder breaks its generate
SAME_DEPTH = {"t5": dict(num_decoder_layers=2), "t5-gated": dict(num_decoder_layers=2)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = {}

    def get(family):
        if family not in cache:
            folder = make_seq2seq(tmp_path_factory.mktemp(family), family, seed=2, **SAME_DEPTH.get(family, {}))
            cache[family] = (folder, *load_model(folder))
        return cache[family]

    return get


def reference_ids(folder, family, tokenizer, **options):
    task_class = getattr(transformers, SEQ2SEQ_CONFIGS[family][2])
    ref = task_class.from_pretrained(str(folder), attn_implementation="eager").eval()
    enc = tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        return ref.generate(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            do_sample=False,
            num_beams=1,
            max_new_tokens=N_NEW,
            output_scores=True,
            return_dict_in_generate=True,
            **options,
        )


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_ids_equal_transformers(built, family):
    folder, model, tokenizer = built(family)
    ours = generate(model, tokenizer, TEXT, max_new_tokens=N_NEW)
    theirs = reference_ids(folder, family, tokenizer)
    assert torch.equal(ours.ids, theirs.sequences), (ours.ids, theirs.sequences)
    probs = torch.cat(theirs.scores).softmax(-1).topk(5)  # the processed scores their choice was made from
    torch.testing.assert_close(ours.top_probs, probs.values, rtol=1e-4, atol=1e-5)
    assert int(ours.ids[0, 0]) == model.config.encoder_decoder.decoder_start_token_id
    assert torch.equal(ours.new_ids, ours.ids[:, 1:])
    assert ours.top_ids.shape == ours.top_probs.shape == (ours.new_ids.size(1), 5)
    assert torch.equal(ours.top_ids[:, 0], ours.new_ids[0])
    assert ours.tokens == tokenizer.convert_ids_to_tokens(ours.ids[0].tolist())
    assert torch.equal(ours.encoder_ids, tokenizer(TEXT, return_tensors="pt")["input_ids"])


@pytest.mark.parametrize("family", ("bart", "marian", "t5"))
def test_generation_config_followed(tmp_path, family):
    """Repetition penalty, no-repeat n-grams, bad words (one token and two), minimum length and forced first
    and last tokens of generation_config.json change what greedy search writes, as transformers reads them;
    the config's num_beams is not followed (one beam runs) and is kept in the result."""
    folder = make_seq2seq(tmp_path / family, family, seed=2, **SAME_DEPTH.get(family, {}))
    model, tokenizer = load_model(folder)
    plain = generate(model, tokenizer, TEXT, max_new_tokens=N_NEW)
    first, second = plain.new_ids[0, :2].tolist()
    path = folder / "generation_config.json"
    values = dict(
        repetition_penalty=1.3,
        no_repeat_ngram_size=2,
        bad_words_ids=[[5], [first, second]],
        min_length=N_NEW,
        forced_bos_token_id=first,
        forced_eos_token_id=7,
        num_beams=4,
    )
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))
    model, tokenizer = load_model(folder)
    ours = generate(model, tokenizer, TEXT, max_new_tokens=N_NEW)
    assert torch.equal(ours.ids, reference_ids(folder, family, tokenizer).sequences), ours.ids
    new = ours.new_ids[0].tolist()
    assert new[0] == first and new[1] != second and new[-1] == 7 and 5 not in new
    assert ours.top_probs[0, 0] == 1.0 and ours.top_probs[-1, 0] == 1.0  # forced: nothing else possible
    assert ours.checkpoint_num_beams == 4


@pytest.mark.parametrize("family", FAMILIES)
def test_cache_logits_equal_full_forward(built, family):
    """Each step's logits through the self-attention cache and the cross-attention keys made once equal
    those of a forward over the whole decoder sequence."""
    _, model, tokenizer = built(family)
    head = load_seq2seq_head(model)
    enc = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    ids = torch.tensor([[model.config.encoder_decoder.decoder_start_token_id, 5, 9, 14, 5, 30]])
    with torch.no_grad():
        full = head(model(enc, decoder_input_ids=ids).last_hidden_state)[0]  # (T, V)
        memory = model.encoder(enc).last_hidden_state
        cross = [CrossKeys(layer, memory, None) for layer in model.decoder.layers]
        cache = [KeyValueCache() for _ in model.decoder.layers]
        steps = [
            head(decode_step(model, ids[:, :2], cache, cross).last_hidden_state)[0]
        ]  # two positions at once, then one by one
        steps += [
            head(decode_step(model, ids[:, t : t + 1], cache, cross).last_hidden_state)[0]
            for t in range(2, ids.size(1))
        ]
    torch.testing.assert_close(torch.cat(steps), full, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", ("bart", "t5"))
def test_maps_equal_forward_over_ids(built, family):
    _, model, tokenizer = built(family)
    ours = generate(model, tokenizer, TEXT, max_new_tokens=6)
    with torch.no_grad():
        out = model(ours.encoder_ids, decoder_input_ids=ours.ids)
    for name in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        for got, expected in zip(getattr(ours, name), getattr(out, name), strict=True):
            torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    T, S = ours.ids.size(1), ours.encoder_ids.size(1)
    H = model.decoder.config.num_attention_heads
    assert ours.decoder_attentions[0].shape == (1, H, T, T) and ours.cross_attentions[-1].shape == (1, H, T, S)
    for probs in ours.decoder_attentions:
        assert_causal_rows(probs)  # kept step by step: no row missing or misplaced
    for probs in ours.cross_attentions:
        torch.testing.assert_close(probs.sum(-1), torch.ones(1, H, T), atol=1e-5, rtol=0)
    assert len(ours.encoder_attentions) == model.config.num_hidden_layers


def test_seeded_sampling_repeats(built):
    _, model, tokenizer = built("marian")
    options = dict(max_new_tokens=N_NEW, do_sample=True, temperature=1.5, top_k=20)
    first = generate(model, tokenizer, TEXT, seed=3, **options)
    again = generate(model, tokenizer, TEXT, seed=3, **options)
    other = [generate(model, tokenizer, TEXT, seed=s, **options).ids for s in range(4, 8)]
    assert torch.equal(first.ids, again.ids) and torch.equal(first.top_probs, again.top_probs)
    assert any(not torch.equal(first.ids, ids) for ids in other)
    assert bool((first.top_probs.sum(-1) <= 1 + 1e-5).all())


def test_lm_head_read_strictly(built, tmp_path):
    """BART adds its final_logits_bias; T5 scales tied embeddings by d_model ** -0.5; a BART save without the
    bias (a bare BartModel) is refused."""
    _, bart, _ = built("bart")
    head = load_seq2seq_head(bart)
    assert head.bias is not None and head.bias.shape == (bart.config.vocab_size,) and bool(head.bias.ne(0).any())
    _, t5, _ = built("t5")
    assert load_seq2seq_head(t5).scale == pytest.approx(t5.config.hidden_size**-0.5)
    _, gated, _ = built("t5-gated")  # tie_word_embeddings false: no rescaling
    assert load_seq2seq_head(gated).scale is None
    # BART's tied head is the shared table itself; an untied one is kept by columns (bench/generate.py), same values
    assert head.weight is bart.decoder.embeddings.word_embeddings.weight
    untied, _ = load_model(make_seq2seq(tmp_path / "untied", "bart", tie_word_embeddings=False))
    own = load_seq2seq_head(untied).weight
    saved = read_checkpoint(tmp_path / "untied")[0]["lm_head.weight"]
    assert own.stride() == (1, saved.size(0)) and torch.equal(own, saved)
    assert not torch.equal(own, untied.decoder.embeddings.word_embeddings.weight)
    folder = tmp_path / "bare"
    config = transformers.BartConfig(**SEQ2SEQ_CONFIGS["bart"][1])
    transformers.BartModel(config).save_pretrained(str(folder))
    (folder / "tokenizer.json").write_bytes((built("bart")[0] / "tokenizer.json").read_bytes())
    bare, _ = load_model(folder)
    with pytest.raises(ModelLoadError, match="final_logits_bias"):
        load_seq2seq_head(bare)
