"""Encoder-decoders (BART, mBART, Marian, T5 v1.0 and v1.1), loaded from tiny random task checkpoints
through our own attention, give transformers' base models' numbers (BartModel, MarianModel, T5Model ...,
eager): every hidden state and every map, self- and cross-attention, single and padded; and what each
family declares (positions, buckets, scaling, shared embeddings, the decoder's start) holds."""

import pytest
import torch
from families import SEQ2SEQ, make_seq2seq, reference
from safetensors.torch import load_file, save_file

from attention import EncoderDecoder, ModelLoadError, load_model
from attention.models.positions import relative_buckets, sinusoids

HIDDEN_TOL, MAP_TOL = 1e-5, 1e-6
TEXTS = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]
TARGETS = ["She read the book and he ran.", "The trophy doesn't fit."]
MAPS = ("encoder_attentions", "decoder_attentions", "cross_attentions")


@pytest.fixture(scope="module", params=SEQ2SEQ)
def loaded(request, tmp_path_factory):
    name = request.param
    folder = make_seq2seq(tmp_path_factory.mktemp(name), name)
    model, tokenizer = load_model(folder)
    return name, model, tokenizer, reference(folder)


def decoder_batch(model, tokenizer, targets):
    """The targets' ids after the decoder's start token, right-padded, with their mask."""
    batch = tokenizer(targets, padding=True, return_tensors="pt")
    start = torch.full((len(targets), 1), model.config.encoder_decoder.decoder_start_token_id)
    return torch.cat([start, batch["input_ids"]], 1), torch.cat([torch.ones_like(start), batch["attention_mask"]], 1)


def max_differences(ours, theirs, input_ids, attention_mask, decoder_input_ids, decoder_attention_mask):
    """Run both; max |Δ| over the real positions of every hidden state, and of every map (whose padding
    keys must get no attention at all)."""
    with torch.no_grad():
        mine = ours(
            input_ids,
            attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
        )
        ref = theirs(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            output_attentions=True,
            output_hidden_states=True,
        )
    enc = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    dec = (
        torch.ones_like(decoder_input_ids, dtype=torch.bool)
        if decoder_attention_mask is None
        else decoder_attention_mask.bool()
    )
    rows = {
        "encoder_hidden_states": enc,
        "decoder_hidden_states": dec,
        "encoder_attentions": (enc, enc),
        "decoder_attentions": (dec, dec),
        "cross_attentions": (dec, enc),
    }
    hidden = maps = 0.0
    for field, real in rows.items():
        a, r = getattr(mine, field), getattr(ref, field)
        assert len(a) == len(r), field
        for b in range(input_ids.size(0)):
            for x, y in zip(a, r):
                if field in MAPS:
                    queries, keys = real[0][b], real[1][b]
                    assert torch.all(x[b][:, queries][:, :, ~keys] == 0), field  # padding keys: no attention
                    maps = max(maps, (x[b][:, queries][:, :, keys] - y[b][:, queries][:, :, keys]).abs().max().item())
                else:
                    hidden = max(hidden, (x[b, real[b]] - y[b, real[b]]).abs().max().item())
    torch.testing.assert_close(mine.last_hidden_state, mine.decoder_hidden_states[-1], atol=0, rtol=0)
    torch.testing.assert_close(mine.encoder_last_hidden_state, mine.encoder_hidden_states[-1], atol=0, rtol=0)
    return hidden, maps


def single_case(model, tokenizer):
    enc = tokenizer(TEXTS[:1], return_tensors="pt")
    dec, _ = decoder_batch(model, tokenizer, TARGETS[:1])
    return enc["input_ids"], None, dec, None


def padded_case(model, tokenizer):
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    dec, dec_mask = decoder_batch(model, tokenizer, TARGETS)
    assert not enc["attention_mask"].all() and not dec_mask.all()  # padding in both inputs
    return enc["input_ids"], enc["attention_mask"], dec, dec_mask


@pytest.mark.parametrize("case", [single_case, padded_case], ids=["single", "padded"])
def test_matches_transformers_base_model(loaded, case):
    name, model, tokenizer, reference_model = loaded
    assert isinstance(model, EncoderDecoder)
    hidden, maps = max_differences(model, reference_model, *case(model, tokenizer))
    print(f"\n{name:10} {case.__name__.split('_')[0]:7} max |Δ| hidden {hidden:.1e}  maps {maps:.1e}")
    assert hidden <= HIDDEN_TOL and maps <= MAP_TOL, (name, hidden, maps)


def test_output_fields_and_shapes(loaded):
    name, model, tokenizer, _ = loaded
    input_ids, attention_mask, decoder_input_ids, decoder_attention_mask = padded_case(model, tokenizer)
    with torch.no_grad():
        out = model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
        )
    (B, S), L = input_ids.shape, decoder_input_ids.size(1)
    config, H = model.config, model.config.decoder_config().num_attention_heads
    assert out.last_hidden_state.shape == (B, L, config.hidden_size)
    assert out.encoder_last_hidden_state.shape == (B, S, config.hidden_size)
    assert len(out.encoder_hidden_states) == config.num_hidden_layers + 1
    n_decoder = config.decoder_config().num_hidden_layers
    assert len(out.decoder_hidden_states) == n_decoder + 1 and len(out.cross_attentions) == n_decoder
    assert all(p.shape == (B, config.num_attention_heads, S, S) for p in out.encoder_attentions)
    assert all(p.shape == (B, H, L, L) for p in out.decoder_attentions)
    assert all(p.shape == (B, H, L, S) for p in out.cross_attentions)
    assert all(torch.all(p.triu(1) == 0) for p in out.decoder_attentions)  # causal: no later token seen


def test_decoder_start_and_a_missing_decoder_input(loaded):
    name, model, _, reference_model = loaded
    assert model.config.encoder_decoder.decoder_start_token_id == reference_model.config.decoder_start_token_id
    with pytest.raises(ValueError, match="decoder_input_ids"):
        model(torch.tensor([[0, 5, 2]]))


# ---- loading: strict, shared embeddings, task heads listed ----


def test_shared_embeddings_are_one_tensor_and_heads_are_listed(tmp_path):
    model, _ = load_model(make_seq2seq(tmp_path / "bart", "bart"))
    words = model.encoder.embeddings.word_embeddings.weight
    assert words.data_ptr() == model.decoder.embeddings.word_embeddings.weight.data_ptr()
    assert model.load_report.ignored_keys == ("final_logits_bias",)
    assert model.load_report.weight_names["decoder.embeddings.word_embeddings.weight"] == "model.shared.weight"


@pytest.mark.parametrize(
    "name, extra",
    [
        ("bart", "model.encoder.embed_tokens.weight"),
        ("marian", "model.decoder.embed_positions.weight"),
        ("t5", "lm_head.weight"),
        ("t5", "decoder.embed_tokens.weight"),
    ],
)
def test_copies_and_heads_older_saves_hold_are_listed(tmp_path, name, extra):
    folder = make_seq2seq(tmp_path / name, name)
    weights = load_file(str(folder / "model.safetensors"))
    weights[extra] = torch.zeros(3)
    save_file(weights, str(folder / "model.safetensors"))
    model, _ = load_model(folder)
    assert extra in model.load_report.ignored_keys


@pytest.mark.parametrize(
    "name, extra, named",
    [
        ("bart", "model.decoder.layers.0.encoder_attn.surprise.weight", None),
        ("t5", "encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight", None),  # only the first layer's
        ("marian", "model.encoder.layernorm_embedding.weight", "encoder.embeddings.LayerNorm.weight"),
    ],
)  # has no norm
def test_an_unknown_tensor_is_an_error(tmp_path, name, extra, named):
    folder = make_seq2seq(tmp_path / name, name)
    weights = load_file(str(folder / "model.safetensors"))
    weights[extra] = torch.zeros(32)
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=(named or extra).replace(".", r"\.")):
        load_model(folder)


@pytest.mark.parametrize(
    "name, key",
    [
        ("bart", "model.decoder.layers.2.encoder_attn.k_proj.weight"),
        ("t5", "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
    ],
)
def test_a_missing_or_misshaped_tensor_is_an_error_before_building(tmp_path, name, key):
    folder = make_seq2seq(tmp_path / name, name)
    weights = load_file(str(folder / "model.safetensors"))
    weights[key] = weights[key][:-1]
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="has shape"):
        load_model(folder)
    del weights[key]
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="has no tensor"):
        load_model(folder)


# ---- what the families declare ----


def test_declared_differences(tmp_path):
    configs = {name: load_model(make_seq2seq(tmp_path / name, name))[0].config for name in SEQ2SEQ}
    assert (
        configs["bart"].positions.position_offset == 2
        and configs["bart"].norms.embedding_norm
        and not configs["bart"].norms.pre_norm
    )
    assert configs["mbart"].norms.pre_norm and configs["mbart"].norms.final_norm
    assert (
        configs["marian"].positions.position_embedding_type == "sinusoidal"
        and configs["marian"].embeddings.scale_embedding
    )
    assert not configs["marian"].norms.embedding_norm
    t5 = configs["t5"]
    assert (
        t5.positions.position_embedding_type,
        t5.norms.norm,
        t5.attention.scale_scores,
        t5.feed_forward.hidden_act,
        t5.feed_forward.gated_mlp,
    ) == (
        "relative",
        "rms_norm",
        False,
        "relu",
        False,
    )
    assert (
        configs["t5-gated"].feed_forward.hidden_act,
        configs["t5-gated"].feed_forward.gated_mlp,
        configs["t5-gated"].head_size,
    ) == (
        "gelu_new",
        True,
        12,
    )
    decoder = configs["bart"].decoder_config()
    assert (decoder.num_hidden_layers, decoder.num_attention_heads, decoder.intermediate_size) == (3, 2, 41)
    assert decoder.attention.causal and decoder.encoder_decoder.cross_attention


def test_t5_scores_are_unscaled_and_its_bias_sits_once_per_stack(tmp_path):
    model, _ = load_model(make_seq2seq(tmp_path / "t5", "t5"))
    assert all(layer.attention.scaling == 1.0 for layer in [*model.encoder.layers, *model.decoder.layers])
    assert all(layer.cross_attention.scaling == 1.0 for layer in model.decoder.layers)
    names = [n for n, _ in model.named_parameters() if "relative_attention_bias" in n]
    assert names == ["encoder.relative_attention_bias.weight", "decoder.relative_attention_bias.weight"]


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 12)])
def test_relative_buckets_match_transformers(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    L = 150
    distance = torch.arange(L)[None, :] - torch.arange(L)[:, None]  # key - query
    theirs = T5Attention._relative_position_bucket(distance, bidirectional, num_buckets, max_distance)
    torch.testing.assert_close(relative_buckets(L, L, bidirectional, num_buckets, max_distance), theirs)
    if not bidirectional:
        assert torch.all(relative_buckets(L, L, False, num_buckets, max_distance).triu(1) == 0)  # later keys: 0


@pytest.mark.parametrize("width", [32, 33])
def test_sinusoids_match_marians_table(width):
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    weight = MarianSinusoidalPositionalEmbedding(64, width).create_weight()  # (64, width)
    torch.testing.assert_close(sinusoids(torch.arange(64), width), weight, atol=0, rtol=0)
