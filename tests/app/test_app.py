"""The app's flows through Streamlit's AppTest: submit, layer/head, options, URL state, bad input."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from attention.runs.run import run_sentence
from ui.page import registry

SENTENCE = "The animal didn't cross the street because it was too tired."


def start(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def submit(at: AppTest, text: str) -> AppTest:
    """Type `text` into the Sentence box and press Run, as a person would."""
    at.text_area(key="text").input(text)
    next(b for b in at.button if b.label == "Run").click()
    return at.run()


def decode(array):
    """Plotly's JSON arrays: plain lists or base64 typed arrays {'dtype', 'bdata', 'shape'}."""
    if isinstance(array, dict) and "bdata" in array:
        data = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        shape = array.get("shape")
        if shape:
            data = data.reshape([int(s) for s in str(shape).split(",")])
        return data
    return np.array(array, dtype=float)


def figures(at: AppTest) -> list[dict]:
    """Every chart on the page as its decoded figure (plotly's JSON read back, whichever serializer wrote it)."""
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def titles(fig: dict) -> list[str]:
    """The words a reader sees on a figure: its title, subplot titles and other annotations, axis titles."""
    layout = fig["layout"]
    axes = [v for k, v in layout.items() if k.startswith(("xaxis", "yaxis")) and isinstance(v, dict)]
    found = [(layout.get("title") or {}).get("text")] + [a.get("text") for a in layout.get("annotations", [])]
    found += [(axis.get("title") or {}).get("text") for axis in axes]
    return [text for text in found if text]


def heatmaps(at: AppTest) -> list[dict]:
    return [
        json.loads(e.proto.spec)
        for e in at.get("plotly_chart")
        if json.loads(e.proto.spec)["data"][0]["type"] == "heatmap"
    ]


def head_figure(at: AppTest) -> dict:
    """The head view's heatmap: the one titled 'Layer …, head …' (in presentation mode 'L… H… · ' and the
    sentence, on one line)."""
    found = heatmaps(at)
    for fig in found:
        title = (fig["layout"].get("title") or {}).get("text") or ""
        if title.startswith("Layer ") or (at.session_state["present"] and re.match(r"L\d+ H\d+ · ", title)):
            return fig
    raise AssertionError("no head heatmap on the page")


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not [e for e in at.error], [e.value for e in at.error]


@pytest.fixture(scope="module")
def default_run(minilm):
    model, tokenizer = minilm
    return run_sentence(model, tokenizer, SENTENCE)


def test_default_sentence_opens_the_head_that_sends_it_to_animal(default_run):
    at = start()
    no_errors(at)
    assert at.text_area(key="text").value == SENTENCE
    tokens = default_run.tokens
    to_animal = default_run.attentions[:, :, tokens.index("it"), tokens.index("animal")]  # (n_layers, H)
    layer, head = np.unravel_index(np.argmax(to_animal), to_animal.shape)
    assert (layer, head) != (0, 0)
    fig = head_figure(at)
    assert fig["layout"]["title"]["text"] == f"Layer {layer}, head {head}"
    np.testing.assert_allclose(decode(fig["data"][0]["z"]), default_run.attentions[layer, head], atol=1e-6)
    assert fig["layout"]["xaxis"]["ticktext"] == tokens
    assert any(f"Opened layer {layer}, head {head}" in i.value and "animal" in i.value for i in at.info)
    assert str(at.query_params["layer"]).strip("[]'") == str(layer)
    assert not at.get("help") and not at.code  # nothing written by accident (a bare expression's value)


def test_a_link_with_a_head_opens_that_head():
    at = start(layer="0", head="0")
    no_errors(at)
    assert head_figure(at)["layout"]["title"]["text"] == "Layer 0, head 0"


def test_a_sentence_without_a_known_answer_opens_layer_0_head_0():
    at = start(s="The cat sat on the mat.")
    no_errors(at)
    assert head_figure(at)["layout"]["title"]["text"] == "Layer 0, head 0"


def test_submit_a_sentence_and_pick_layer_and_head(minilm):
    model, tokenizer = minilm
    at = start()
    submit(at, "The cat sat on the mat.")
    at.selectbox(key="layer").select(3).run()
    at.selectbox(key="head").select(7).run()
    no_errors(at)
    expected = run_sentence(model, tokenizer, "The cat sat on the mat.")
    fig = head_figure(at)
    assert fig["layout"]["title"]["text"] == "Layer 3, head 7"
    np.testing.assert_allclose(decode(fig["data"][0]["z"]), expected.attentions[3, 7], atol=1e-6)
    assert fig["layout"]["xaxis"]["ticktext"] == expected.tokens
    assert at.query_params["s"] == ["The cat sat on the mat."] or at.query_params["s"] == "The cat sat on the mat."
    assert str(at.query_params["layer"]).strip("[]'") == "3" and str(at.query_params["head"]).strip("[]'") == "7"


def test_hide_special_and_merge_words(default_run):
    at = start()
    at.checkbox(key="hide_special").check().run()
    fig = head_figure(at)
    labels = fig["layout"]["xaxis"]["ticktext"]
    assert "[CLS]" not in labels and "[SEP]" not in labels and len(labels) == len(default_run.tokens) - 2
    z = decode(fig["data"][0]["z"])
    np.testing.assert_allclose(z.sum(1), 1, atol=1e-5)  # renormalised, as stated
    assert any("renormalised" in c.value for c in at.caption)
    at.checkbox(key="renormalize").uncheck().run()
    z = decode(head_figure(at)["data"][0]["z"])
    assert np.all(z.sum(1) < 1 - 1e-4)
    assert any("not renormalised" in c.value for c in at.caption)
    at.checkbox(key="hide_special").uncheck().run()
    at.checkbox(key="merge_words").check().run()
    no_errors(at)
    labels = head_figure(at)["layout"]["xaxis"]["ticktext"]
    assert "didn't" in labels and "tired" in labels and "." in labels  # written together: one word
    assert len(labels) == len(default_run.tokens) - 2  # didn ' t, three pieces, are one word


def test_merge_words_joins_pieces():
    at = start(s="Tokenization splits unbelievably uncommon words.")
    at.checkbox(key="merge_words").check().run()
    no_errors(at)
    labels = head_figure(at)["layout"]["xaxis"]["ticktext"]
    assert "tokenization" in labels and "unbelievably" in labels


def test_url_restores_sentence_view_layer_and_head(minilm):
    model, tokenizer = minilm
    at = start(s="The cat sat on the mat.", s2="It was warm.", view="head", layer="4", head="11")
    no_errors(at)
    assert at.text_area(key="text").value == "The cat sat on the mat."
    assert at.text_input(key="text_b").value == "It was warm."
    assert at.selectbox(key="layer").value == 4 and at.selectbox(key="head").value == 11
    expected = run_sentence(model, tokenizer, "The cat sat on the mat.", "It was warm.")
    np.testing.assert_allclose(decode(head_figure(at)["data"][0]["z"]), expected.attentions[4, 11], atol=1e-6)


@pytest.mark.parametrize(
    "params, notice",
    [
        (dict(layer="99"), "Layer 99 does not exist"),
        (dict(head="-3"), "head is below 0"),
        (dict(layer="abc"), "layer is not a number"),
        (dict(layer="123456"), "layer is over 9,999"),
        (dict(view="nonsense"), "Unknown view"),
        (dict(s="x" * 100_001), "longer than"),
    ],
)
def test_bad_url_parameters_are_clamped_with_a_notice(params, notice):
    at = start(**params)
    no_errors(at)
    assert any(notice in i.value for i in at.info), [i.value for i in at.info]
    assert head_figure(at)  # the page still works


@pytest.mark.parametrize("view, marker", [("overview", "overview"), ("flow", "flow"), ("masks", "masks")])
def test_each_view_draws_without_errors(view, marker):
    at = start(view=view)
    no_errors(at)
    assert len(at.get("plotly_chart")) >= 2


def test_empty_sentence_is_a_prompt():
    at = start()
    submit(at, "   ")
    no_errors(at)
    assert any("Type a sentence" in i.value for i in at.info)
    assert at.text_area(key="text").value == "   "


def test_long_input_is_truncated_with_a_notice():
    at = start()
    submit(at, "word " * 700)
    no_errors(at)
    assert any("512" in w.value for w in at.warning)


def strip_charts(at: AppTest) -> list[dict]:
    """The token strip: the chart whose traces include the pieces' texts."""
    specs = [json.loads(e.proto.spec) for e in at.get("plotly_chart")]
    return [s for s in specs if any(t.get("name") == "piece" for t in s["data"])]


def test_a_long_inputs_strip_waits_in_a_closed_expander_until_opened():
    at = start()
    assert len(strip_charts(at)) == 1 and not at.expander  # a sentence's strip is drawn as it is
    submit(at, "word " * 200)  # 202 pieces
    no_errors(at)
    (box,) = at.expander
    assert "202 pieces" in box.label
    assert strip_charts(at) == [] and head_figure(at)  # the view is drawn, the strip is not
    at.session_state["show_strip"] = True  # opened
    at.run()
    no_errors(at)
    (strip,) = strip_charts(at)
    assert [t["name"] for t in strip["data"] if t.get("mode") == "text"] == ["piece", "position"]  # compact
    assert strip["layout"]["width"] <= 1280 - 300 - 160 - 20 - 34  # fits the expander at 1280 px: never shrunk
    assert at.query_params["strip"] == "1"  # the link keeps it open


def test_bad_model_source_keeps_the_previous_model(tmp_path):
    at = start()
    at.text_input(key="model_input").input(str(tmp_path / "nowhere"))
    next(b for b in at.button if b.label == "Load model").click()
    at.run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "no folder" in errors[0] and "previous model stays" in errors[0]
    assert head_figure(at)["layout"]["title"]["text"].startswith("Layer ")


def test_markup_in_the_sentence_is_plain_text():
    text = "<b>bold</b> **strong** [a](javascript:alert(1)) $$x$$"
    at = start(s=text)
    no_errors(at)
    ticks = head_figure(at)["layout"]["xaxis"]["ticktext"]
    assert "&lt;" in ticks and "<" not in "".join(ticks)
    for element in list(at.markdown) + list(at.caption) + list(at.info):
        assert "<b>" not in element.value and "**strong**" not in element.value


def test_presentation_mode_from_the_url():
    at = start(present="1", layer="1", head="2")
    no_errors(at)
    assert at.toggle(key="present").value is True
    fig = head_figure(at)
    assert fig["layout"]["font"]["size"] == 22
    assert len(at.sidebar.text_input) == 0  # no model controls: the sidebar is empty and hidden
    assert str(at.query_params["present"]).strip("[]'") == "1"
    at.toggle(key="present").set_value(False).run()
    assert head_figure(at)["layout"]["font"]["size"] == 14
    assert len(at.sidebar.text_input) == 1


def test_another_checkpoint_loads_from_the_sidebar(tiny_dir):
    at = start(layer="1", head="3")
    at.text_input(key="model_input").input(str(tiny_dir))
    next(b for b in at.button if b.label == "Load model").click()
    at.run()
    no_errors(at)
    assert any("2 layers × 4 heads" in c.value for c in at.sidebar.caption)
    assert at.selectbox(key="layer").options == ["0", "1"] and at.selectbox(key="head").value == 3
    assert len(decode(head_figure(at)["data"][0]["z"])) > 0


def test_a_switch_to_a_smaller_model_opens_its_strongest_head_without_a_missing_layer_notice(tiny_dir):
    at = start(layer="5", head="3")  # MiniLM: 6 layers; the tiny model has 2
    at.text_input(key="model_input").input(str(tiny_dir))
    next(b for b in at.button if b.label == "Load model").click()
    at.run()
    no_errors(at)
    said = " ".join(i.value for i in at.info)
    assert "does not exist" not in said and at.session_state["layer"] in (0, 1)
    layer, head = at.session_state["layer"], at.session_state["head"]
    assert f"Opened layer {layer}, head {head}" in said  # the head the page chose in its place, and why
    linked = start(model=str(tiny_dir), layer="5")  # asked for in a link: said
    assert any("Layer 5 does not exist in this model (0–1); showing 1." in i.value for i in linked.info)


# ---- the coreference view ------------------------------------------------------------------------


def chart(at: AppTest, title_start: str) -> dict:
    for element in at.get("plotly_chart"):
        fig = json.loads(element.proto.spec)
        if ((fig["layout"].get("title") or {}).get("text") or "").startswith(title_start):
            return fig
    raise AssertionError(f"no chart titled {title_start!r}")


def test_coreference_on_the_sentence_is_prefilled_and_exact(minilm, default_run):
    from attention.analysis.coref import CorefExample, score_example

    at = start(view="coref", rank="margin")  # the grid colours the criterion the table ranks by
    no_errors(at)
    assert at.selectbox(key="coref_pronoun").value == 9  # "it", the 10th word
    words = ["animal", "street"]
    assert [
        at.multiselect(key="coref_candidates").format_func(i) for i in at.multiselect(key="coref_candidates").value
    ] == words
    fig = chart(at, "margin of it → animal")
    enc = default_run.encoded
    expected = score_example(
        CorefExample(SENTENCE, "it", ("animal", "street"), "animal"),
        default_run.attentions,
        enc.tokens,
        enc.word_ids,
        enc.offsets,
    ).margin
    np.testing.assert_allclose(decode(fig["data"][0]["z"]), expected, atol=1e-6)
    at.selectbox(key="coref_answer").select(at.multiselect(key="coref_candidates").value[1]).run()
    np.testing.assert_allclose(decode(chart(at, "margin of it → street")["data"][0]["z"]), -expected, atol=1e-6)


def test_coreference_suite_and_minimal_pairs(minilm):
    from attention.analysis.coref import flipping_heads, load_examples, score_heads, twin_pairs
    from ui.views.coref import flip_note

    at = start(view="coref")
    at.segmented_control(key="coref_mode").set_value("Suite").run()
    no_errors(at)
    model, tokenizer = minilm
    examples = load_examples(ROOT / "data" / "coref_examples.jsonl")
    result = score_heads(model, tokenizer, examples)
    np.testing.assert_array_equal(decode(chart(at, "accuracy of each head")["data"][0]["z"]), result.accuracy)
    layer, head, best = result.ranked(1)[0]
    assert any(f"layer {layer}, head {head}" in c.value and f"{best:.0%}" in c.value for c in at.caption)
    at.segmented_control(key="coref_mode").set_value("Minimal pairs").run()
    no_errors(at)
    a, b = twin_pairs(examples)[0]
    flips = flipping_heads(result.details[a], result.details[b])
    both = flips & result.details[a].heads_right() & result.details[b].heads_right()
    assert any(flip_note(int(flips.sum()), int(both.sum())) in c.value for c in at.caption)  # 0 flips here
    assert [t.value for t in at.text][:2] == [examples[a].text, examples[b].text]


# ---- hostile and unusual sentences ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected_tokens",
    [
        (
            "The\u200b animal\u202e didn't\u200d cross.",
            ["[CLS]", "the", "animal", "didn", "'", "t", "cross", ".", "[SEP]"],
        ),
        ("The\x00 animal\x07 cross.", ["[CLS]", "the", "animal", "cross", ".", "[SEP]"]),
        ("I love 😍 attention!", ["[CLS]", "i", "love", "[UNK]", "attention", "!", "[SEP]"]),
        ("東京 is big", ["[CLS]", "東", "京", "is", "big", "[SEP]"]),
        ("$$\\frac{a}{b}$$", ["[CLS]", "$", "$", "\\", "fra", "##c", "{", "a", "}", "{", "b", "}", "$", "$", "[SEP]"]),
    ],
)
def test_unusual_characters_give_the_tokenizers_tokens(text, expected_tokens):
    at = start(s=text)
    no_errors(at)
    assert head_figure(at)["layout"]["xaxis"]["ticktext"] == expected_tokens
    assert at.text_area(key="text").value == text  # what the person typed is kept as typed


def test_only_invisible_characters_is_explained():
    at = start(s="\u200b\u200c\u202e\u2066")
    no_errors(at)
    assert any("only [CLS] and [SEP] remain" in i.value for i in at.info)
    assert head_figure(at)["layout"]["xaxis"]["ticktext"] == ["[CLS]", "[SEP]"]


def test_six_thousand_words_are_truncated_with_a_notice():
    at = start()
    submit(at, "word " * 6000)
    no_errors(at)
    assert any("6002 tokens" in w.value and "512" in w.value for w in at.warning)
    assert decode(head_figure(at)["data"][0]["z"]).shape == (512, 512)  # every cell of the 512 positions


def test_a_placeholder_chart_shows_while_the_model_loads_and_goes_after(monkeypatch):
    import ui.compute.models
    import viz._style

    drawn = []
    real = viz._style.message_figure
    monkeypatch.setattr(viz._style, "message_figure", lambda text, **kw: drawn.append(text) or real(text, **kw))
    ui.compute.models.LOADED.discard("")  # as on a fresh process: the bundled model counts as not loaded yet
    at = start()
    no_errors(at)
    assert drawn == ["Loading the bundled model: once on this server, seconds…"]  # sent before the model was asked for
    specs = [json.loads(e.proto.spec) for e in at.get("plotly_chart")]
    assert specs and all(spec["data"] for spec in specs)  # and no data-less chart is left on the page
    assert "" in ui.compute.models.LOADED
    at.run()
    assert len(drawn) == 1  # a loaded model: no placeholder on later runs


def test_a_choice_is_sent_once_and_kept_while_its_widget_is_away():
    """A choice's widget is not written by the script on every run: a value the script writes goes to the
    browser with the widget and replaces a pick made while the run went on (a second head picked in "Heads to
    draw" during the first pick's run was lost, 1 run in 4 under load). Streamlit keeps it while it is away."""
    at = start(view="head", draw="lines", heads="5")
    no_errors(at)
    assert at.multiselect(key="line_heads").value == [5]
    at.run()  # a run on which nothing changed: the browser's value stands
    assert at.multiselect(key="line_heads").value == [5]
    assert not at.multiselect(key="line_heads").proto.set_value
    at.multiselect(key="line_heads").select(7).run()
    assert not at.multiselect(key="line_heads").proto.set_value
    at.segmented_control(key="view").set_value(registry.by_key("overview").label).run()
    assert not [m for m in at.multiselect if m.key == "line_heads"]  # not drawn on this run
    at.segmented_control(key="view").set_value(registry.by_key("head").label).run()
    assert at.multiselect(key="line_heads").value == [5, 7]  # kept: the widget is drawn with it again
    assert at.query_params["heads"] == "5,7"
    no_errors(at)


def test_every_choice_widget_is_kept_by_streamlit():
    """Each widget keyed by a choice of the link (ui/state/state.py PARAMS) is drawn with persist_state="session",
    except those keep_choices writes back; so a choice lasts while its widget is away (the test above)."""
    import ast

    from ui.state.state import PARAMS, WRITTEN_BACK

    keys, missing, seen = {p.key for p in PARAMS}, [], set()
    for path in [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            words = {k.arg: k.value for k in node.keywords}
            key = words.get("key")
            if not (isinstance(key, ast.Constant) and key.value in keys) or key.value in WRITTEN_BACK:
                continue
            seen.add(key.value)
            persist = words.get("persist_state")
            if not (isinstance(persist, ast.Constant) and persist.value == "session"):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {key.value}")
    assert not missing, missing
    assert {"line_heads", "layer", "view", "coref_set", "gen_seed"} <= seen
