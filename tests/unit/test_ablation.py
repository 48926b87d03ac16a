"""Head ablation: the head mask in the forward pass, the MLM head, and `ablate`'s measures."""

import numpy as np
import pytest
import torch
from conftest import TINY, make_tiny
from safetensors.torch import load_file, save_file

from attention import ModelLoadError, encode, load_bert, scaled_dot_product_attention
from attention.analysis.ablation import AblationResult, MaskPredictions, ablate
from attention.mlm import MaskedLMHead, load_mlm_head, predict_masked

SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]
HIDDEN_TOL = dict(atol=1e-5, rtol=0)
ATTN_TOL = dict(atol=1e-6, rtol=0)


def padded(tokenizer, texts=SENTENCES):
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    assert not bool(batch["attention_mask"].all())  # the second sentence is padded
    return batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]


def assert_same_outputs(a, b):
    assert len(a.hidden_states) == len(b.hidden_states) and len(a.attentions) == len(b.attentions)
    for x, y in zip(a.hidden_states + a.attentions, b.hidden_states + b.attentions):
        assert torch.equal(x, y)


# ---- the head mask in the forward pass -------------------------------------------------------


@pytest.mark.parametrize("ablation", ["zero", "uniform"])
def test_a_mask_of_ones_changes_nothing_bit_for_bit(minilm, ablation):
    model, tokenizer = minilm
    ids, mask, types = padded(tokenizer)
    shape = (model.config.num_hidden_layers, model.config.num_attention_heads)
    with torch.inference_mode():
        base = model(ids, mask, types)
        for head_mask in (torch.ones(shape), torch.ones(shape, dtype=torch.bool), np.ones(shape).tolist()):
            assert_same_outputs(model(ids, mask, types, head_mask=head_mask, ablation=ablation), base)
        enc = encode(tokenizer, SENTENCES[0])  # one sentence: no padding mask at all
        assert_same_outputs(model(enc.input_ids, head_mask=np.ones(shape), ablation=ablation), model(enc.input_ids))


def test_zero_ablation_of_a_whole_layer_leaves_the_residual_path(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, SENTENCES[0])
    i = 2
    head_mask = torch.ones(model.config.num_hidden_layers, model.config.num_attention_heads)
    head_mask[i] = 0
    with torch.inference_mode():
        out = model(enc.input_ids, head_mask=head_mask)
        layer = model.layers[i]
        x = out.hidden_states[i]  # (1, L, D) entering layer i, untouched by the ablation
        h = layer.attention_norm(x + layer.attention.o_proj.bias)  # the attention block adds only o_proj's bias
        expected = layer.output_norm(h + layer.output(layer.act(layer.intermediate(h))))
        base = model(enc.input_ids)
    assert torch.all(out.attentions[i] == 0)
    torch.testing.assert_close(out.hidden_states[i + 1], expected, atol=1e-6, rtol=0)
    assert not torch.allclose(base.hidden_states[i + 1], expected, atol=1e-3)  # the heads did matter


def test_zero_ablation_silences_only_the_masked_heads(minilm):
    model, tokenizer = minilm
    ids, mask, types = padded(tokenizer)
    head_mask = torch.ones(model.config.num_hidden_layers, model.config.num_attention_heads, dtype=torch.bool)
    head_mask[0, [1, 7]] = False
    head_mask[4, 3] = False
    with torch.inference_mode():
        base = model(ids, mask, types)
        out = model(ids, mask, types, head_mask=head_mask, ablation="zero")
    assert torch.all(out.attentions[0][:, [1, 7]] == 0) and torch.all(out.attentions[4][:, 3] == 0)
    kept = [h for h in range(model.config.num_attention_heads) if h not in (1, 7)]
    assert torch.equal(out.attentions[0][:, kept], base.attentions[0][:, kept])  # same input, same maps
    assert torch.equal(out.hidden_states[0], base.hidden_states[0])
    assert not torch.allclose(out.hidden_states[1], base.hidden_states[1])


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_uniform_ablation_spreads_over_the_keys_a_token_may_see(minilm, causal):
    model, tokenizer = minilm
    ids, mask, types = padded(tokenizer)
    head_mask = torch.ones(model.config.num_hidden_layers, model.config.num_attention_heads)
    head_mask[1, 5] = 0
    with torch.inference_mode():
        out = model(ids, mask, types, causal=causal, head_mask=head_mask, ablation="uniform")
    S = ids.shape[1]
    allowed = mask.bool()[:, None, :].expand(-1, S, S)  # (B, L, S): keys that are real tokens
    if causal:
        allowed = allowed & torch.ones(S, S, dtype=torch.bool).tril()
    expected = allowed / allowed.sum(-1, keepdim=True)  # (B, L, S)
    torch.testing.assert_close(out.attentions[1][:, 5], expected, atol=1e-7, rtol=0)
    assert torch.all(out.attentions[1][1, 5][:, ~mask[1].bool()] == 0)  # padding keys get nothing
    probs = out.attentions[1][:, [h for h in range(12) if h != 5]]
    assert not torch.allclose(probs, expected[:, None].expand_as(probs))  # kept heads are not uniform


@pytest.mark.parametrize("ablation", ["zero", "uniform"])
def test_ablation_works_in_place_and_with_gradients(ablation):
    """Without gradients the softmax and ablation reuse the scores buffer; with them, they must not."""
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    keep = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]).bool()[:, None, None, :]  # (B, 1, 1, S)
    head_mask = torch.tensor([1.0, 0.0, 1.0])
    with torch.no_grad():
        out, probs = scaled_dot_product_attention(q, k, v, keep, head_mask=head_mask, ablation=ablation)
    q.requires_grad_(True)
    out_grad, probs_grad = scaled_dot_product_attention(q, k, v, keep, head_mask=head_mask, ablation=ablation)
    torch.testing.assert_close(probs_grad, probs, atol=0, rtol=0)
    torch.testing.assert_close(out_grad, out, atol=0, rtol=0)
    out_grad.sum().backward()
    assert q.grad is not None and torch.all(q.grad[:, 1] == 0)  # the ablated head ignores its queries
    expected = torch.tensor([0.25, 0.25, 0.25, 0.25, 0.0]) if ablation == "uniform" else torch.zeros(5)
    assert torch.equal(probs[0, 1], expected.expand(5, 5))


def test_uniform_ablation_leaves_rows_without_keys_at_zero():
    q, k, v = (torch.randn(1, 2, 3, 4) for _ in range(3))
    keep = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])  # (L, S)
    additive = torch.zeros(3, 3).masked_fill(~keep, float("-inf"))
    for mask in (keep, additive):
        _, probs = scaled_dot_product_attention(q, k, v, mask, head_mask=torch.tensor([0.0, 1.0]), ablation="uniform")
        expected = torch.tensor([[0.5, 0.0, 0.5], [0.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])
        torch.testing.assert_close(probs[0, 0], expected, atol=1e-7, rtol=0)
        assert torch.all(probs[0, 1, 1] == 0) and not torch.isnan(probs).any()


def test_invalid_head_masks_and_ablations_are_clear_errors(minilm):
    model, tokenizer = minilm
    ids = encode(tokenizer, SENTENCES[1]).input_ids
    with pytest.raises(ValueError, match=r"\(n_layers, n_heads\) = \(6, 12\), got \(12, 6\)"):
        model(ids, head_mask=torch.ones(12, 6))
    with pytest.raises(ValueError, match=r"got \(12,\)"):
        model(ids, head_mask=[1.0] * 12)
    with pytest.raises(ValueError, match="from 0"):
        model(ids, head_mask=torch.full((6, 12), 2.0))
    with pytest.raises(ValueError, match="'zero', 'uniform'.*'mean'"):
        model(ids, ablation="mean")
    with pytest.raises(ValueError, match="'zero', 'uniform'"):
        model(ids, head_mask=torch.ones(6, 12), ablation="Zero")
    with pytest.raises(ValueError, match=r"\(num_heads,\) = \(3,\)"):
        scaled_dot_product_attention(*(torch.randn(1, 3, 2, 4) for _ in range(3)), head_mask=torch.ones(4))


def _eager_with_head_mask(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, reference_head_mask=None, **kwargs
):
    """transformers 5's eager attention plus the head mask transformers 4 applied after the softmax."""
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = torch.softmax(weights, dim=-1)
    if reference_head_mask is not None:
        weights = weights * reference_head_mask[module.layer_idx][None, :, None, None]  # (1, H, 1, 1)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def reference_with_head_mask(model_class: str, folder):
    """transformers' model whose attention takes a `reference_head_mask` keyword.

    transformers 5 removed the `head_mask` argument of BertModel, so the reference is its eager
    attention with transformers 4's rule put back: probabilities times the mask, after the softmax.
    """
    import transformers
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register("eager_head_mask", _eager_with_head_mask)
    AttentionMaskInterface.register("eager_head_mask", eager_mask)  # additive masks, as for "eager"
    return getattr(transformers, model_class).from_pretrained(str(folder), attn_implementation="eager_head_mask").eval()


def test_zero_ablation_matches_transformers_head_mask_rule(tiny_dir):
    model, tokenizer = load_bert(tiny_dir)
    reference = reference_with_head_mask("BertModel", tiny_dir)
    ids, mask, types = padded(tokenizer, ["the cat sat on the mat", "the dog ran"])
    head_mask = torch.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    with torch.no_grad():
        ours = model(ids, mask, types, head_mask=head_mask)
        theirs = reference(
            ids,
            attention_mask=mask,
            token_type_ids=types,
            output_attentions=True,
            output_hidden_states=True,
            reference_head_mask=head_mask,
        )
        unmasked = reference(ids, attention_mask=mask, token_type_ids=types)
    assert not torch.allclose(theirs.last_hidden_state, unmasked.last_hidden_state)  # the mask reached it
    for b, n in enumerate(mask.sum(-1).tolist()):
        for a, r in zip(ours.hidden_states, theirs.hidden_states):
            torch.testing.assert_close(a[b, :n], r[b, :n], **HIDDEN_TOL)
        for a, r in zip(ours.attentions, theirs.attentions):
            torch.testing.assert_close(a[b, :, :n, :n], r[b, :, :n, :n], **ATTN_TOL)


# ---- the MLM head ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory):
    return make_tiny(tmp_path_factory.mktemp("mlm"), model_class="BertForMaskedLM")


def masked_sentence(tokenizer, text="the cat [MASK] on the mat"):
    enc = tokenizer(text, return_tensors="pt")
    position = enc["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    return enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], position


@pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "bin"])
def test_predict_masked_matches_transformers_masked_lm(tmp_path, safe):
    import transformers

    folder = make_tiny(tmp_path / "mlm", model_class="BertForMaskedLM", safe=safe)
    model, tokenizer = load_bert(folder)
    head = load_mlm_head(model)
    assert isinstance(head, MaskedLMHead)
    assert head.decoder.weight is model.embeddings.word_embeddings.weight  # tied, not copied
    ids, mask, types, position = masked_sentence(tokenizer)
    guesses = predict_masked(model, head, ids, mask, types, position, top_k=TINY["vocab_size"])
    reference = transformers.BertForMaskedLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    with torch.no_grad():
        expected = reference(ids, attention_mask=mask, token_type_ids=types).logits[0, position].softmax(-1)
    token_ids = [i for i, _ in guesses]
    assert sorted(token_ids) == list(range(TINY["vocab_size"]))
    torch.testing.assert_close(torch.tensor([p for _, p in guesses]), expected[token_ids], atol=1e-5, rtol=0)
    assert all(a >= b for (_, a), (_, b) in zip(guesses, guesses[1:]))  # most probable first
    assert predict_masked(model, head, ids, mask, types, position)[0][0] == int(expected.argmax())


def test_predict_masked_with_ablated_heads_matches_transformers(tiny_mlm_dir):
    model, tokenizer = load_bert(tiny_mlm_dir)
    head = load_mlm_head(model)
    reference = reference_with_head_mask("BertForMaskedLM", tiny_mlm_dir)
    ids, mask, types, position = masked_sentence(tokenizer)
    head_mask = torch.tensor([[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]])
    guesses = dict(
        predict_masked(model, head, ids, mask, types, position, top_k=TINY["vocab_size"], head_mask=head_mask)
    )
    plain = dict(predict_masked(model, head, ids, mask, types, position, top_k=TINY["vocab_size"]))
    with torch.no_grad():
        expected = (
            reference(ids, attention_mask=mask, token_type_ids=types, reference_head_mask=head_mask)
            .logits[0, position]
            .softmax(-1)
        )
    ours = torch.tensor([guesses[i] for i in range(TINY["vocab_size"])])
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
    assert not torch.allclose(ours, torch.tensor([plain[i] for i in range(TINY["vocab_size"])]), atol=1e-4)


def test_the_mlm_head_reads_only_its_own_tensors_and_allocates_no_decoder(tiny_mlm_dir, monkeypatch):
    """The head's few tensors are read from the checkpoint, not the model's weights again; its decoder weight
    is the embeddings' from the start (a vocabulary-sized matrix made and thrown away would cost V x E)."""
    from attention.load.checkpoint import SafetensorsWeights

    model, _ = load_bert(tiny_mlm_dir)
    read, get = [], SafetensorsWeights.__getitem__
    monkeypatch.setattr(SafetensorsWeights, "__getitem__", lambda self, name: read.append(name) or get(self, name))
    head = load_mlm_head(model)
    assert read and all(name.startswith("cls.predictions.") for name in read), read
    assert head.decoder.weight is model.embeddings.word_embeddings.weight
    assert MaskedLMHead(model.config).decoder.weight.is_meta


def test_the_bundled_minilm_has_no_mlm_head(minilm):
    model, _ = minilm
    assert load_mlm_head(model) is None


def mlm_with_edited_weights(folder, edit):
    """A tiny BertForMaskedLM checkpoint whose safetensors file `edit` (of the tensor dict) has changed."""
    make_tiny(folder, model_class="BertForMaskedLM")
    weights = load_file(str(folder / "model.safetensors"))
    edit(weights)
    save_file(weights, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda w: w.update({"cls.predictions.transform.dense.weight": torch.zeros(31, 32)}),
            r"'cls\.predictions\.transform\.dense\.weight' has shape \(31, 32\), the config needs \(32, 32\)",
        ),
        (lambda w: w.update({"cls.predictions.bias": torch.zeros(98)}), r"cls\.predictions\.bias.*\(98,\).*\(99,\)"),
        (
            lambda w: w.pop("cls.predictions.transform.LayerNorm.bias"),
            r"no tensor 'cls\.predictions\.transform\.LayerNorm\.bias'",
        ),
        (
            lambda w: w.update({"cls.predictions.decoder.weight": torch.zeros(99, 32)}),
            "differs from the word embeddings",
        ),
        (lambda w: w.update({"cls.predictions.transform.extra": torch.zeros(3)}), r"does not know.*transform\.extra"),
    ],
    ids=["dense-shape", "bias-shape", "missing", "untied-decoder", "unknown"],
)
def test_a_broken_mlm_head_is_a_load_error(tmp_path, edit, message):
    model, _ = load_bert(mlm_with_edited_weights(tmp_path / "broken", edit))  # the encoder itself loads
    with pytest.raises(ModelLoadError, match=message):
        load_mlm_head(model)


# ---- ablate ------------------------------------------------------------------------------------


def test_ablate_with_a_mask_of_ones_reports_no_change(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, SENTENCES[0])
    L = enc.input_ids.shape[1]
    # padded by hand to L + 3: the measures use the L real tokens only
    ids = torch.cat([enc.input_ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.cat([enc.attention_mask, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    result = ablate(model, ids, mask, head_mask=torch.ones(6, 12), ablation="uniform")
    assert isinstance(result, AblationResult) and result.predictions is None
    assert result.base_attentions.shape == result.ablated_attentions.shape == (6, 12, L, L)
    assert result.base_attentions.dtype == np.float32
    assert result.attention_change.shape == (6, 12) and result.hidden_cosine.shape == (7,)
    assert np.array_equal(result.base_attentions, result.ablated_attentions)
    assert np.all(result.attention_change == 0)
    np.testing.assert_allclose(result.hidden_cosine, 1.0, atol=1e-9, rtol=0)
    assert result.embedding_cosine == pytest.approx(1.0, abs=1e-9)
    with torch.inference_mode():
        full = model(enc.input_ids).attentions
    np.testing.assert_array_equal(result.base_attentions[3], full[3][0].numpy())


def test_ablate_measures_what_one_head_changes(minilm):
    model, tokenizer = minilm
    enc = encode(tokenizer, SENTENCES[0])
    head_mask = np.ones((6, 12), dtype=bool)
    head_mask[3, 2] = False
    result = ablate(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, head_mask)
    assert np.all(result.ablated_attentions[3, 2] == 0)
    expected = np.abs(result.base_attentions[3, 2]).mean()
    assert result.attention_change[3, 2] == pytest.approx(expected, rel=1e-6)
    assert np.all(np.delete(result.attention_change[:4].ravel(), 3 * 12 + 2) == 0)  # nothing before it changes
    assert np.all(result.attention_change[4:] > 0)  # everything after it does
    np.testing.assert_allclose(result.hidden_cosine[:4], 1.0, atol=1e-9, rtol=0)
    assert np.all(result.hidden_cosine[4:] < 1 - 1e-6) and np.all(result.hidden_cosine > 0)
    assert 0 < result.embedding_cosine < 1 - 1e-6


def test_ablate_compares_the_guesses_for_the_first_mask(tiny_mlm_dir):
    model, tokenizer = load_bert(tiny_mlm_dir)
    head = load_mlm_head(model)
    ids, mask, types, position = masked_sentence(tokenizer, "the [MASK] sat on the [MASK]")
    head_mask = torch.tensor([[1, 0, 0, 1], [0, 1, 1, 1]]).bool()
    result = ablate(model, ids, mask, types, head_mask, "uniform", mlm_head=head, tokenizer=tokenizer, top_k=4)
    assert isinstance(result.predictions, MaskPredictions) and result.predictions.position == position == 2

    def named(**kwargs):
        return [
            (tokenizer.convert_ids_to_tokens(i), p)
            for i, p in predict_masked(model, head, ids, mask, types, position, top_k=4, **kwargs)
        ]

    assert result.predictions.before == named()
    assert result.predictions.after == named(head_mask=head_mask, ablation="uniform")
    assert result.predictions.before != result.predictions.after
    no_mask = tokenizer("the cat sat", return_tensors="pt")
    without = ablate(model, no_mask["input_ids"], head_mask=head_mask, mlm_head=head, tokenizer=tokenizer)
    assert without.predictions is None


def test_ablate_validates_its_inputs(minilm):
    model, tokenizer = minilm
    ids, mask, types = padded(tokenizer)
    with pytest.raises(ValueError, match="one sentence"):
        ablate(model, ids, mask, types, head_mask=torch.ones(6, 12))
    with pytest.raises(ValueError, match=r"\(n_layers, n_heads\)"):
        ablate(model, ids[:1], mask[:1], types[:1], head_mask=torch.ones(6))
    with pytest.raises(ValueError, match="'zero', 'uniform'"):
        ablate(model, ids[:1], mask[:1], types[:1], head_mask=torch.ones(6, 12), ablation="none")
    with pytest.raises(ValueError, match="tokenizer"):
        ablate(model, ids[:1], head_mask=torch.ones(6, 12), mlm_head=MaskedLMHead(model.config))
