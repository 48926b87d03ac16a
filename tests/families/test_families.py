"""Every family, loaded from a tiny random task checkpoint, gives transformers' numbers; and what
each family declares (positions, token types, fused Q·K·V, causality, heads) holds."""

import json

import pytest
import torch
from families import FAMILIES, make_family, reference
from safetensors.torch import load_file, save_file

from attention import ModelLoadError, encode, load_bert, load_model
from attention.analysis.ablation import ablate
from attention.analysis.gqa import to_grouped
from attention.mlm import MaskedLMHead, load_mlm_head
from attention.runs.run import run_padded_batch, run_sentence
from attention.tracing.trace import head_matrix, trace_layer

HIDDEN_TOL = dict(atol=1e-5, rtol=0)
ATTN_TOL = dict(atol=1e-6, rtol=0)
SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]
TOKEN_TYPES = ("bert", "roberta", "electra")  # the families whose transformers model takes token_type_ids


@pytest.fixture(scope="module", params=FAMILIES)
def loaded(request, tmp_path_factory):
    family = request.param
    folder = make_family(tmp_path_factory.mktemp(family), family)
    model, tokenizer = load_model(folder)
    return family, model, tokenizer, reference(folder)


def max_differences(ours, theirs, family, input_ids, attention_mask=None, token_type_ids=None):
    """Run both; max |Δ| of the hidden states and of the attention maps over the real positions
    (for GPT-2's left padding the real positions are at the end)."""
    kwargs = {"token_type_ids": token_type_ids} if family in TOKEN_TYPES else {}
    with torch.no_grad():
        mine = ours(input_ids, attention_mask, token_type_ids)
        ref = theirs(
            input_ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=True, **kwargs
        )
    n_layers = ours.config.num_hidden_layers
    assert len(mine.hidden_states) == n_layers + 1 == len(ref.hidden_states)
    assert len(mine.attentions) == n_layers == len(ref.attentions)
    assert mine.last_hidden_state.shape == ref.last_hidden_state.shape
    real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    hidden = attention = 0.0
    for b in range(input_ids.shape[0]):
        keep = real[b]
        for a, r in zip(mine.hidden_states, ref.hidden_states):
            hidden = max(hidden, (a[b, keep] - r[b, keep]).abs().max().item())
        for a, r in zip(mine.attentions, ref.attentions):
            attention = max(attention, (a[b][:, keep][:, :, keep] - r[b][:, keep][:, :, keep]).abs().max().item())
            assert torch.all(a[b][:, keep][:, :, ~keep] == 0)  # padding keys get no attention at all
    torch.testing.assert_close(mine.last_hidden_state, mine.hidden_states[-1], atol=0, rtol=0)
    return hidden, attention


def test_single_sentences_match_transformers(loaded):
    family, ours, tokenizer, theirs = loaded
    for text in SENTENCES:
        enc = encode(tokenizer, text)
        hidden, attention = max_differences(ours, theirs, family, enc.input_ids, enc.attention_mask, enc.token_type_ids)
        assert hidden <= 1e-5 and attention <= 1e-6, (family, hidden, attention)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_batches_match_transformers(loaded, side):
    family, ours, tokenizer, theirs = loaded
    tokenizer.padding_side = side
    try:
        batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    finally:
        tokenizer.padding_side = "right"
    assert batch["attention_mask"].sum(1).tolist()[0] != batch["attention_mask"].sum(1).tolist()[1]
    hidden, attention = max_differences(
        ours, theirs, family, batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")
    )
    assert hidden <= 1e-5 and attention <= 1e-6, (family, side, hidden, attention)


def test_sentence_pairs_match_transformers(loaded):
    family, ours, tokenizer, theirs = loaded
    enc = encode(tokenizer, SENTENCES[0], SENTENCES[1])
    hidden, attention = max_differences(ours, theirs, family, enc.input_ids, enc.attention_mask, enc.token_type_ids)
    assert hidden <= 1e-5 and attention <= 1e-6


def test_task_head_tensors_are_listed_as_ignored(loaded):
    family, model, _, _ = loaded
    heads = {
        "bert": "cls.predictions.",
        "roberta": "lm_head.",
        "distilbert": "vocab_",
        "electra": "discriminator_predictions.",
        "gpt2": None,
    }[family]
    ignored = model.load_report.ignored_keys
    if heads is None:  # GPT2LMHeadModel's lm_head is tied to wte: save_pretrained leaves it out
        assert ignored == ()
    else:
        assert ignored and all(k.startswith(heads) for k in ignored)
    c = model.config
    assert (c.num_hidden_layers, c.num_attention_heads, c.hidden_size, c.model_type) == (2, 4, 32, family)
    assert c.max_position_embeddings == 64
    assert all(hasattr(layer.attention, "scaling") for layer in model.layers)


def test_gpt2_is_causal_and_fused(loaded):
    family, model, tokenizer, _ = loaded
    enc = encode(tokenizer, SENTENCES[0])
    with torch.no_grad():
        out = model(enc.input_ids, enc.attention_mask, enc.token_type_ids)
    upper = [bool(torch.all(a[0].triu(diagonal=1) == 0)) for a in out.attentions]
    assert all(upper) == (family == "gpt2")
    assert model.layers[0].attention.fused_qkv == (family == "gpt2")
    if family == "gpt2":
        assert not any(enc.special) and not enc.token_type_ids.any()  # no [CLS]/[SEP], no token types
    else:
        assert enc.special[0] and enc.special[-1]


def test_trace_ablation_gqa_and_runs_work_for_every_family(loaded):
    family, model, tokenizer, _ = loaded
    enc = encode(tokenizer, SENTENCES[0])
    trace = trace_layer(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, layer=1)
    L, H, d = enc.input_ids.shape[1], 4, 8
    assert trace.step("q_proj").shape == (1, L, H * d) and trace.step("probs").shape == (1, H, L, L)
    if family == "gpt2":
        assert trace.names[:6] == ["block_input", "input", "qkv_proj", "q_proj", "k_proj", "v_proj"]
        assert trace.step("qkv_proj").dims == ("B", "L", "3·H·d")
        assert "columns 32:64" in trace.step("k_proj").op
        matrix, rows, cols = head_matrix(trace, "qkv_proj", head=2)
        fused = trace.step("qkv_proj").tensor[0]
        assert (rows, cols) == ("L", "3·d")
        torch.testing.assert_close(
            torch.from_numpy(matrix), torch.cat([fused[:, 16:24], fused[:, 48:56], fused[:, 80:88]], dim=1)
        )
    result = ablate(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, head_mask=[[1, 0, 1, 1], [1] * 4])
    assert result.attention_change[0, 1] > 0 and result.attention_change[0, 0] == 0
    same, shared = to_grouped(model, 4), to_grouped(model, 1)
    with torch.no_grad():
        base = model(enc.input_ids, enc.attention_mask, enc.token_type_ids)
        again = same(enc.input_ids, enc.attention_mask, enc.token_type_ids)
        grouped = shared(enc.input_ids, enc.attention_mask, enc.token_type_ids)
    torch.testing.assert_close(again.attentions[1], base.attentions[1], atol=1e-6, rtol=0)
    assert shared.layers[0].attention.num_kv_heads == 1 and grouped.attentions[0].shape == base.attentions[0].shape
    run = run_sentence(model, tokenizer, SENTENCES[0], SENTENCES[1] if family != "gpt2" else None)
    assert run.attentions.shape[:2] == (2, 4)
    batch = run_padded_batch(model, tokenizer, SENTENCES)
    assert batch.attentions.shape[1] == 2 and batch.mask.sum(1).tolist()[0] > batch.mask.sum(1).tolist()[1]


def test_roberta_positions_skip_padding(tmp_path):
    """A RoBERTa token's position counts only real tokens: padding in the middle changes nothing."""
    model, tokenizer = load_model(make_family(tmp_path / "roberta", "roberta"))
    ids = tokenizer(SENTENCES[1], return_tensors="pt")["input_ids"]  # (1, L)
    pad = tokenizer.pad_token_id
    padded = torch.cat([ids[:, :3], torch.full((1, 2), pad), ids[:, 3:]], dim=1)  # (1, L + 2)
    mask = (padded != pad).long()
    with torch.no_grad():
        plain = model(ids).last_hidden_state[0]
        with_gap = model(padded, mask).last_hidden_state[0, mask[0].bool()]
    torch.testing.assert_close(with_gap, plain, **HIDDEN_TOL)
    assert model.config.positions.position_offset == 2 and model.embeddings.position_embeddings.num_embeddings == 66


@pytest.mark.parametrize("family", ["gpt2", "distilbert"])
def test_pytorch_bin_checkpoints(tmp_path, family):
    from_bin, _ = load_model(make_family(tmp_path / "bin", family, safe=False))
    from_safetensors, _ = load_model(make_family(tmp_path / "safe", family))  # same seed, same weights
    assert from_bin.load_report.weights_file == "pytorch_model.bin"
    for key, value in from_safetensors.state_dict().items():
        assert torch.equal(from_bin.state_dict()[key], value), key
    if family == "gpt2":  # torch.save keeps the tied lm_head: a head, listed
        assert from_bin.load_report.ignored_keys == ("lm_head.weight",)


def test_gpt2_word_embeddings_left_out_for_the_tied_lm_head(tmp_path):
    folder = make_family(tmp_path / "tied", "gpt2")
    weights = load_file(str(folder / "model.safetensors"))
    weights["lm_head.weight"] = weights.pop("transformer.wte.weight")
    save_file(weights, str(folder / "model.safetensors"))
    model, _ = load_model(folder)
    assert torch.equal(model.embeddings.word_embeddings.weight, weights["lm_head.weight"])


def test_gpt2_base_model_and_old_buffers(tmp_path):
    """GPT2Model saves without the "transformer." prefix; older files carry attn.bias/masked_bias."""
    folder = make_family(tmp_path / "base", "gpt2", model_class="GPT2Model")
    weights = load_file(str(folder / "model.safetensors"))
    weights["h.0.attn.bias"] = torch.ones(1, 1, 64, 64).tril()
    weights["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(weights, str(folder / "model.safetensors"))
    model, _ = load_model(folder)
    assert set(model.load_report.ignored_keys) == {"h.0.attn.bias", "h.0.attn.masked_bias"}
    conv = weights["h.1.mlp.c_fc.weight"]  # Conv1D: (in, out)
    assert torch.equal(model.layers[1].intermediate.weight, conv.t())


@pytest.mark.parametrize(
    "family, name",
    [
        ("gpt2", "transformer.h.0.attn.c_attn.rotary"),
        ("distilbert", "distilbert.transformer.layer.0.attention.extra.weight"),
        ("roberta", "surprise.weight"),
    ],
)
def test_an_unknown_tensor_is_an_error(tmp_path, family, name):
    folder = make_family(tmp_path / family, family)
    weights = load_file(str(folder / "model.safetensors"))
    weights[name] = torch.zeros(3)
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(ModelLoadError, match=name.replace(".", r"\.")):
        load_model(folder)


def test_unknown_model_type_names_the_supported_ones(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlnet"}))
    with pytest.raises(
        ModelLoadError,
        match="'xlnet' models are not supported: model_type must be one of bert, roberta, distilbert, electra, gpt2",
    ):
        load_model(tmp_path)


def test_load_bert_still_refuses_other_families(tmp_path):
    with pytest.raises(ModelLoadError, match="'gpt2' model, not BERT"):
        load_bert(make_family(tmp_path / "gpt2", "gpt2"))


def test_default_is_the_bundled_minilm():
    model, _ = load_model()
    assert model.config.model_type == "bert" and model.config.num_hidden_layers == 6


@pytest.mark.parametrize(
    "family, model_class",
    [("roberta", "RobertaForMaskedLM"), ("distilbert", "DistilBertForMaskedLM"), ("electra", "ElectraForMaskedLM")],
)
def test_masked_lm_heads_match_transformers(tmp_path, family, model_class):
    import transformers

    folder = make_family(tmp_path / family, family, model_class=model_class)
    model, tokenizer = load_model(folder)
    head = load_mlm_head(model)
    assert isinstance(head, MaskedLMHead)
    theirs = getattr(transformers, model_class).from_pretrained(str(folder), attn_implementation="eager").eval()
    enc = encode(tokenizer, SENTENCES[1])
    with torch.no_grad():
        expected = theirs(enc.input_ids, attention_mask=enc.attention_mask).logits[0]
        ours = head(model(enc.input_ids, enc.attention_mask, enc.token_type_ids).last_hidden_state[0])
    torch.testing.assert_close(ours, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("family", ["gpt2", "electra"])
def test_families_without_a_masked_lm_head_give_none(tmp_path, family):
    model, _ = load_model(make_family(tmp_path / family, family))  # GPT2LMHeadModel, ElectraForPreTraining
    assert load_mlm_head(model) is None


@pytest.mark.parametrize(
    "family, change, message",
    [
        ("roberta", {"pad_token_id": None}, "pad_token_id should be an int"),
        ("gpt2", {"n_embd": "wide"}, "hidden_size should be an int"),
        ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx=True is not supported"),
        ("distilbert", {"n_heads": 5}, "not divisible"),
    ],
)
def test_a_bad_config_is_one_clear_error(tmp_path, family, change, message):
    folder = make_family(tmp_path / family, family)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ModelLoadError, match=message):
        load_model(folder)
