"""GGUF files (attention/load/gguf.py): a tiny random Llama written here with gguf.GGUFWriter, as llama.cpp's
convert_hf_to_gguf.py writes one (its names, q and k permuted to llama.cpp's rotary layout), gives the numbers
of the same weights saved as safetensors and transformers' numbers on the same file; broken and unsupported
files are each one clear ModelLoadError; the bundled SmolLM2-135M writer ('smollm2') loads and writes as
transformers does on the same file (tests/families/test_gguf_smollm2.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from families import make_family

from attention import ModelLoadError, encode, generate, load_model

WRITTEN = (
    "llama",
    "smollm3",
    "olmo2",
    "qwen2",
    "qwen3",
    "phi3",
    "gemma",
    "gemma2",
    "gemma3",
    "gpt2",
    "t5",
)  # write_gguf's architectures
SENTENCES = ["The animal didn't cross the street because it was too tired.", "The cat sat on the mat."]


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: each head's rows interleaved for its rotary kernel."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def tokenizer_fields(writer, folder: Path, bos: int = 1, eos: int = 2) -> None:
    """The folder's byte-level BPE tokenizer (tokenizer.json) as GGUF's gpt2-model tokenizer fields."""
    model = json.loads((folder / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in model["added_tokens"]}
    vocab = {**model["model"]["vocab"], **added}
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in added else 1 for t in tokens])  # control, normal
    writer.add_token_merges(merges)
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(False)


def decoder_fields(writer, config: dict, architecture: str) -> None:
    """A Llama-style config.json as convert_hf_to_gguf.py writes its metadata for `architecture`."""
    n_head = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // n_head
    rope = config.get("rope_parameters") or {}
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(n_head)
    writer.add_head_count_kv(config["num_key_value_heads"])
    full = rope.get("full_attention", rope)  # Gemma3's full layers
    writer.add_rope_freq_base(full["rope_theta"])
    if full.get("rope_type") == "linear":
        writer.add_rope_scaling_type(__import__("gguf").RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(full["factor"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    if architecture in ("llama", "smollm3"):
        writer.add_rope_dimension_count(head_dim)
    elif architecture == "phi3":  # the rotated share of each head
        writer.add_rope_dimension_count(int(rope.get("partial_rotary_factor", 1.0) * head_dim))
    elif config.get("head_dim"):  # as the converter: only a config that gives it
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    if config.get("sliding_window") and architecture.startswith("gemma"):
        writer.add_sliding_window(config["sliding_window"])
    if architecture == "phi3":  # always: 0 for none
        writer.add_sliding_window(config.get("sliding_window") or 0)
    if architecture == "gemma2":
        writer.add_attn_logit_softcapping(config["attn_logit_softcapping"])
        writer.add_final_logit_softcapping(config["final_logit_softcapping"])


def gpt2_fields(writer, config: dict) -> None:
    writer.add_block_count(config["n_layer"])
    writer.add_context_length(config["n_positions"])
    writer.add_embedding_length(config["n_embd"])
    writer.add_feed_forward_length(config.get("n_inner") or 4 * config["n_embd"])
    writer.add_head_count(config["n_head"])
    writer.add_layer_norm_eps(config["layer_norm_epsilon"])


def t5_fields(writer, config: dict) -> None:
    """A T5 config.json as convert_hf_to_gguf.py's T5Model writes it (both norm epsilons, 512 positions where
    n_positions is not given); its decoder's depth only where it differs (a newer converter's key)."""
    writer.add_context_length(config.get("n_positions") or 512)
    writer.add_embedding_length(config["d_model"])
    writer.add_feed_forward_length(config["d_ff"])
    writer.add_block_count(config["num_layers"])
    if config.get("num_decoder_layers") not in (None, config["num_layers"]):
        writer.add_decoder_block_count(config["num_decoder_layers"])
    writer.add_head_count(config["num_heads"])
    writer.add_key_length(config["d_kv"])
    writer.add_value_length(config["d_kv"])
    writer.add_layer_norm_eps(config["layer_norm_epsilon"])
    writer.add_layer_norm_rms_eps(config["layer_norm_epsilon"])
    writer.add_relative_attn_buckets_count(config["relative_attention_num_buckets"])
    writer.add_decoder_start_token_id(config["decoder_start_token_id"])
    writer.add_pad_token_id(config["pad_token_id"])


def gguf_tensor(name: str, weights: np.ndarray, architecture: str, config: dict, rotary: bool) -> np.ndarray:
    """A tensor as convert_hf_to_gguf.py stores it: a Llama's q and k permuted (unless `rotary` is False), Gemma's
    norms plus 1, GPT-2's Conv1D weights transposed to (out, in)."""
    permuted = rotary and architecture in ("llama", "smollm3")  # LlamaModel.permute
    if permuted and ".attn_q." in name:
        return permute(weights, config["num_attention_heads"])
    if permuted and ".attn_k." in name:
        return permute(weights, config["num_key_value_heads"])
    if architecture.startswith("gemma") and name.endswith("norm.weight"):
        return weights + np.float32(1.0)
    if architecture == "gpt2" and name.endswith(
        ("attn_qkv.weight", "attn_output.weight", "ffn_up.weight", "down.weight")
    ):
        return np.ascontiguousarray(weights.T)
    return weights


def write_gguf(
    folder: Path,
    path: Path,
    architecture: str = "llama",
    quantize: dict | None = None,
    change: dict | None = None,
    drop: tuple[str, ...] = (),
    rotary: bool = True,
    more=None,
    tokenizer=tokenizer_fields,
) -> Path:
    """The safetensors checkpoint in `folder` written as a GGUF file of `architecture` (a Llama's written under
    the name given, for one not in WRITTEN): its tensors under gguf's own names for them
    (gguf.get_tensor_name_map) as gguf_tensor lays them out, each stored as F32 or the GGMLQuantizationType
    `quantize` names for it; `change` replaces tensors (by GGUF name), `drop` leaves some out, `more(writer)` adds
    to them; `tokenizer(writer, folder, bos, eos)` writes the tokenizer's fields."""
    import gguf
    from safetensors.torch import load_file

    config = json.loads((folder / "config.json").read_text())
    known = {name: kind for kind, name in gguf.MODEL_ARCH_NAMES.items()}
    kind = architecture if architecture in WRITTEN else "llama"
    layers = (
        config.get("num_hidden_layers")
        or config.get("n_layer")
        or max(config["num_layers"], config["num_decoder_layers"])
    )
    names = gguf.get_tensor_name_map(known[kind], layers)
    writer = gguf.GGUFWriter(str(path), architecture)
    if kind == "gpt2":
        gpt2_fields(writer, config)
    elif kind == "t5":
        t5_fields(writer, config)
    else:
        decoder_fields(writer, config, kind)
    bos = config.get("bos_token_id", 1)  # T5 has none: its BPE's <s>
    tokenizer(writer, folder, 0 if bos is None else bos, config.get("eos_token_id", 2))
    if more is not None:  # more metadata or tensors
        more(writer)
    for hf_name, tensor in load_file(str(folder / "model.safetensors")).items():
        stem, suffix = hf_name.rsplit(".", 1)
        name = f"{names.get_name(stem)}.{suffix}"
        weights = (change or {}).get(name, gguf_tensor(name, tensor.float().numpy(), kind, config, rotary))
        if name in drop:
            continue
        kind_of = (quantize or {}).get(name)
        if kind_of is None:
            writer.add_tensor(name, weights)
        else:
            writer.add_tensor(name, gguf.quants.quantize(weights, kind_of), raw_dtype=kind_of)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def transformers_gguf(path: Path, **unread):
    """transformers' own model on a GGUF file, eager attention: its config and tensors (dequantized, renamed and
    laid out as it saves them) read by its GGUF loader, load_gguf_checkpoint, as from_pretrained(gguf_file=...)
    reads them (which would need accelerate only to place the weights); `unread`: config values its reading of
    the file's metadata leaves out (at the values llama.cpp runs)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name, **unread)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    loaded = model.load_state_dict(tensors, strict=False)
    assert not loaded.unexpected_keys and set(loaded.missing_keys) <= {"lm_head.weight"}
    assert config.tie_word_embeddings == ("lm_head.weight" in loaded.missing_keys)
    model.tie_weights()
    return model


def largest_differences(ours, theirs, input_ids, attention_mask):
    """Max |Δ| over every hidden state at the real positions, each relative to that state's largest magnitude
    (at least 1: a 30-layer model's reach 2·10⁴), and max |Δ| over every attention map's real rows and columns."""
    with torch.inference_mode():
        mine = ours(input_ids, attention_mask)
        ref = theirs(input_ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=True)
    assert len(mine.hidden_states) == len(ref.hidden_states) == ours.config.num_hidden_layers + 1
    assert len(mine.attentions) == len(ref.attentions) == ours.config.num_hidden_layers
    hidden = attention = 0.0
    for b, keep in enumerate(attention_mask.bool()):
        for a, r in zip(mine.hidden_states, ref.hidden_states):
            scale = max(1.0, r[b, keep].abs().max().item())
            hidden = max(hidden, (a[b, keep] - r[b, keep]).abs().max().item() / scale)
        for a, r in zip(mine.attentions, ref.attentions):
            attention = max(attention, (a[b][:, keep][:, :, keep] - r[b][:, keep][:, :, keep]).abs().max().item())
            assert torch.all(a[b][:, keep][:, :, ~keep] == 0)  # padding keys get no attention
    return hidden, attention


def batches(tokenizer, texts=SENTENCES):
    """A sentence alone, and the sentences padded on the left and on the right: (name, input_ids, attention_mask)."""
    enc = encode(tokenizer, texts[0])
    out = [("sentence", enc.input_ids, enc.attention_mask)]
    for side in ("left", "right"):
        tokenizer.padding_side = side
        try:
            batch = tokenizer(texts, padding=True, return_tensors="pt")
        finally:
            tokenizer.padding_side = "right"
        out.append((f"{side} padded", batch["input_ids"], batch["attention_mask"]))
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny random Llama (4 query heads sharing 2 K/V heads, untied head) as safetensors, and as GGUF."""
    # an epsilon float32 holds exactly: the file keeps float32 metadata, config.json a float64
    folder = make_family(tmp_path_factory.mktemp("llama"), "llama", rms_norm_eps=2.0**-20)
    return folder, write_gguf(folder, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def test_a_gguf_llama_is_the_same_model_as_its_safetensors(tiny):
    folder, path = tiny
    ours, tokenizer = load_model(path)
    same, _ = load_model(folder)
    assert ours.config == same.config
    assert ours.load_report.weights_file == "tiny.gguf" and ours.load_report.ignored_keys == ("lm_head.weight",)
    for name, tensor in same.state_dict().items():  # F32 in the file: every weight equal, q and k un-permuted
        assert torch.equal(ours.state_dict()[name], tensor), name
    for _, input_ids, attention_mask in batches(tokenizer):
        with torch.inference_mode():
            a, b = ours(input_ids, attention_mask), same(input_ids, attention_mask)
        for x, y in zip(a.hidden_states + a.attentions, b.hidden_states + b.attentions):
            assert torch.equal(x, y)
    # the untied head is the file's output.weight, read again from it: the same ids as the safetensors' head
    assert torch.equal(generate(ours, tokenizer, SENTENCES[1], 6).ids, generate(same, tokenizer, SENTENCES[1], 6).ids)


def test_quantized_tensors_give_transformers_numbers(tiny, tmp_path):
    import gguf

    folder, _ = tiny
    kinds = {"blk.0.attn_q.weight": gguf.GGMLQuantizationType.Q8_0, "token_embd.weight": gguf.GGMLQuantizationType.F16}
    path = write_gguf(folder, tmp_path / "q.gguf", quantize=kinds, drop=("output.weight",))  # tied head
    ours, tokenizer = load_model(path)
    theirs = transformers_gguf(path)
    for kind, input_ids, attention_mask in batches(tokenizer):
        hidden, attention = largest_differences(ours, theirs, input_ids, attention_mask)
        assert hidden <= 1e-5 and attention <= 1e-6, (kind, hidden, attention)
    ids = encode(tokenizer, SENTENCES[1]).input_ids
    with torch.inference_mode():
        expected = theirs.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False)
    assert torch.equal(generate(ours, tokenizer, SENTENCES[1], 6).ids, expected)


@pytest.mark.parametrize(
    "broken, message",
    [
        (lambda data: data[: len(data) // 2], "is not a readable GGUF file"),
        (lambda data: data[:-10], "is not a readable GGUF file"),  # the last tensor's data
        (lambda data: b"not a gguf file at all", "is not a readable GGUF file"),
        (lambda data: bytes(random.Random(0).getrandbits(8) for _ in data), "is not a readable GGUF file"),
        (lambda data: b"GGUF" + bytes(random.Random(1).getrandbits(8) for _ in data[4:]), "not a readable GGUF"),
    ],
    ids=["cut short", "cut at the end", "not gguf", "random bytes", "random after the magic"],
)
def test_a_broken_file_is_one_clear_error(tiny, tmp_path, broken, message):
    path = tmp_path / "broken.gguf"
    path.write_bytes(broken(tiny[1].read_bytes()))
    with pytest.raises(ModelLoadError, match=message):
        load_model(path)


# gptneox, phi2, bert, gpt-oss: families this app runs, but transformers reads none of their GGUF files right
@pytest.mark.parametrize("architecture", ["mamba", "no-such-model", "gptneox", "phi2", "bert", "gpt-oss"])
def test_an_unsupported_architecture_is_one_clear_error(tiny, tmp_path, architecture):
    path = write_gguf(tiny[0], tmp_path / "other.gguf", architecture=architecture)
    with pytest.raises(
        ModelLoadError, match=f"'{architecture}' GGUF models are not supported: the architecture must be"
    ):
        load_model(path)


def test_a_file_naming_no_architecture_is_one_clear_error(tiny, tmp_path):
    path = tmp_path / "nameless.gguf"
    path.write_bytes(tiny[1].read_bytes().replace(b"general.architecture", b"general.architecturX", 1))
    with pytest.raises(ModelLoadError, match=r"nameless.gguf does not say which model it holds \(no general.arch"):
        load_model(path)


def test_an_unsupported_tensor_type_is_named(tiny, tmp_path):
    path = write_gguf(tiny[0], tmp_path / "ints.gguf", change={"blk.1.ffn_norm.weight": np.zeros(32, np.int32)})
    with pytest.raises(ModelLoadError, match="'blk.1.ffn_norm.weight' is stored as I32, a GGUF type this app does not"):
        load_model(path)


def test_a_tensor_type_the_gguf_package_does_not_know_is_named(tiny, tmp_path):
    """A type number past gguf's GGMLQuantizationType (a newer llama.cpp's) is named, not shown as a traceback."""
    import struct

    data = bytearray(tiny[1].read_bytes())
    name = b"blk.1.ffn_norm.weight"
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)  # then n_dims, its sizes, its type
    assert struct.unpack_from("<I", data, at)[0] == 1
    struct.pack_into("<I", data, at + 4 + 8, 99)
    path = tmp_path / "new.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="new.gguf stores a tensor as GGML type 99, which the installed gguf"):
        load_model(path)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(drop=("blk.1.ffn_up.weight",)), "the GGUF file has no tensor 'layers.1.intermediate.weight'"),
        (dict(change={"blk.0.attn_v.weight": np.zeros((8, 32), np.float32)}), "'layers.0.attention.v_proj.weight'"),
    ],
    ids=["missing", "wrong shape"],
)
def test_a_tensor_missing_or_of_the_wrong_shape_is_named(tiny, tmp_path, options, message):
    with pytest.raises(ModelLoadError, match=message):
        load_model(write_gguf(tiny[0], tmp_path / "bad.gguf", **options))


def test_a_missing_gguf_file_and_a_gguf_of_another_family_are_refused(tiny, tmp_path):
    from attention import load_bert

    with pytest.raises(ModelLoadError, match="there is no GGUF file"):
        load_model(tmp_path / "nowhere.gguf")
    with pytest.raises(ModelLoadError, match="holds a 'llama' model, not a BERT one"):
        load_bert(tiny[1])


def test_a_gguf_files_tokenizer_is_its_own_whatever_lies_beside_it(tiny, tmp_path):
    """A tokenizer.json beside the file, with a special token the file's tokenizer lacks, is not read: transformers
    would read it first were the file's folder given to it."""
    folder, path = tiny
    alone = load_model(path)[1]
    beside = tmp_path / "tiny.gguf"
    beside.write_bytes(path.read_bytes())
    other = json.loads((folder / "tokenizer.json").read_text())
    token = dict(id=len(alone) - 1, content="ZZZ", single_word=False, lstrip=False, rstrip=False, normalized=False)
    other["added_tokens"].append({**token, "special": True})
    (tmp_path / "tokenizer.json").write_text(json.dumps(other))
    tokenizer = load_model(beside)[1]
    assert "ZZZ" not in tokenizer.tokenize("The cat sat ZZZ") and alone.tokenize("ZZZ") == tokenizer.tokenize("ZZZ")
    assert tokenizer("The cat sat ZZZ")["input_ids"] == alone("The cat sat ZZZ")["input_ids"]


@pytest.mark.parametrize(
    "more, message",
    [
        (
            lambda w: w.add_rope_scaling_type(__import__("gguf").RopeScalingType.YARN),
            r"rotary positions \('yarn'\)",
        ),
        (lambda w: w.add_tensor("rope_freqs.weight", np.ones(4, np.float32)), r"rotary frequencies \(rope_freqs\)"),
    ],
    ids=["rope scaling", "rope_freqs"],
)
def test_scaled_rotary_positions_are_refused(tiny, tmp_path, more, message):
    with pytest.raises(ModelLoadError, match=message):
        load_model(write_gguf(tiny[0], tmp_path / "scaled.gguf", more=more))


def test_half_precision_weights_are_the_safetensors_ones_cast(tiny):
    folder, path = tiny
    ours, _ = load_model(path, dtype="bfloat16")
    same, _ = load_model(folder, dtype="bfloat16")
    assert ours.load_report.dtype == "bfloat16"
    for name, tensor in same.state_dict().items():
        assert tensor.dtype == torch.bfloat16 and torch.equal(ours.state_dict()[name], tensor), name
