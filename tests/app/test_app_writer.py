"""The bundled writer on the page: the model box offers both bundled models by name, one click each; a locked
server lets the writer through as it lets the default; a .gguf file is read only under the operator's folders."""

import re

import pytest
from test_app import no_errors, start

from attention import ModelLoadError
from ui.serve.sources import SourcePolicy

pytestmark = pytest.mark.xdist_group("smollm2")  # the modules that load SmolLM2 share a worker: one load


@pytest.mark.slow  # 5-15 s alone: the full command runs it, the everyday selection not
def test_the_bundled_writer_loads_from_the_model_box_and_back():
    at = start()
    labels = [b.label for b in at.sidebar.button]
    assert "all-MiniLM-L6-v2 · reads" in labels and "SmolLM2-135M · writes" in labels
    assert next(b for b in at.sidebar.button if b.label == "all-MiniLM-L6-v2 · reads").disabled  # in use
    next(b for b in at.sidebar.button if b.label == "SmolLM2-135M · writes").click()
    at.run()
    no_errors(at)
    assert at.session_state.source == "smollm2"
    assert any("llama (causal), 30 layers × 9 heads" in c.value for c in at.sidebar.caption)
    assert next(b for b in at.sidebar.button if b.label == "SmolLM2-135M · writes").disabled
    assert "Next token" in at.segmented_control(key="view").options  # a writer's views are offered
    next(b for b in at.sidebar.button if b.label == "all-MiniLM-L6-v2 · reads").click()
    at.run()
    no_errors(at)
    assert at.session_state.source == ""


def test_a_locked_server_lets_the_bundled_writer_through(tmp_path, monkeypatch):
    locked = SourcePolicy(locked=True, allowed=("bert-base-uncased",), downloads=False, bin_files=False)
    for source in ("", "smollm2", "SmolLM2", "bert-base-uncased"):
        locked.check(source)
    with pytest.raises(ModelLoadError, match="loads only the models in its list"):
        locked.check("gpt2")


def test_a_gguf_file_is_read_only_under_the_operators_folders(tmp_path, monkeypatch):
    inside, outside = tmp_path / "models", tmp_path / "elsewhere"
    for folder in (inside, outside):
        folder.mkdir()
        (folder / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("ATTENTION_FILE_DIRS", str(inside))
    open_server = SourcePolicy(locked=False, allowed=(), downloads=True, bin_files=True)
    open_server.check(str(inside / "m.gguf"))  # a file, not a folder: allowed where it lies under the list
    with pytest.raises(ModelLoadError):
        open_server.check(str(outside / "m.gguf"))


def test_a_broken_gguf_file_is_one_message_and_the_previous_model_stays(tmp_path, monkeypatch):
    """A .gguf under the operator's folders that is cut short: one clear error, no traceback, the model shown
    before still shown."""
    from test_app import head_figure

    monkeypatch.setenv("ATTENTION_FILE_DIRS", str(tmp_path))
    (tmp_path / "cut.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")  # the magic and version, then nothing
    at = start()
    at.text_input(key="model_input").input(str(tmp_path / "cut.gguf"))
    next(b for b in at.button if b.label == "Load model").click()
    at.run()
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]  # markdown's escapes taken off
    assert len(errors) == 1 and "cut.gguf is not a readable GGUF file" in errors[0], errors
    assert "previous model stays" in errors[0]
    assert at.session_state.source == ""  # the bundled reader, as before
    assert head_figure(at)["layout"]["title"]["text"].startswith("Layer ")


def test_the_writers_pieces_read_as_text_on_the_page_the_raw_piece_in_the_hover():
    """SmolLM2's byte-level pieces ("Ġanimal", "ĠcafÃ©") are shown as the text they stand for in the strip, the
    next-token bars, their title and the position box; the strip's hover keeps the raw piece and its id."""
    from test_app_generate import bars, strip

    at = start(model="smollm2", s="The animal ate at a café", view="next")
    no_errors(at)
    piece = next(t for t in strip(at)["data"] if t.get("name") == "piece")
    assert " animal" in piece["text"] and " café" in piece["text"]
    assert not any("Ġ" in t or "Ã" in t for t in piece["text"])
    assert any(re.search(r"animal \(id \d+, piece Ġanimal,", h) for h in piece["hovertext"])
    fig = bars(at)
    shown = [*fig["data"][0]["y"], fig["layout"]["title"]["text"]]
    assert not any("Ġ" in t or "Ã" in t for t in shown), shown
    assert "café" in fig["layout"]["title"]["text"]
    options = at.selectbox(key="next_position").options
    assert " animal" in options[1] and not any("Ġ" in o for o in options)


def test_a_writing_view_asked_of_the_reader_is_one_click_from_the_writer():
    """A link to the Next token view on the bundled reader: the notice says why the Head view is shown, and one
    button opens the Next token view on the bundled writer."""
    at = start(s="The capital of France is", view="next")
    no_errors(at)
    assert any("Next token needs a causal decoder" in i.value for i in at.info)
    button = next(b for b in at.button if b.key == "offer_writer_button")
    assert "SmolLM2" in button.label
    button.click()
    at.run(timeout=180)
    no_errors(at)
    assert at.session_state.source == "smollm2" and at.session_state.view == "Next token"
    assert not any(b.key == "offer_writer_button" for b in at.button)  # the writer needs no offer
