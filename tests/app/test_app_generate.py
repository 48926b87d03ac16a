"""A causal model writes (AppTest, tiny GPT-2 and Llama): Continue adds the tokens and the strip marks them,
the next-token view's bars are the model's probabilities, the temperature reshapes them, and the link
carries every setting (the seed too), bad values clamped with a notice."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from families import make_family
from test_app import decode, no_errors, start

from attention import generate, load_model

PROMPT = "The cat sat on the mat."
SAMPLED = dict(sample="1", temp="1.3", topk="50", topp="0.9", seed="7")


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def folder(request, tmp_path_factory):
    return make_family(tmp_path_factory.mktemp(request.param), request.param)


def charts(at) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def strip(at) -> dict:
    return next(c for c in charts(at) if any(t.get("name") == "piece" for t in c["data"]))


def strip_ids(at) -> list[int]:
    piece = next(t for t in strip(at)["data"] if t.get("name") == "piece")
    return [int(re.search(r"\(id (\d+)", h).group(1)) for h in piece["hovertext"]]


def written_boxes(at) -> int:
    """How many boxes the strip marks as written by the model (6 points per closed box)."""
    traces = [t for t in strip(at)["data"] if t.get("name") == "written by the model"]
    return sum(len(decode(t["x"])) for t in traces) // 6


def bars(at) -> dict:
    return next(c for c in charts(at) if c["data"][0]["type"] == "bar")


def entropies(fig: dict) -> list[float]:
    return [float(re.search(r"entropy ([\d.]+) bits", a["text"]).group(1)) for a in fig["layout"]["annotations"]]


def written_by_attention(folder, n: int, **options) -> list[int]:
    model, tokenizer = load_model(str(folder))
    return generate(model, tokenizer, PROMPT, max_new_tokens=n, **options).ids[0].tolist()


def test_continue_adds_the_tokens_and_the_strip_marks_them(folder):
    at = start(model=str(folder), s=PROMPT)
    no_errors(at)
    assert written_boxes(at) == 0
    at.number_input(key="gen_n").set_value(6)
    next(b for b in at.button if b.label == "Continue").click()
    at.run()
    no_errors(at)
    expected = written_by_attention(folder, 6)
    written = at.session_state["continuation"]
    assert written.ids == tuple(expected) and written.prompt_len == len(expected) - 6
    assert written_boxes(at) == len(strip_ids(at)) - written.prompt_len
    if strip_ids(at) == expected:
        assert written_boxes(at) == 6
    else:  # the written text reads again as other tokens: the page says so
        assert any("read again by the tokenizer" in i.value for i in at.info)
    assert "written by the model" in strip(at)["layout"]["annotations"][1]["text"]
    assert at.query_params["cont"] == "1" and at.query_params["n"] == "6"
    next(b for b in at.button if b.label == "Run").click()  # the sentence as typed, without its continuation
    at.run()
    assert written_boxes(at) == 0 and len(strip_ids(at)) == written.prompt_len


def test_the_bars_are_the_models_probabilities_and_greedy_writes_the_top_one(folder):
    from transformers import AutoModelForCausalLM

    at = start(model=str(folder), s=PROMPT, view="next", cont="1", n="5")
    no_errors(at)
    written = at.session_state["continuation"]
    ids = list(written.ids)  # as the model wrote them, whatever the text reads again as
    position = at.session_state["next_position"]
    assert position == written.prompt_len - 1 and len(ids) == written.prompt_len + 5  # the prompt's last token
    reference = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        logits = reference(torch.tensor([ids])).logits[0, position].double()
    expected = torch.softmax(logits, -1).sort(descending=True).values[:10].numpy()
    fig = bars(at)
    shown = decode(fig["data"][0]["x"])
    np.testing.assert_allclose(shown, expected, atol=1e-5)
    colours = fig["data"][0]["marker"]["color"]
    assert colours[0] == "crimson" and colours.count("crimson") == 1  # greedy wrote the most probable token


def test_a_higher_temperature_flattens_the_bars(folder):
    at = start(model=str(folder), s=PROMPT, view="next")
    no_errors(at)
    at.slider(key="next_temperature").set_value(0.5).run()
    t1, sharp = entropies(bars(at))
    sharp_top = float(decode(bars(at)["data"][1]["x"])[0])
    at.slider(key="next_temperature").set_value(3.0).run()
    no_errors(at)
    same, flat = entropies(bars(at))
    assert t1 == same and sharp < t1 < flat
    assert float(decode(bars(at)["data"][1]["x"])[0]) < sharp_top
    assert at.query_params["t"] == "3"


def test_a_sampled_link_writes_the_same_text_twice_as_generate_does(folder):
    link = dict(model=str(folder), s=PROMPT, cont="1", n="10", **SAMPLED)
    first, second = start(**link), start(**link)
    no_errors(first)
    expected = written_by_attention(folder, 10, do_sample=True, temperature=1.3, top_k=50, top_p=0.9, seed=7)
    assert first.session_state["continuation"].ids == second.session_state["continuation"].ids == tuple(expected)
    assert strip_ids(first) == strip_ids(second)
    if strip_ids(first) != expected:  # the written text reads again as other tokens: the page says so
        assert any("read again by the tokenizer" in i.value for i in first.info)
    assert {k: first.query_params[k] for k in SAMPLED} == SAMPLED
    other = start(**{**link, "seed": "8"})
    assert other.session_state["continuation"].ids != tuple(expected)  # the seed is part of the text


def test_bad_values_in_the_link_are_clamped_with_a_notice(folder):
    at = start(model=str(folder), s=PROMPT, cont="1", n="500", sample="1", temp="9", topp="0", seed="x")
    no_errors(at)
    said = " ".join(i.value for i in at.info)
    assert "n is 500, outside 1–64; using 64" in said
    assert "temp is 9, outside 0.05–5; using 5" in said
    assert "topp is 0, outside 0.01–1; using 0.01" in said
    assert "seed is not a whole number" in said
    assert at.session_state["gen_n"] == 64 and at.session_state["gen_temperature"] == 5.0


def test_an_encoder_says_it_has_no_next_token_head_and_offers_no_continue():
    at = start(s=PROMPT, view="next", cont="1")  # the bundled BERT
    no_errors(at)
    said = " ".join(i.value for i in at.info)
    assert "Next token needs a causal decoder" in said and "Continue writes with a causal decoder" in said
    assert at.session_state.view == "Head"
    assert not any(b.label == "Continue" for b in at.button)


def test_the_way_back_from_an_opened_sentence_goes_once_it_is_continued(folder):
    """An example opened from elsewhere keeps its way back while it is the text run; its continuation is
    another text, and the way back goes (as a sentence run after it)."""
    at = start(model=str(folder), s=PROMPT)
    before = {"boxes": ("My own sentence.", ""), "submitted": ("My own sentence.", "")}
    at.session_state["opened_from"] = {"text": PROMPT, "came_from": "example 1 of the suite", "before": before}
    at.run()
    no_errors(at)
    assert any(b.label.startswith("Back to") for b in at.button)
    at.number_input(key="gen_n").set_value(3)
    next(b for b in at.button if b.label == "Continue").click()
    at.run()
    no_errors(at)
    assert at.session_state["continuation"].prompt == PROMPT
    assert not any(b.label.startswith("Back to") for b in at.button) and "opened_from" not in at.session_state


@pytest.mark.parametrize("present", ["0", "1"])
def test_views_that_draw_no_chosen_head_show_no_layer_or_head_box_and_keep_the_choice(tmp_path, present):
    folder = make_family(tmp_path / "gpt2", "gpt2")  # the boxes are the page's, the same for every family
    boxes = lambda at: [s for s in at.selectbox if s.key in ("layer", "head")]  # noqa: E731
    at = start(model=str(folder), s=PROMPT, view="head", layer="1", head="2", present=present)
    no_errors(at)
    assert len(boxes(at)) == 2
    for view in ("Next token", "Logit lens"):
        at.session_state["view"] = view
        at.run()
        no_errors(at)
        assert not boxes(at), view  # Next token and Logit lens read every layer, no chosen head
    at.session_state["view"] = "Head"
    at.run()
    assert [(s.key, s.value) for s in boxes(at)] == [("layer", 1), ("head", 2)]  # the choice kept meanwhile


def test_a_model_that_adds_no_special_tokens_has_a_short_disabled_hide_box_that_says_why(tmp_path):
    folder = make_family(tmp_path / "gpt2", "gpt2")  # GPT-2's tokenizer adds no [CLS] or <s>
    at = start(model=str(folder), s=PROMPT, view="head")
    no_errors(at)
    box = at.checkbox(key="hide_special")
    assert box.label == "Hide special tokens" and box.disabled, box.label  # was cut at "(this model add…"
    assert "adds no special tokens" in box.help
