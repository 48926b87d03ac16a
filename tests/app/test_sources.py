"""A server open to strangers: the model box locked to the operator's list, the same refusal for every
other source whatever exists on disk, no downloads and no .bin files unless the operator allows them."""

from __future__ import annotations

import os

import pytest
from test_app import no_errors, start

from attention import ModelLoadError, load_model
from ui.serve.sources import BIN_VAR, DOWNLOADS_VAR, REFUSED, SOURCES_VAR, policy

REFUSED_ON_PAGE = REFUSED + "  \nThe previous model stays in use."


@pytest.fixture
def locked(monkeypatch, tiny_dir):
    monkeypatch.setenv(SOURCES_VAR, f"{tiny_dir}; bert-base-uncased ;")
    monkeypatch.delenv(DOWNLOADS_VAR, raising=False)
    monkeypatch.delenv(BIN_VAR, raising=False)
    return tiny_dir


def test_unlocked_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv(SOURCES_VAR, raising=False)
    monkeypatch.setenv("ATTENTION_FILE_DIRS", str(tmp_path))
    rules = policy()
    assert not rules.locked and rules.downloads and rules.bin_files
    rules.check("someone/any-model")  # no refusal: a laptop loads any hub id its user types
    rules.check(str(tmp_path))  # and any folder under the operator's folders (tests/app/test_serving.py: the others)
    with pytest.raises(ModelLoadError, match="only under the folders its operator lists"):
        rules.check("/anything/at/all")


def test_the_list_and_the_switches_come_from_the_environment(locked, monkeypatch):
    rules = policy()
    assert rules.locked and rules.allowed == (str(locked), "bert-base-uncased")
    assert not rules.downloads and not rules.bin_files
    monkeypatch.setenv(DOWNLOADS_VAR, "1")
    monkeypatch.setenv(BIN_VAR, "1")
    assert policy().downloads and policy().bin_files


def test_every_refusal_reads_the_same_and_reads_nothing(locked, tmp_path, monkeypatch):
    import ui.compute.models

    def no_reading(*args, **kwargs):
        raise AssertionError("a refused source reached the loader")

    monkeypatch.setattr(ui.compute.models, "_load_model", no_reading)
    (tmp_path / "a-file.txt").write_text("x")
    messages = set()
    for source in (
        "/etc",
        str(tmp_path),
        str(tmp_path / "a-file.txt"),
        "/no/such/folder",
        "gpt2",
        "../../..",
        str(locked) + "/",
        "bert-base-uncased2",
    ):
        with pytest.raises(ModelLoadError) as err:
            ui.compute.models.get_model(source)
        messages.add(str(err.value))
    assert messages == {REFUSED}


def test_downloads_and_bin_files_are_refused_when_the_operator_says_so(tmp_path):
    from conftest import make_tiny

    env_home = os.environ.get("HF_HOME")
    os.environ["HF_HOME"] = str(tmp_path / "hf")  # an empty cache
    try:
        with pytest.raises(ModelLoadError, match="does not download"):
            load_model("bert-base-uncased", downloads=False)
    finally:
        if env_home is None:
            os.environ.pop("HF_HOME")
        else:
            os.environ["HF_HOME"] = env_home
    folder = make_tiny(tmp_path / "bin", safe=False)
    with pytest.raises(ModelLoadError, match="safetensors weights only"):
        load_model(folder, bin_files=False)
    assert load_model(folder)[0].load_report.weights_file == "pytorch_model.bin"  # allowed by default


def test_the_locked_page_offers_the_list_and_refuses_a_linked_path(locked):
    at = start(model="/etc")
    no_errors_but_the_refusal = [e.value for e in at.error]
    assert not at.exception
    assert not [t for t in at.sidebar.text_input if t.key == "model_input"]  # nothing to type a path into
    choice = at.sidebar.selectbox(key="model_choice")
    assert choice.options == ["all-MiniLM-L6-v2 (bundled)", str(locked), "bert-base-uncased"]
    assert len(no_errors_but_the_refusal) == 1 and "loads only the models in its list" in no_errors_but_the_refusal[0]
    assert "/etc" not in no_errors_but_the_refusal[0]
    choice.set_value(str(locked)).run()
    no_errors(at)
    assert any(f"In use: {locked}" in c.value.replace("\\", "") for c in at.sidebar.caption)


def test_a_refused_model_is_said_in_presentation_mode_too(locked):
    at = start(model="/etc", present="1")
    assert not at.exception
    assert [e.value for e in at.error] == [REFUSED_ON_PAGE]
