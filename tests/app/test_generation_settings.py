"""A model's generation settings are read once, when it is loaded (processors.attach): a writing follows what the
checkpoint's generation_config.json said then, whatever the folder holds later, and reads no file for them."""

import json

import pytest
import torch
from families import make_family, make_seq2seq

import attention.writing.processors
from attention import generate, load_model
from attention.config import ModelConfig
from attention.errors import ModelLoadError
from attention.models import build_model
from attention.writing.processors import Settings, settings_of

PROMPT = "The animal didn't cross the street because"
N_NEW = 8


def edit(folder, **values):
    path = folder / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


@pytest.fixture
def reads(monkeypatch):
    """The JSON files processors.py reads, by name, from here on."""
    seen: list[str] = []
    read = attention.writing.processors.read_json

    def counted(path):
        seen.append(str(path).rsplit("/", 1)[-1])
        return read(path)

    monkeypatch.setattr(attention.writing.processors, "read_json", counted)
    return seen


def test_a_causal_model_keeps_the_end_of_sequence_it_was_loaded_with(tmp_path):
    folder = make_family(tmp_path / "gpt2", "gpt2")
    model, tokenizer = load_model(folder)
    plain = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    first = int(plain.new_ids[0, 0])
    edit(folder, eos_token_id=[0, first])  # after the load: this model does not see it
    assert torch.equal(generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW).ids, plain.ids)
    assert plain.new_ids.size(1) == N_NEW
    again, tokenizer = load_model(folder)  # a new load reads the new file, and stops at its end of sequence
    assert generate(again, tokenizer, PROMPT, max_new_tokens=N_NEW).new_ids.tolist() == [[first]]
    assert again.generation.eos_ids == (0, first) and model.generation != again.generation


def test_an_encoder_decoder_keeps_the_start_token_it_was_loaded_with(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart", seed=2)
    model, tokenizer = load_model(folder)
    plain = generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW)
    start = int(plain.ids[0, 0])
    edit(folder, decoder_start_token_id=start + 3, forced_bos_token_id=7)
    assert torch.equal(generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW).ids, plain.ids)
    (folder / "generation_config.json").unlink()  # gone: still the settings read at load
    assert torch.equal(generate(model, tokenizer, PROMPT, max_new_tokens=N_NEW).ids, plain.ids)
    edit_back = {**json.loads((folder / "config.json").read_text()), "decoder_start_token_id": start + 3}
    (folder / "config.json").write_text(json.dumps({**edit_back, "forced_bos_token_id": 7}))
    again, tokenizer = load_model(folder)  # read again: config.json's values now, without a generation config
    ids = generate(again, tokenizer, PROMPT, max_new_tokens=N_NEW).ids[0].tolist()
    assert ids[:2] == [start + 3, 7]


def test_each_writing_reads_no_settings_file(tmp_path, reads):
    causal = make_family(tmp_path / "gpt2", "gpt2")
    model, tokenizer = load_model(causal)
    assert reads == ["generation_config.json"]  # once, at load
    for _ in range(3):
        generate(model, tokenizer, PROMPT, max_new_tokens=2)
    seq2seq = make_seq2seq(tmp_path / "bart", "bart")
    model, tokenizer = load_model(seq2seq)
    for _ in range(3):
        generate(model, tokenizer, PROMPT, max_new_tokens=2)
    assert reads == ["generation_config.json"] * 2


def test_the_pages_forced_target_reads_no_settings_file(tmp_path, reads):
    from ui.compute.runs import get_writing

    source = str(make_seq2seq(tmp_path / "bart", "bart"))
    first = get_writing(source, "zq zq", "qz qz")  # the model loaded: its settings read once
    assert reads == ["generation_config.json"]
    forced = get_writing(source, "zq zq", "qz")
    assert reads == ["generation_config.json"]
    assert (
        forced.decoder_ids[0, 0] == first.decoder_ids[0, 0] == settings_of(load_model(source)[0]).decoder_start_token_id
    )


def test_an_encoder_reads_no_generation_config(tmp_path, reads):
    model, _ = load_model(make_family(tmp_path / "bert", "bert"))
    assert reads == [] and model.generation == Settings.of_config(model.config)


def test_a_model_built_from_a_config_has_its_configs_settings():
    config = ModelConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    seq2seq = ModelConfig(**{**config.__dict__, "is_encoder_decoder": True, "decoder_start_token_id": 2})
    for built, start in ((build_model(config), None), (build_model(seq2seq), 2)):
        assert built.generation == Settings(decoder_start_token_id=start) == settings_of(built)
        del built.generation  # built from its class alone: the same, from its config
        assert settings_of(built) == Settings(decoder_start_token_id=start)


@pytest.mark.parametrize(
    "text, said", [('{"repetition_penalty": "high"}', "of the wrong kind"), ("{not json", "cannot read")]
)
def test_a_broken_generation_config_is_one_clear_load_error(tmp_path, text, said):
    folder = make_family(tmp_path / "gpt2", "gpt2")
    (folder / "generation_config.json").write_text(text)
    with pytest.raises(ModelLoadError, match=said) as caught:
        load_model(folder)
    assert "generation_config.json" in str(caught.value)
