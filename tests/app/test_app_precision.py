"""The operator's device and dtype (ATTENTION_DEVICE, ATTENTION_DTYPE) through the app: a bfloat16 model
is the one every view uses, and draws; its MLM head works; a GPU asked for on a machine without one is
one sentence on the page; a bad value is ignored with a warning in the server log.

The settings are read once per process (ui/serve/settings.py); AppTest runs the page in this process, so the
tests set ui.compute.models' copies, as test_caps.py does for the caps."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import ROOT, make_tiny
from families import make_family
from test_app import decode, head_figure, no_errors, start, submit
from test_app_families import every_view_draws as each_view_draws

import ui.compute.models as cache
from attention import ModelLoadError, load_model
from attention.analysis.ablation import ablate
from attention.mlm import load_mlm_head
from attention.runs.run import run_sentence
from ui.compute.stores import forget_everything
from ui.page import registry

# bfloat16 keeps 8 bits of mantissa: a map computed from bfloat16 weights (its softmax in float32) is
# within about 1e-2 of the float32 model's; the bundled model's maps differ by up to ~9e-3 on this text.
BF16_TOL = 2e-2
# sentences of their own: the app's result stores are keyed by the source and text, not the dtype
TEXT = "A bfloat16 model reads this sentence about the tired animal in the street."
LLAMA_TEXT = "the cat sat on the mat because it was tired"


def forget_results() -> None:
    """Drop every cached model and result of this process: the stores are keyed by source and input, as
    a server's dtype never changes while it runs, so results of one dtype must not meet tests of another."""
    forget_everything()
    cache.LOADED.clear()


@pytest.fixture
def bfloat16(monkeypatch):
    forget_results()
    monkeypatch.setattr(cache, "DTYPE", "bfloat16")
    yield
    forget_results()


def views(at) -> list[str]:
    return list(at.segmented_control(key="view").options)


def every_view_draws(at, kind: str = "encoder") -> None:
    assert views(at) == registry.labels({kind})  # the views for this kind of model, and only those
    each_view_draws(at)


def caption_of(at) -> str:
    return next(c.value for c in at.sidebar.caption if c.value.startswith("In use:"))


def test_the_bundled_model_in_bfloat16_is_the_one_every_view_uses(bfloat16):
    at = start(s=TEXT, layer="2", head="3")
    no_errors(at)
    assert caption_of(at).endswith(", bfloat16 weights on cpu"), caption_of(at)
    model, _ = cache.get_model("")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    shown = decode(head_figure(at)["data"][0]["z"])
    fp32, tokenizer = load_model(None)
    expected = run_sentence(fp32, tokenizer, TEXT).attentions[2, 3]
    difference = np.abs(shown - expected)
    assert shown.shape == expected.shape
    assert difference.max() <= BF16_TOL  # the same model ...
    assert difference.max() > 1e-4  # ... with bfloat16 weights, not the float32 ones
    np.testing.assert_allclose(shown, run_sentence(model, tokenizer, TEXT).attentions[2, 3], atol=1e-6)
    every_view_draws(at)


def test_a_tiny_llama_in_bfloat16_draws_every_view(bfloat16, tmp_path):
    folder = make_family(tmp_path / "llama", "llama", num_key_value_heads=2)
    at = start(model=str(folder), s=LLAMA_TEXT, layer="1", head="2")
    no_errors(at)
    assert "— llama" in caption_of(at) and caption_of(at).endswith(", bfloat16 weights on cpu")
    shown = decode(head_figure(at)["data"][0]["z"])
    ours, tokenizer = load_model(folder)
    expected = run_sentence(ours, tokenizer, LLAMA_TEXT).attentions[1, 2]
    assert np.abs(shown - expected).max() <= BF16_TOL and np.abs(shown - expected).max() > 0
    every_view_draws(at, "causal")


def test_the_mlm_head_of_a_bfloat16_model_guesses_in_the_ablation_view(bfloat16, tmp_path):
    folder = make_tiny(tmp_path / "mlm", "BertForMaskedLM")
    sentence = "the cat sat on the [MASK] ."
    model, tokenizer = load_model(folder, dtype="bfloat16")
    head = load_mlm_head(model)  # tied to the bfloat16 embeddings: the check compares in their dtype
    assert head is not None and {p.dtype for p in head.parameters()} == {torch.bfloat16}
    enc = tokenizer(sentence, return_tensors="pt")
    mask = np.ones((2, 4), dtype=np.float32)
    mask[1, 2] = 0
    expected = ablate(
        model,
        enc["input_ids"],
        enc["attention_mask"],
        enc["token_type_ids"],
        head_mask=mask,
        mlm_head=head,
        tokenizer=tokenizer,
    ).predictions
    fp32, _ = load_model(folder)
    full = ablate(
        fp32,
        enc["input_ids"],
        enc["attention_mask"],
        enc["token_type_ids"],
        head_mask=mask,
        mlm_head=load_mlm_head(fp32),
        tokenizer=tokenizer,
    ).predictions
    assert abs(expected.before[0][1] - full.before[0][1]) <= BF16_TOL  # the same head, rounded

    at = start(model=str(folder), view="ablation", layer="1", head="2")
    submit(at, sentence)
    no_errors(at)
    assert not any("masked-LM head does not load" in c.value.replace("\\", "") for c in at.caption)
    table = at.dataframe[-1].value
    assert list(table["before"]) == [token for token, _ in expected.before]
    assert list(table["after"]) == [token for token, _ in expected.after]
    np.testing.assert_allclose(table["p after"], [round(p, 4) for _, p in expected.after], atol=1e-4)


def test_a_checkpoint_that_stores_its_tied_decoder_loads_in_bfloat16_and_an_untied_one_does_not(tmp_path):
    from test_ablation import mlm_with_edited_weights

    def tied(weights):
        weights["cls.predictions.decoder.weight"] = weights["bert.embeddings.word_embeddings.weight"].clone()

    def untied(weights):
        weights["cls.predictions.decoder.weight"] = weights["bert.embeddings.word_embeddings.weight"] + 0.5

    model, _ = load_model(mlm_with_edited_weights(tmp_path / "tied", tied), dtype="bfloat16")
    head = load_mlm_head(model)  # the float32 decoder equals the embeddings once cast to their dtype
    assert head.decoder.weight is model.embeddings.word_embeddings.weight and head.bias.dtype == torch.bfloat16
    model, _ = load_model(mlm_with_edited_weights(tmp_path / "untied", untied), dtype="bfloat16")
    with pytest.raises(ModelLoadError, match="differs from the word embeddings"):
        load_mlm_head(model)


# ---- the device ----------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_a_gpu_asked_for_on_a_machine_without_one_is_one_sentence_on_the_page(monkeypatch):
    monkeypatch.setattr(cache, "DEVICE", "cuda")
    at = start(s=TEXT)
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert errors[0].startswith(
        "This server is set to run the model on 'cuda' (`ATTENTION_DEVICE`), but torch "
        "finds no CUDA GPU on this machine"
    ), errors[0]
    assert "Traceback" not in errors[0] and "Something went wrong" not in errors[0]
    assert [e for e in at.sidebar.error]  # in the model box
    with pytest.raises(ModelLoadError, match="ATTENTION_DEVICE"):  # outside a page: the same sentence, raised
        cache.get_model("")


def test_the_device_and_dtype_reach_load_model(monkeypatch):
    asked = []
    monkeypatch.setattr(cache, "_load_on_device", lambda *args: asked.append(args) or ("model", "tokenizer"))
    monkeypatch.setattr(cache, "DEVICE", "cpu")
    monkeypatch.setattr(cache, "DTYPE", "float16")
    cache._load_model("x", True, False)
    monkeypatch.setattr(cache, "DEVICE", "auto")
    monkeypatch.setattr(cache, "DTYPE", "auto")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cache._load_model("x", True, False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # "auto" takes a GPU when there is one
    cache._load_model("x", True, False)
    assert asked == [
        ("x", True, False, "cpu", "float16"),
        ("x", True, False, "cpu", "auto"),
        ("x", True, False, "cuda", "auto"),
    ]


def test_the_caption_names_the_device_and_dtype_unless_cpu_float32():
    from attention.load.loading import LoadReport

    def report(device, dtype):
        return LoadReport("x", "x", "model.safetensors", (), device=device, dtype=dtype)

    assert cache.precision_caption(report("cpu", "float32")) == ""
    assert cache.precision_caption(report("cuda:0", "bfloat16")) == ", bfloat16 weights on cuda:0"
    assert cache.precision_caption(report("cuda:0", "float32")) == ", float32 weights on cuda:0"


# ---- the settings --------------------------------------------------------------------------------


def test_the_device_and_dtype_settings_take_their_words():
    from ui.serve.settings import read

    values, warnings = read({"ATTENTION_DEVICE": " CUDA:1 ", "ATTENTION_DTYPE": "bf16"})
    assert not warnings and values["device"] == "cuda:1" and values["dtype"] == "bfloat16"
    values, warnings = read({})
    assert not warnings and values["device"] == "auto" and values["dtype"] == "auto"  # a GPU if any, else the CPU
    assert read({"ATTENTION_DEVICE": "auto", "ATTENTION_DTYPE": "FLOAT16"})[0]["dtype"] == "float16"


@pytest.mark.parametrize(
    "var, bad, default",
    [
        ("ATTENTION_DTYPE", "int8", "auto"),
        ("ATTENTION_DTYPE", "bf-16", "auto"),
        ("ATTENTION_DEVICE", "gpu", "auto"),
        ("ATTENTION_DEVICE", "cuda:x", "auto"),
        ("ATTENTION_DEVICE", "mps", "auto"),
    ],
)
def test_a_bad_device_or_dtype_is_ignored_with_a_warning(var, bad, default):
    from ui.serve.settings import read

    name = {"ATTENTION_DTYPE": "dtype", "ATTENTION_DEVICE": "device"}[var]
    values, warnings = read({var: bad})
    assert values[name] == default
    assert len(warnings) == 1 and warnings[0].startswith(f"{var}={bad!r} ignored:")
    assert warnings[0].endswith(f"using the default {default}")


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_the_server_logs_a_bad_dtype_and_uses_the_default():
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTENTION_")}
    show = "import ui.compute.models as c; print(c.DEVICE, c.DTYPE)"
    done = subprocess.run(
        [sys.executable, "-c", show], cwd=ROOT, env={**env, "ATTENTION_DTYPE": "int8"}, capture_output=True, text=True
    )
    assert done.stdout.split() == ["auto", "auto"], done.stderr
    assert "ATTENTION_DTYPE='int8' ignored: the weights' dtype must be one of" in done.stderr
    done = subprocess.run(
        [sys.executable, "-c", show],
        cwd=ROOT,
        env={**env, "ATTENTION_DTYPE": "bf16", "ATTENTION_DEVICE": "cuda:0"},
        capture_output=True,
        text=True,
    )
    assert done.stdout.split() == ["cuda:0", "bfloat16"] and "ignored" not in done.stderr, done.stderr
    check = subprocess.run(
        [sys.executable, "-m", "ui.serve.settings"],
        cwd=ROOT,
        env={**env, "ATTENTION_DEVICE": "gpu"},
        capture_output=True,
        text=True,
    )
    assert check.returncode == 1 and "ATTENTION_DEVICE=auto (default) (the value given is ignored)" in check.stdout
