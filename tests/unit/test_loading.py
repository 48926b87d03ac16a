"""Loading: sources, the state-dict map, strictness and clear failures."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest
import torch
from conftest import ROOT, make_tiny
from safetensors.torch import load_file, save_file

from attention import BertConfig, ConfigError, ModelLoadError, load_bert, map_state_dict
from attention.bert import BertModel


def test_default_is_the_bundled_minilm(minilm):
    model, tokenizer = minilm
    c = model.config
    assert (c.num_hidden_layers, c.num_attention_heads, c.hidden_size) == (6, 12, 384)
    assert tokenizer.is_fast and tokenizer.vocab_size == 30522
    assert model.load_report.weights_file == "model.safetensors"
    assert set(model.load_report.ignored_keys) == {
        "pooler.dense.weight",
        "pooler.dense.bias",
        "embeddings.position_ids",
    }
    assert not model.training and not any(p.requires_grad for p in model.parameters())


def test_every_parameter_is_mapped_from_the_checkpoint(minilm):
    model, _ = minilm
    checkpoint = load_file(os.path.join(model.load_report.path, "model.safetensors"))
    mapped, ignored = map_state_dict(checkpoint)
    assert set(mapped) == set(model.state_dict())
    assert len(mapped) + len(ignored) == len(checkpoint)
    ours = model.state_dict()
    assert torch.equal(
        ours["layers.3.attention.q_proj.weight"], checkpoint["encoder.layer.3.attention.self.query.weight"]
    )
    assert torch.equal(ours["layers.5.output_norm.bias"], checkpoint["encoder.layer.5.output.LayerNorm.bias"])


def test_config_is_frozen_and_rejects_other_models(tmp_path):
    config = BertConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.hidden_size = 10
    with pytest.raises(ConfigError, match="gpt2"):
        BertConfig.from_dict({"model_type": "gpt2"})
    with pytest.raises(ConfigError, match="relative_key"):
        BertConfig.from_dict({"model_type": "bert", "position_embedding_type": "relative_key"})
    with pytest.raises(ConfigError, match="hidden_size"):
        BertConfig.from_dict({"model_type": "bert", "hidden_size": "big"})
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        BertConfig.from_json(bad)


@pytest.mark.parametrize(
    "model_class, head", [("BertForMaskedLM", "cls.predictions"), ("BertForSequenceClassification", "classifier")]
)
def test_task_checkpoints_with_bert_prefix(tmp_path, model_class, head):
    import transformers

    folder = make_tiny(tmp_path / model_class, model_class=model_class)
    model, tokenizer = load_bert(folder)
    assert any(k.startswith(head) for k in model.load_report.ignored_keys)
    reference = getattr(transformers, model_class).from_pretrained(str(folder), attn_implementation="eager").bert.eval()
    ids = tokenizer("the cat sat on the mat", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = reference(ids, output_attentions=True)
        ours = model(ids)
    torch.testing.assert_close(ours.last_hidden_state, expected.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.attentions[1], expected.attentions[1], atol=1e-6, rtol=0)


def test_pytorch_bin_checkpoint(tmp_path, tiny_dir):
    folder = make_tiny(tmp_path / "bin", safe=False)
    assert (folder / "pytorch_model.bin").exists() and not (folder / "model.safetensors").exists()
    from_bin, _ = load_bert(folder)
    from_safetensors, _ = load_bert(tiny_dir)  # same seed, same weights
    assert from_bin.load_report.weights_file == "pytorch_model.bin"
    for key, value in from_safetensors.state_dict().items():
        assert torch.equal(from_bin.state_dict()[key], value), key


def test_old_layernorm_names_gamma_beta():
    mapped, _ = map_state_dict(
        {
            "bert.encoder.layer.0.output.LayerNorm.gamma": torch.ones(4),
            "bert.encoder.layer.0.output.LayerNorm.beta": torch.zeros(4),
        }
    )
    assert set(mapped) == {"layers.0.output_norm.weight", "layers.0.output_norm.bias"}


def tiny_with_edited_weights(folder, edit):
    """A tiny checkpoint whose safetensors file `edit` (a function of the tensor dict) has changed."""
    make_tiny(folder)
    weights = load_file(str(folder / "model.safetensors"))
    edit(weights)
    save_file(weights, str(folder / "model.safetensors"))
    return folder


def test_missing_tensor_names_the_key(tmp_path):
    folder = tiny_with_edited_weights(
        tmp_path / "missing", lambda w: w.pop("encoder.layer.1.attention.self.key.weight")
    )
    with pytest.raises(ModelLoadError, match=r"layers\.1\.attention\.k_proj\.weight"):
        load_bert(folder)


def test_wrong_shape_names_the_key(tmp_path):
    folder = tiny_with_edited_weights(
        tmp_path / "shape", lambda w: w.update({"encoder.layer.0.intermediate.dense.weight": torch.zeros(36, 32)})
    )
    with pytest.raises(ModelLoadError, match=r"layers\.0\.intermediate\.weight.*\(36, 32\).*\(37, 32\)"):
        load_bert(folder)


def test_unknown_tensor_is_an_error(tmp_path):
    folder = tiny_with_edited_weights(
        tmp_path / "extra", lambda w: w.update({"encoder.layer.0.attention.self.rotary.weight": torch.zeros(3)})
    )
    with pytest.raises(ModelLoadError, match="rotary"):
        load_bert(folder)


def test_layer_count_mismatch(tmp_path):
    folder = make_tiny(tmp_path / "layers")
    config = json.loads((folder / "config.json").read_text())
    config["num_hidden_layers"] = 1
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="num_hidden_layers"):
        load_bert(folder)


def test_bad_sources_give_one_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="no folder"):
        load_bert(tmp_path / "does-not-exist")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_bert(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    with pytest.raises(ModelLoadError, match="roberta"):
        load_bert(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ModelLoadError, match="no weights"):
        load_bert(tmp_path)
    with pytest.raises(ModelLoadError, match="no model given"):
        load_bert("   ")


def test_corrupted_safetensors(tmp_path):
    folder = make_tiny(tmp_path / "corrupt")
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="damaged"):
        load_bert(folder)


class _CreatesFile:
    """Unpickling this calls open(path, 'w'): code execution on load."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_payload_in_bin_never_runs(tmp_path):
    folder = make_tiny(tmp_path / "evil", safe=False)
    marker = tmp_path / "pwned"
    torch.save({"embeddings.word_embeddings.weight": _CreatesFile(str(marker))}, folder / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="could not be loaded safely"):
        load_bert(folder)
    assert not marker.exists()


def test_missing_tokenizer_is_clear(tmp_path):
    folder = make_tiny(tmp_path / "notok")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    with pytest.raises(ModelLoadError, match="no tokenizer files"):
        load_bert(folder)


def test_tokenizer_larger_than_the_vocabulary(tmp_path, minilm):
    folder = make_tiny(tmp_path / "bigtok")
    _, tokenizer = minilm
    tokenizer.save_pretrained(str(folder))  # 30522 tokens for a 99-token model
    with pytest.raises(ModelLoadError, match="30522 tokens but the model only 99"):
        load_bert(folder)


def test_hub_id_offline_is_one_sentence(tmp_path):
    """In a fresh process, offline and with an empty cache: one clear line, no traceback."""
    code = (
        "from attention import load_bert, ModelLoadError\n"
        "try:\n    load_bert('bert-base-uncased')\n"
        "except ModelLoadError as e:\n    print('ERROR:', e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    message = run.stdout.strip()
    assert message.startswith("ERROR:") and "bert-base-uncased" in message and "offline" in message
    assert "Traceback" not in run.stdout + run.stderr
    # the command it names is one the install provides, and it takes the verb and the id as written
    found = re.search(r"\((\S+) (\S+) bert-base-uncased\)", message)
    assert found, message
    command, verb = found.groups()
    assert command in {e.name for e in distribution("huggingface_hub").entry_points}
    assert shutil.which(command), f"{command} is not on PATH"
    usage = subprocess.run([command, verb, "--help"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and "REPO_ID" in usage.stdout


def test_hub_id_from_the_local_cache(tmp_path, tiny_dir):
    """A hub id already in the Hugging Face cache loads offline."""
    cache = tmp_path / "hf" / "hub" / "models--someone--tiny-bert"
    snapshot = cache / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for f in tiny_dir.iterdir():
        (snapshot / f.name).write_bytes(f.read_bytes())
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text("0" * 40)
    code = (
        "from attention import load_bert\n"
        "m, t = load_bert('someone/tiny-bert')\n"
        "print(m.config.hidden_size, m.load_report.source)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["32", "someone/tiny-bert"]


def test_model_refuses_too_many_positions(minilm):
    model, _ = minilm
    with pytest.raises(ValueError, match="512 positions"):
        model(torch.zeros(1, 513, dtype=torch.long))


def test_built_model_has_no_transformers_classes():
    import inspect

    import attention

    for module in (
        attention.core.mha,
        attention.bert,
        attention.config,
        attention.load.loading,
        attention.load.checkpoint,
        attention.load.convert,
        attention.load.sources,
    ):
        source = inspect.getsource(module)
        assert "from transformers import Bert" not in source and "modeling_bert" not in source
    assert all(
        not type(m).__module__.startswith("transformers")
        for m in BertModel(
            BertConfig(hidden_size=8, num_attention_heads=2, num_hidden_layers=1, intermediate_size=8, vocab_size=10)
        ).modules()
    )


def files_under(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


def test_bad_sources_write_nothing_outside_the_cache(tmp_path):
    """Each bad source, loaded in a fresh process whose home, temp and working folders are watched:
    one clear error each, and no file created or changed anywhere but the caches."""
    sources = tmp_path / "sources"
    (sources / "no-config").mkdir(parents=True)
    (sources / "roberta").mkdir()
    (sources / "roberta" / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    truncated = make_tiny(sources / "truncated")
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    evil = make_tiny(sources / "evil", safe=False)
    torch.save({"embeddings.word_embeddings.weight": _CreatesFile(str(tmp_path / "pwned"))}, evil / "pytorch_model.bin")
    names = [
        str(sources / "missing"),
        str(sources / "no-config"),
        str(sources / "roberta"),
        str(truncated),
        str(evil),
        "bert-base-uncased",
    ]
    home, work = tmp_path / "home", tmp_path / "work"
    for folder in (home, work, home / "tmp"):
        folder.mkdir(parents=True, exist_ok=True)
    before = files_under(tmp_path)
    code = (
        "import sys\nfrom attention import load_bert, ModelLoadError\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n        load_bert(name)\n        print('LOADED', name)\n"
        "    except ModelLoadError as e:\n        print('ERROR:', str(e).splitlines()[0])\n"
    )
    env = {
        **os.environ,
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "HF_HOME": str(home / "cache" / "hf"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    run = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == len(names) and all(line.startswith("ERROR:") for line in lines), run.stdout
    after = files_under(tmp_path)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    assert {p for p in changed if not p.startswith("home/cache/")} == set()
