"""GGUF files of every architecture gguf_archs.py reads (Qwen2, Qwen3, Phi-3, Gemma 1-3, GPT-2; Llama's in
tests/families/test_gguf.py), written here from tiny random transformers checkpoints as llama.cpp's
convert_hf_to_gguf.py writes them (test_gguf.write_gguf): in F32 each is the same model as its safetensors, weight
for weight; with quantized and half-precision tensors it gives the numbers of transformers' own GGUF loading of the
same file, where transformers reads that architecture (all but Gemma 1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import make_family, make_more
from test_gguf import SENTENCES, batches, largest_differences, transformers_gguf, write_gguf

from attention import ModelLoadError, encode, generate, load_model

_GEMMA3_ROPE = dict(
    full_attention=dict(rope_type="linear", factor=2.0, rope_theta=1000.0),  # rope.scaling.type linear, factor 2
    sliding_attention=dict(rope_type="default", rope_theta=10_000.0),  # llama.cpp's, which the file cannot change
)
# architecture -> (the checkpoint's maker, its family, overrides; the config values transformers' GGUF reading
# leaves out of the file's metadata, None where it does not read the architecture; the Q8_0 tensors, whose rows
# are whole 32-value blocks)
CASES = {
    "qwen2": (make_family, "qwen2", {}, {}, ("blk.0.attn_q.weight", "blk.1.ffn_up.weight")),
    # head_dim 16 (H·d = 64 ≠ 32), attention.key_length in the file, which transformers does not read
    "qwen3": (make_more, "qwen3", {}, dict(head_dim=16), ("blk.0.attn_k.weight", "blk.1.ffn_gate.weight")),
    # half of each head turned: rope.dimension_count 4 of 8, which transformers does not read
    "phi3": (
        make_more,
        "phi3",
        {},
        dict(pad_token_id=None, rope_parameters=dict(rope_type="default", rope_theta=100.0, partial_rotary_factor=0.5)),
        ("blk.0.attn_qkv.weight", "blk.1.ffn_up.weight"),
    ),
    "gemma": (make_more, "gemma", {}, None, ("blk.0.attn_q.weight", "blk.1.ffn_up.weight")),
    # a window shorter than the sentences, capped scores and logits: the caps and the query scale are not
    # read by transformers (llama.cpp scales by head_dim^-0.5 for all but the 27B)
    "gemma2": (
        make_more,
        "gemma2",
        dict(query_pre_attn_scalar=16, final_logit_softcapping=0.5),
        dict(query_pre_attn_scalar=16, attn_logit_softcapping=2.0, final_logit_softcapping=0.5),
        ("blk.0.attn_v.weight", "blk.2.ffn_up.weight"),
    ),
    # twelve layers, each sixth full (llama.cpp's pattern, the only one the file can give); the windowed ones on
    # their own base
    "gemma3": (
        make_more,
        "gemma3_text",
        dict(num_hidden_layers=12, layer_types=None, query_pre_attn_scalar=16, rope_parameters=_GEMMA3_ROPE),
        dict(query_pre_attn_scalar=16, rope_parameters=_GEMMA3_ROPE),
        ("blk.0.attn_q.weight", "blk.5.ffn_gate.weight"),
    ),
    # transformers reads context_length as n_ctx, and keeps GPT2Config's 1,024 positions
    # a layer without positions each fourth (llama.cpp's fixed step): the fourth of four
    "smollm3": (make_more, "smollm3", dict(num_hidden_layers=4, no_rope_layer_interval=4), None, ()),
    "olmo2": (make_more, "olmo2", {}, None, ()),
    "gpt2": (make_family, "gpt2", {}, dict(n_positions=64), ("blk.0.attn_qkv.weight", "blk.1.ffn_down.weight")),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """folders(architecture) -> the tiny safetensors checkpoint, made once."""
    made = {}

    def folder(architecture: str):
        if architecture not in made:
            maker, family, overrides, _, _ = CASES[architecture]
            # an epsilon float32 holds exactly: the file keeps float32 metadata, config.json a float64
            eps = {"layer_norm_epsilon" if family == "gpt2" else "rms_norm_eps": 2.0**-20}
            made[architecture] = maker(tmp_path_factory.mktemp(architecture), family, **eps, **overrides)
        return made[architecture]

    return folder


def quantized(architecture: str) -> dict:
    """Two tensors in Q8_0 and the token embeddings in F16."""
    import gguf

    kinds = dict.fromkeys(CASES[architecture][4], gguf.GGMLQuantizationType.Q8_0)
    return {**kinds, "token_embd.weight": gguf.GGMLQuantizationType.F16}


@pytest.mark.parametrize("architecture", list(CASES))
def test_an_f32_gguf_is_the_same_model_as_its_safetensors(folders, tmp_path, architecture):
    folder = folders(architecture)
    ours, tokenizer = load_model(write_gguf(folder, tmp_path / "f32.gguf", architecture))
    same, _ = load_model(folder)
    c = same.config
    if c.head_dim is None and architecture == "smollm3":  # the file gives it (rope.dimension_count), as H·d = E
        c = c.replace(head_dim=c.hidden_size // c.num_attention_heads)
    assert ours.config == c
    gemma = architecture.startswith("gemma")
    for name, tensor in same.state_dict().items():
        if gemma and name.endswith("norm.weight"):  # saved as 1 + w, read as (1 + w) - 1 in float32
            tensor = (tensor + 1) - 1
        assert torch.equal(ours.state_dict()[name], tensor), name
    _, input_ids, attention_mask = batches(tokenizer)[1]
    with torch.inference_mode():
        a, b = ours(input_ids, attention_mask), same(input_ids, attention_mask)
    if not gemma:  # the same weights: the same numbers
        for x, y in zip(a.hidden_states + a.attentions, b.hidden_states + b.attentions):
            assert torch.equal(x, y)


@pytest.mark.parametrize("architecture", [a for a, case in CASES.items() if case[3] is not None])
def test_quantized_tensors_give_transformers_numbers(folders, tmp_path, architecture):
    path = write_gguf(folders(architecture), tmp_path / "q.gguf", architecture, quantize=quantized(architecture))
    ours, tokenizer = load_model(path)
    theirs = transformers_gguf(path, **CASES[architecture][3])
    for kind, input_ids, attention_mask in batches(tokenizer):
        hidden, attention = largest_differences(ours, theirs, input_ids, attention_mask)
        assert hidden <= 1e-5 and attention <= 1e-6, (kind, hidden, attention)


def test_gemma2s_logit_cap_is_read_from_the_file(folders, tmp_path):
    """The LM head caps the logits at the file's final_logit_softcapping (0.5: every token's probability close),
    as transformers' does: the same tokens written, the same probabilities."""
    path = write_gguf(folders("gemma2"), tmp_path / "g.gguf", "gemma2")
    ours, tokenizer = load_model(path)
    theirs = transformers_gguf(path, **CASES["gemma2"][3])
    ids = encode(tokenizer, SENTENCES[1]).input_ids
    with torch.inference_mode():
        expected = theirs.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False, output_scores=True
        )
    written = generate(ours, tokenizer, SENTENCES[1], 4)
    assert torch.equal(written.ids, expected)
    with torch.inference_mode():
        logits = theirs(written.ids[:, :-1]).logits[0, ids.size(1) - 1 :]
    probs = torch.softmax(logits.float(), -1).topk(5)
    assert probs.values.max() < 0.05  # capped at ±0.5: nearly uniform over 304 tokens
    assert torch.allclose(written.top_probs, probs.values, atol=1e-6)


def test_a_gguf_gemma_file_with_an_output_head_is_refused_by_name(folders, tmp_path):
    """Gemma's head is its embeddings: llama.cpp writes no output.weight, and one in the file has no place."""
    extra = np.zeros((304, 32), np.float32)
    path = write_gguf(
        folders("gemma"), tmp_path / "g.gguf", "gemma", more=lambda w: w.add_tensor("output.weight", extra)
    )
    with pytest.raises(ModelLoadError, match="has a tensor this Gemma model does not know: 'output.weight'"):
        load_model(path)


def test_a_prompt_past_the_files_positions_is_refused_before_the_work(folders, tmp_path):
    """context_length is the model's positions: a writing past them is one clear error, a run is cut to them."""
    from attention.runs.run import run_sentence

    ours, tokenizer = load_model(write_gguf(folders("qwen2"), tmp_path / "q.gguf", "qwen2"))
    positions = ours.config.max_position_embeddings
    assert positions == 64
    text = " ".join(SENTENCES * 20)
    with pytest.raises(ValueError, match=f"exceed {positions} positions"):
        generate(ours, tokenizer, text, 4)
    assert len(run_sentence(ours, tokenizer, text, causal=True).tokens) == positions


def sentencepiece_fields(writer, folder, bos: int, eos: int) -> None:
    """A small SentencePiece vocabulary (llama.cpp's "llama" tokenizer model): the specials, the 256 byte pieces,
    then pieces scored by length, from which transformers recovers the merges."""
    pieces = ["▁", *"Thecatsonm.", "▁T", "he", "▁The", "at", "▁c", "▁cat", "▁s", "▁sat", "▁o", "▁on", "▁t", "▁the"]
    pieces += ["▁m", "▁mat"]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<pad>", "<s>", "</s>", "<unk>", *(f"<0x{b:02X}>" for b in range(256)), *pieces])
    writer.add_token_scores([0.0] * 260 + [len(piece) - 100.0 for piece in pieces])
    writer.add_token_types([3, 3, 3, 2] + [6] * 256 + [1] * len(pieces))  # control, unknown, byte, normal
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)


def test_gemma_1s_sentencepiece_tokenizer_is_the_one_transformers_builds(folders, tmp_path):
    """A Gemma 1 file, which transformers makes no model config of (so AutoTokenizer refuses it), gets its
    SentencePiece tokenizer from the file directly: the ids AutoTokenizer gives on the same vocabulary in a Gemma2
    file (the same builder, transformers' gemma_tokenizer)."""
    from transformers import AutoTokenizer

    path = write_gguf(folders("gemma"), tmp_path / "g1.gguf", "gemma", tokenizer=sentencepiece_fields)
    write_gguf(folders("gemma2"), tmp_path / "g2.gguf", "gemma2", tokenizer=sentencepiece_fields)
    _, tokenizer = load_model(path)
    theirs = AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="g2.gguf")
    assert type(theirs).__name__ == "GemmaTokenizer" and len(tokenizer) == len(theirs)
    for text in SENTENCES:
        ids = encode(tokenizer, text).input_ids[0].tolist()
        assert ids == theirs(text)["input_ids"] and ids[0] == 1, text  # <s> first, as llama.cpp adds it


def test_an_olmo3_file_written_as_olmo2_is_refused_by_name(folders, tmp_path):
    """convert_hf_to_gguf.py writes OLMo3 under the olmo2 architecture, with a sliding window OLMo2 does not have."""
    path = write_gguf(folders("olmo2"), tmp_path / "o.gguf", "olmo2", more=lambda w: w.add_sliding_window(4))
    with pytest.raises(ModelLoadError, match=r"olmo2 model has a sliding window \(OLMo3's\)"):
        load_model(path)


def test_gemma3s_newer_keys_are_read(folders, tmp_path):
    """attention.sliding_window_pattern (True for a windowed layer) and rope.freq_base_swa, which newer converters
    write, decide which layers see every key and the windowed layers' rotary base."""
    windowed = [i % 3 != 2 for i in range(12)]  # each third layer full, not each sixth

    def more(writer):
        writer.add_sliding_window_pattern(windowed)
        writer.add_rope_freq_base_swa(500.0)

    model, _ = load_model(write_gguf(folders("gemma3"), tmp_path / "new.gguf", "gemma3", more=more))
    assert [model.config.window_of(i) for i in range(12)] == [5 if w else None for w in windowed]
    assert model.config.positions.local_rope_theta == 500.0


def test_a_gemma3_file_without_a_window_has_none(tmp_path):
    """The converter writes no attention.sliding_window for a Gemma3 without one: every layer sees every key, as
    the same checkpoint's safetensors say (sliding_window null)."""
    _, family, overrides, _, _ = CASES["gemma3"]
    folder = make_more(tmp_path / "g", family, rms_norm_eps=2.0**-20, **dict(overrides, sliding_window=None))
    ours, _ = load_model(write_gguf(folder, tmp_path / "g.gguf", "gemma3"))
    same, _ = load_model(folder)
    assert ours.config == same.config and ours.config.window_of(0) is None


def test_gemma3s_embeddings_cut_to_the_tokenizer_are_its_vocabulary(folders, tmp_path):
    """Gemma3's converter drops the embedding rows past the tokenizer's last token: the vocabulary is the rows the
    file has, and the model gives the numbers of the uncut file."""
    from safetensors.torch import load_file

    folder = folders("gemma3")
    whole, tokenizer = load_model(write_gguf(folder, tmp_path / "whole.gguf", "gemma3"))
    rows = len(tokenizer)
    table = load_file(str(folder / "model.safetensors"))["model.embed_tokens.weight"].numpy()
    assert rows < len(table)
    path = write_gguf(folder, tmp_path / "cut.gguf", "gemma3", change={"token_embd.weight": table[:rows]})
    cut, _ = load_model(path)
    assert cut.config.vocab_size == rows
    _, input_ids, attention_mask = batches(tokenizer)[1]
    with torch.inference_mode():
        a, b = cut(input_ids, attention_mask), whole(input_ids, attention_mask)
    for x, y in zip(a.hidden_states + a.attentions, b.hidden_states + b.attentions):
        assert torch.equal(x, y)


def test_a_gpt2_file_with_its_head_written_out_writes_as_the_tied_one(folders, tmp_path):
    """llama.cpp's GPT-2 converter writes output.weight, a copy of the token embeddings: it is set aside as the
    LM head (read again for writing), and the model writes the same tokens as from the file without it."""
    from safetensors.torch import load_file

    folder = folders("gpt2")
    table = load_file(str(folder / "model.safetensors"))["transformer.wte.weight"].numpy()
    tied, tokenizer = load_model(write_gguf(folder, tmp_path / "tied.gguf", "gpt2"))
    path = write_gguf(folder, tmp_path / "head.gguf", "gpt2", more=lambda w: w.add_tensor("output.weight", table))
    headed, _ = load_model(path)
    assert headed.load_report.ignored_keys == ("lm_head.weight",) and tied.load_report.ignored_keys == ()
    a, b = generate(headed, tokenizer, SENTENCES[1], 5), generate(tied, tokenizer, SENTENCES[1], 5)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.top_probs, b.top_probs)
