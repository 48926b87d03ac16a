"""Generation with our own model for the causal families beyond tests/unit/test_generate.py's: on tiny random
checkpoints of GPT-NeoX, OPT, Phi, Phi-3, Gemma, Gemma2, Gemma3, Gemma 4, Qwen3, OLMo2, OLMo 3, gpt-oss and SmolLM3,
greedy ids equal transformers' generate token for token and the top probabilities equal those transformers chose from
(its final logit soft-cap included); the maps returned are the forward's over the written sequence; seeded sampling
repeats itself; and each LM head is read strictly, tied or saved, with its bias where it has one."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from parity import case_loader
from safetensors.torch import load_file, save_file
from test_generate import assert_maps_equal_forward

from attention import ModelLoadError, generate, load_lm_head, load_model

PROMPT = "The animal didn't cross the street because"
N_NEW = 12
CASES = {  # id -> (family, config overrides)
    "gpt_neox": ("gpt_neox", {}),
    "opt": ("opt", {}),
    "opt-projected": ("opt", dict(word_embed_proj_dim=16, do_layer_norm_before=False)),  # as OPT-350m
    "phi": ("phi", {}),
    "phi3": ("phi3", {}),
    "phi3-window": ("phi3", dict(sliding_window=5)),
    "gemma": ("gemma", {}),
    "gemma2": ("gemma2", {}),  # final_logit_softcapping 30.0 by default
    "gemma3_text": ("gemma3_text", {}),
    "gemma3_text-capped": ("gemma3_text", dict(final_logit_softcapping=3.0)),
    "gemma4_text": ("gemma4_text", {}),
    "gemma4_text-capped": ("gemma4_text", dict(final_logit_softcapping=3.0)),
    "qwen3": ("qwen3", {}),
    "olmo2": ("olmo2", {}),
    "olmo3": ("olmo3", {}),
    "gpt_oss": ("gpt_oss", {}),
    "smollm3": ("smollm3", {}),
}
# the tensor each checkpoint saves as its LM head (None: tied to the word embeddings, nothing saved), its bias
HEADS = {
    "gpt_neox": ("embed_out.weight", None),
    "opt": (None, None),
    "opt-projected": (None, None),
    "phi": ("lm_head.weight", "lm_head.bias"),
    "phi3": ("lm_head.weight", None),
    "phi3-window": ("lm_head.weight", None),
    "gemma": (None, None),
    "gemma2": (None, None),
    "gemma3_text": (None, None),
    "gemma3_text-capped": (None, None),
    "gemma4_text": (None, None),
    "gemma4_text-capped": (None, None),
    "qwen3": ("lm_head.weight", None),
    "olmo2": ("lm_head.weight", None),
    "olmo3": ("lm_head.weight", None),
    "gpt_oss": ("lm_head.weight", None),
    "smollm3": ("lm_head.weight", None),
}


@pytest.fixture(scope="module")
def load(tmp_path_factory):
    """load(case) -> (folder, our model, tokenizer, transformers' eager causal LM), each case built once."""
    from transformers import AutoModelForCausalLM

    ours, theirs = case_loader(tmp_path_factory, CASES), {}

    def load_case(case: str):
        model, tokenizer, _ = ours(case)
        folder = Path(model.load_report.path)
        if case not in theirs:
            theirs[case] = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
        return folder, model, tokenizer, theirs[case]

    return load_case


def reference(ref, tokenizer):
    """transformers' greedy generate: the sequence and the probabilities of each step's processed scores."""
    enc = tokenizer(PROMPT, return_tensors="pt")
    eos = ref.generation_config.eos_token_id
    with torch.no_grad():
        out = ref.generate(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            do_sample=False,
            num_beams=1,
            max_new_tokens=N_NEW,
            pad_token_id=eos[0] if isinstance(eos, list) else eos,
            output_scores=True,
            return_dict_in_generate=True,
        )
    return out.sequences, torch.cat(out.scores).float().softmax(-1)  # (1, T), (n_new, V)


@pytest.mark.parametrize("case", list(CASES))
def test_greedy_ids_and_top_probs_equal_transformers(load, case):
    _, model, tokenizer, ref = load(case)
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    ids, probs = reference(ref, tokenizer)
    new = ids.size(1) - ours.ids.size(1) + ours.new_ids.size(1)
    same = int((ours.ids[0, -new:] == ids[0, -new:]).sum()) if ours.ids.shape == ids.shape else 0
    print(f"\n{case:20} tokens equal {same}/{new}")
    assert torch.equal(ours.ids, ids), (ours.ids, ids)
    assert ours.new_ids.size(1) == N_NEW
    best = probs.topk(2, dim=-1).values
    assert torch.all(best[:, 0] / best[:, 1] > 1.001)  # every step's choice is clear, not a near tie
    top_probs, top_ids = probs.topk(5, dim=-1)
    assert torch.equal(ours.top_ids, top_ids)
    torch.testing.assert_close(ours.top_probs, top_probs, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", list(CASES))
def test_greedy_ids_equal_transformers_with_repetition_penalty(load, case, tmp_path):
    """A tiny random model soon repeats one token; with generation_config's repetition_penalty (read by both)
    each writes a varied sequence, every step through the key/value cache at a new context."""
    from transformers import AutoModelForCausalLM

    folder, _, _, _ = load(case)
    copy = Path(shutil.copytree(folder, tmp_path / case))
    path = copy / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "repetition_penalty": 3.0}))
    model, tokenizer = load_model(copy)
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    ids, probs = reference(AutoModelForCausalLM.from_pretrained(str(copy), attn_implementation="eager"), tokenizer)
    assert torch.equal(ours.ids, ids), (ours.ids, ids)
    assert len(set(ours.new_ids[0].tolist())) >= N_NEW // 2
    torch.testing.assert_close(ours.top_probs, probs.topk(5, dim=-1).values, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("case", list(CASES))
def test_attentions_equal_forward_over_ids(load, case):
    _, model, tokenizer, _ = load(case)
    assert_maps_equal_forward(model, tokenizer, N_NEW)


@pytest.mark.parametrize(
    "case",
    [
        "gpt_neox",
        "opt",
        "phi",
        "phi3",
        "gemma",
        "gemma2",
        "gemma3_text",
        "gemma4_text",
        "qwen3",
        "olmo2",
        "olmo3",
        "gpt_oss",
        "smollm3",
    ],
)
def test_seeded_sampling_repeats(load, case):
    _, model, tokenizer, _ = load(case)
    options = dict(max_new_tokens=N_NEW, do_sample=True, temperature=1.5, top_k=20, seed=3)
    first, again = generate(model, tokenizer, PROMPT, **options), generate(model, tokenizer, PROMPT, **options)
    assert torch.equal(first.ids, again.ids)
    other = [generate(model, tokenizer, PROMPT, **{**options, "seed": s}).ids for s in range(4)]
    assert any(not torch.equal(first.ids, o) for o in other)  # the seed matters
    greedy = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW).ids
    assert not torch.equal(first.ids, greedy)


@pytest.mark.parametrize("case", list(CASES))
def test_lm_head_read_strictly(load, case):
    """The head is the saved tensor (GPT-NeoX's embed_out, Phi's with its bias) or, tied, the word embeddings
    themselves; either way transformers' output embeddings."""
    folder, model, _, ref = load(case)
    saved = load_file(str(folder / "model.safetensors"))
    name, bias = HEADS[case]
    head = load_lm_head(model)
    if name is None:
        assert not any(n.startswith(("lm_head.", "embed_out.")) for n in saved)
        assert head.weight is model.embeddings.word_embeddings.weight
    else:
        assert torch.equal(head.weight, saved[name])
        assert not torch.equal(head.weight, model.embeddings.word_embeddings.weight)
    assert torch.equal(head.weight, ref.get_output_embeddings().weight)
    if bias is None:
        assert head.bias is None and getattr(ref.get_output_embeddings(), "bias", None) is None
    else:
        assert torch.equal(head.bias, saved[bias]) and torch.equal(head.bias, ref.get_output_embeddings().bias)


@pytest.mark.parametrize("case", ["gpt_neox", "phi", "gemma"])
def test_lm_head_stray_tensor_refused(load, case, tmp_path):
    """A tensor under the head's name that the head does not use is refused by name, tied head or saved."""
    folder, _, _, _ = load(case)
    copy = Path(shutil.copytree(folder, tmp_path / case))
    name = HEADS[case][0] or "lm_head.weight"
    tensors = load_file(str(copy / "model.safetensors"))
    tensors[name.removesuffix("weight") + "scale"] = torch.ones(3)
    save_file(tensors, str(copy / "model.safetensors"), metadata={"format": "pt"})
    model, _ = load_model(copy)
    with pytest.raises(ModelLoadError, match="scale"):
        load_lm_head(model)


def test_final_logit_cap_read_with_transformers_default(load, tmp_path):
    """Gemma2 caps its logits at 30 when config.json says nothing, Gemma3 only when it says so, Gemma never; a
    cap that is not a positive number is refused by name."""
    assert load_lm_head(load("gemma2")[1]).cap == 30.0
    assert load_lm_head(load("gemma3_text")[1]).cap is None and load_lm_head(load("gemma3_text-capped")[1]).cap == 3.0
    assert load_lm_head(load("gemma")[1]).cap is None
    copy = Path(shutil.copytree(load("gemma2")[0], tmp_path / "gemma2"))
    path = copy / "config.json"
    values = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in values.items() if k != "final_logit_softcapping"}))
    assert load_lm_head(load_model(copy)[0]).cap == 30.0
    path.write_text(json.dumps({**values, "final_logit_softcapping": -5.0}))
    with pytest.raises(ModelLoadError, match="final_logit_softcapping"):
        load_lm_head(load_model(copy)[0])
