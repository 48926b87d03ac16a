"""T5 GGUF files (attention/load/gguf_archs.py's "t5"), written here from tiny random transformers checkpoints as
llama.cpp's convert_hf_to_gguf.py writes them (test_gguf.write_gguf): in F32 each is the same encoder-decoder as
its safetensors, weight for weight; with quantized and half-precision tensors it gives the numbers of
transformers' own GGUF loading of the same file, every hidden state and every map (self- and cross-attention)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import make_seq2seq
from test_gguf import write_gguf
from test_seq2seq import HIDDEN_TOL, MAP_TOL, TARGETS, TEXTS, decoder_batch, max_differences

from attention import ModelLoadError, load_model

# v1.0 (ReLU) and v1.1 / Flan-T5 (gated GELU, heads 4·12 wide ≠ d_model);
# relative distances bucketed up to 128, llama.cpp's reach, which the file does not hold; 304 embedding rows, room
# for the <|endoftext|> transformers' byte-level GGUF tokenizer adds to the 300 of the BPE
CASES = {
    "t5": dict(relative_attention_max_distance=128, vocab_size=304),
    "t5-gated": dict(relative_attention_max_distance=128, vocab_size=304),
}
# what transformers' GGUF reading leaves out: it reads every T5 file as Flan-T5's gated feed-forward, with a ReLU,
# and the vocabulary as the tokenizer's tokens (not the embeddings' rows); it reads no decoder deeper than the
# encoder (its tensor names stop at block_count), so its files have both 2 deep
UNREAD = {
    "t5": dict(feed_forward_proj="relu", is_gated_act=False, vocab_size=304),
    "t5-gated": dict(feed_forward_proj="gated-gelu", dense_act_fn="gelu_new", vocab_size=304),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """folders(name, decoder layers) -> the tiny safetensors checkpoint (2 encoder layers), made once."""
    made = {}

    def folder(name: str, decoder: int):
        if (name, decoder) not in made:
            # an epsilon float32 holds exactly: the file keeps float32 metadata, config.json a float64
            made[name, decoder] = make_seq2seq(
                tmp_path_factory.mktemp(name),
                name,
                layer_norm_epsilon=2.0**-20,
                num_decoder_layers=decoder,
                **CASES[name],
            )
        return made[name, decoder]

    return folder


def transformers_t5_gguf(path, **unread):
    """transformers' T5 on a GGUF file, eager attention, read by its GGUF loader (test_gguf.transformers_gguf's
    way, for an encoder-decoder); `unread`: config values its reading of the file leaves out or gets wrong."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name, **unread)
    model = AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager").eval()
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    loaded = model.load_state_dict(tensors, strict=False)
    tied = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"}
    assert not loaded.unexpected_keys and set(loaded.missing_keys) <= tied, loaded
    model.tie_weights()
    model.set_input_embeddings(model.shared)  # both stacks read the shared table (untied, tie_weights leaves them)
    return model


@pytest.mark.parametrize("name", list(CASES))
def test_an_f32_t5_gguf_is_the_same_model_as_its_safetensors(folders, tmp_path, name):
    """A decoder deeper than its encoder: decoder_block_count, which a newer converter writes, is read."""
    folder = folders(name, 3)
    ours, tokenizer = load_model(write_gguf(folder, tmp_path / "f32.gguf", "t5"))
    same, _ = load_model(folder)
    assert ours.config == same.config
    for key, tensor in same.state_dict().items():
        assert torch.equal(ours.state_dict()[key], tensor), key
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    decoder = decoder_batch(same, tokenizer, TARGETS)
    with torch.inference_mode():
        a = ours(
            batch["input_ids"], batch["attention_mask"], decoder_input_ids=decoder[0], decoder_attention_mask=decoder[1]
        )
        b = same(
            batch["input_ids"], batch["attention_mask"], decoder_input_ids=decoder[0], decoder_attention_mask=decoder[1]
        )
    for x, y in zip(a, b):
        for u, v in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
            assert torch.equal(u, v)


@pytest.mark.parametrize("name", list(CASES))
def test_quantized_t5_tensors_give_transformers_numbers(folders, tmp_path, name):
    import gguf

    q8 = gguf.GGMLQuantizationType.Q8_0  # rows of whole 32-value blocks: d_model 32
    kinds = {"enc.blk.0.attn_q.weight": q8, "dec.blk.1.cross_attn_v.weight": q8}
    path = write_gguf(
        folders(name, 2),
        tmp_path / "q.gguf",
        "t5",
        quantize={**kinds, "token_embd.weight": gguf.GGMLQuantizationType.F16},
    )
    ours, tokenizer = load_model(path)
    theirs = transformers_t5_gguf(path, **UNREAD[name])
    single = tokenizer(TEXTS[:1], return_tensors="pt")
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    for ids, mask, targets in (
        (single["input_ids"], None, TARGETS[:1]),
        (batch["input_ids"], batch["attention_mask"], TARGETS),
    ):
        decoder_ids, decoder_mask = decoder_batch(ours, tokenizer, targets)
        hidden, maps = max_differences(ours, theirs, ids, mask, decoder_ids, decoder_mask)
        assert hidden <= HIDDEN_TOL and maps <= MAP_TOL, (len(targets), hidden, maps)


def test_a_relative_bias_in_every_layer_is_refused_by_name(folders, tmp_path):
    """UMT5 (a T5 file whose general.name says so) has a relative-position bias in every layer, where T5 keeps one
    in the first: the second layer's has no place in this T5, and is named."""
    bias = np.zeros((8, 4), np.float32)  # buckets × heads
    path = write_gguf(
        folders("t5", 2), tmp_path / "u.gguf", "t5", more=lambda w: w.add_tensor("enc.blk.1.attn_rel_b.weight", bias)
    )
    with pytest.raises(ModelLoadError, match="has a tensor this T5 model does not know: 'enc.blk.1.attn_rel_b.weight'"):
        load_model(path)


@pytest.mark.parametrize("head", ["tied", "output.weight"])
def test_a_t5_gguf_writes_as_transformers_does_on_the_same_file(folders, tmp_path, head):
    """The LM head is the file's: the shared embeddings (scaled by d_model^-0.5 first, T5's tied head) where it has
    no output.weight, else that tensor (unscaled), as transformers reads the file: the same greedy ids, the same
    top-5 probabilities."""
    from attention import generate

    folder = folders("t5-gated", 2)
    table = np.random.default_rng(0).normal(0.0, 0.5, (304, 32)).astype(np.float32)
    more = None if head == "tied" else (lambda w: w.add_tensor("output.weight", table))
    path = write_gguf(folder, tmp_path / "w.gguf", "t5", more=more)
    ours, tokenizer = load_model(path)
    # transformers reads a T5 file with output.weight as tied still, and that tensor then overwrites the shared
    # embeddings it is tied to: told it is not tied, it reads the file as llama.cpp runs it
    untied = {} if head == "tied" else dict(tie_word_embeddings=False)
    theirs = transformers_t5_gguf(path, **UNREAD["t5-gated"], **untied)
    assert torch.equal(theirs.lm_head.weight, theirs.shared.weight if head == "tied" else torch.from_numpy(table))
    written = generate(ours, tokenizer, TEXTS[1], max_new_tokens=5)
    enc = tokenizer(TEXTS[1], return_tensors="pt")
    with torch.inference_mode():
        expected = theirs.generate(
            input_ids=enc["input_ids"],
            attention_mask=enc["attention_mask"],
            do_sample=False,
            num_beams=1,
            max_new_tokens=5,
            output_scores=True,
            return_dict_in_generate=True,
        )
    assert torch.equal(written.ids, expected.sequences), (written.ids, expected.sequences)
    probs = torch.cat(expected.scores).softmax(-1).topk(5)
    torch.testing.assert_close(written.top_probs, probs.values, rtol=1e-4, atol=1e-5)


def unigram_fields(writer, folder, bos: int, eos: int) -> None:
    """llama.cpp's T5 tokenizer ("t5": SentencePiece unigram): <pad>, </s>, <unk>, scored pieces, and [PAD<id>]
    placeholders up to the embeddings' rows (the converter's padding, which transformers turns into the first
    <extra_id_N>)."""
    pieces = ["▁", *"Thecatsonm.", "▁T", "he", "▁The", "at", "▁c", "▁cat", "▁s", "▁sat", "▁o", "▁on", "▁t", "▁the"]
    pieces += ["▁m", "▁mat"]
    tokens = ["<pad>", "</s>", "<unk>", *pieces]
    blanks = 304 - len(tokens)
    writer.add_tokenizer_model("t5")
    writer.add_token_list(tokens + [f"[PAD{len(tokens) + i}]" for i in range(blanks)])
    writer.add_token_scores([0.0] * 3 + [len(piece) - 10.0 for piece in pieces] + [0.0] * blanks)
    writer.add_token_types([3, 3, 2] + [1] * len(pieces) + [5] * blanks)  # control, unknown, normal, unused
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(2)
    writer.add_add_eos_token(True)


def test_a_t5_file_with_llama_cpps_unigram_tokenizer_loads_it_as_transformers_does(tmp_path):
    """A T5 file's own tokenizer (llama.cpp's unigram vocabulary, not a BPE) is the T5Tokenizer AutoTokenizer
    builds from the file: the same ids (</s> last), its placeholders within the model's 304 rows; the model writes
    from <pad>, its decoder's start."""
    from transformers import AutoTokenizer

    from attention import generate

    folder = make_seq2seq(
        tmp_path / "t5",
        "t5-gated",
        **dict(CASES["t5-gated"], num_decoder_layers=2, pad_token_id=0, decoder_start_token_id=0),
    )
    (tmp_path / "file").mkdir()  # apart from the folder's tokenizer.json
    path = write_gguf(folder, tmp_path / "file" / "u.gguf", "t5", tokenizer=unigram_fields)
    ours, tokenizer = load_model(path)
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    assert type(tokenizer).__name__ == type(theirs).__name__ == "T5Tokenizer" and len(tokenizer) == 304
    for text in TEXTS:
        ids = tokenizer(text)["input_ids"]
        assert ids == theirs(text)["input_ids"] and ids[-1] == 1, text
    written = generate(ours, tokenizer, TEXTS[1], max_new_tokens=3)
    assert written.tokens[0] == "<pad>" and 1 <= written.new_ids.size(1) <= 3
