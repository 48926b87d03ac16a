"""A lecture on how a model writes (AppTest): Write one token adds one token at a time, in presentation mode too,
the Next token view at the position whose bars chose it (marked), ← / → moving it; the text is shown above the
figure, the written part apart and escaped; the head view's map marks where the prompt ends; the bars'
comparison temperature is the sampling temperature; what cannot be written is said, never a traceback."""

from __future__ import annotations

import html
import re

import pytest
from families import make_family
from test_app import head_figure, no_errors, start
from test_app_generate import bars

from attention import generate, load_model
from attention.load.sources import WRITER_NAME

pytestmark = pytest.mark.xdist_group("smollm2")  # the modules that load SmolLM2 share a worker: one load
PROMPT = "The cat sat on the"


def writing(at) -> str:
    """The writing line's HTML above the figure."""
    return next(h.proto.body for h in at.get("html") if 'class="writing"' in h.proto.body)


def written_part(at) -> str:
    """The characters the writing line shows as the model's (its written and newest spans), unescaped."""
    spans = re.findall(r'<span class="(?:written|picked|newest)(?: next| after)?"[^>]*>(.*?)</span>', writing(at))
    return html.unescape("".join(spans))


def write(at, key: str = "present_write_one"):
    next(b for b in at.button if b.key == key).click()
    return at.run()


def infos(at) -> str:
    return " ".join(i.value for i in at.info)


@pytest.mark.slow  # 5-15 s alone: the full command runs it, the everyday selection not
def test_write_one_token_at_a_time_in_presentation_mode():
    at = start(model=WRITER_NAME, s=PROMPT, present="1", view="head")
    no_errors(at)
    model, tokenizer = load_model(WRITER_NAME)
    expected = generate(model, tokenizer, PROMPT, max_new_tokens=2).ids[0].tolist()
    n_prompt = len(expected) - 2
    for n in (1, 2):
        write(at)
        no_errors(at)
        written = at.session_state["continuation"]
        assert written.ids == tuple(expected[: n_prompt + n]) and written.prompt_len == n_prompt  # one more each
        assert at.session_state["view"] == "Next token" and at.query_params["n"] == str(n)
        assert at.session_state["next_position"] == n_prompt + n - 2  # the bars that chose the newest token
        fig = bars(at)
        colours = fig["data"][0]["marker"]["color"]
        assert colours[0] == "crimson" and colours.count("crimson") == 1  # greedy: the top bar, marked
        assert written_part(at) == tokenizer.decode(expected[n_prompt : n_prompt + n])
        assert PROMPT in writing(at)
        assert any("scrollTo" in h.proto.body for h in at.get("html"))  # back to the figure, from the button
    write(at, "next_prev_position")  # ← : the bars of the position before
    assert at.session_state["next_position"] == n_prompt - 1
    assert at.get("number_input") and any(w.key == "gen_n" for w in at.number_input)  # the settings, no sidebar


def test_the_writing_is_escaped_and_the_head_view_marks_where_the_prompt_ends():
    at = start(model=WRITER_NAME, s="<b>bold</b> & <i>", cont="1", n="3", view="head")
    no_errors(at)
    line = writing(at)
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;i&gt;" in line and "<b>" not in line
    written = at.session_state["continuation"]
    shapes = [s for s in head_figure(at)["layout"]["shapes"] if s.get("name") == "prompt ends"]
    assert {s["x0"] for s in shapes if s["x0"] == s["x1"]} == {written.prompt_len - 0.5}
    assert {s["y0"] for s in shapes if s["y0"] == s["y1"]} == {written.prompt_len - 0.5}
    at = start(model=WRITER_NAME, s=PROMPT, view="head")  # not continued: no line, no divider
    no_errors(at)
    assert not [h for h in at.get("html") if 'class="writing"' in h.proto.body]
    assert not [s for s in head_figure(at)["layout"].get("shapes", []) if s.get("name") == "prompt ends"]


@pytest.mark.parametrize(
    "link, expected",
    [(dict(sample="1", temp="0.7"), 0.7), (dict(), 2.0), (dict(sample="1", temp="0.7", t="3"), 3.0)],
)
def test_the_bars_compare_at_the_sampling_temperature(link, expected):
    at = start(model=WRITER_NAME, s=PROMPT, view="next", cont="1", n="1", **link)
    no_errors(at)
    assert at.slider(key="next_temperature").value == expected
    assert f"T = {expected:g}" in " ".join(a["text"] for a in bars(at)["layout"]["annotations"])


@pytest.fixture(scope="module")
def short_llama(tmp_path_factory):
    return make_family(tmp_path_factory.mktemp("llama"), "llama", max_position_embeddings=12)


def test_what_cannot_be_written_is_said_and_the_text_kept(short_llama):
    at = start(model=str(short_llama), s="The cat", cont="1", n="3", present="1")
    no_errors(at)
    before = at.session_state["continuation"]
    assert len(before.ids) < 12
    for _ in range(12 - len(before.ids)):  # up to the model's 12 positions, one token at a time
        write(at)
    no_errors(at)
    full = at.session_state["continuation"]
    assert len(full.ids) == 12 and full.ids[: len(before.ids)] == before.ids
    write(at)
    no_errors(at)
    assert "fills the model's 12 positions" in infos(at)
    assert at.session_state["continuation"].ids == full.ids  # kept as it was
    at = start(model=str(short_llama), s="The cat sat on the mat. " * 3, present="1")  # the prompt fills them
    write(at)
    no_errors(at)
    assert "prompt tokens and 1 new ones exceed 12 positions" in infos(at)  # said, the prompt shown
    at = start(s=PROMPT, present="1")  # the bundled encoder reads only
    write(at)
    no_errors(at)
    assert "Write one token needs a causal decoder" in infos(at) and "SmolLM2" in infos(at)


@pytest.mark.slow  # 5-15 s alone: the full command runs it, the everyday selection not
def test_another_candidate_rewrites_the_text_from_there_and_the_link_keeps_it():
    at = start(model=WRITER_NAME, s=PROMPT, view="next", cont="1", n="4")
    no_errors(at)
    before = at.session_state["continuation"]
    assert at.session_state["next_position"] == before.prompt_len - 1  # the bars that chose the first written
    box = at.selectbox(key="next_pick")
    box.select(box.options[2]).run()  # the third of the other candidates
    no_errors(at)
    ((number, token),) = at.session_state["gen_picks"]
    assert number == 0 and token != before.ids[before.prompt_len]
    after = at.session_state["continuation"]
    model, tokenizer = load_model(WRITER_NAME)
    assert after.ids[: before.prompt_len] == before.ids[: before.prompt_len]
    assert after.ids[before.prompt_len] == token and len(after.ids) == len(before.ids)  # written on from it
    branched = PROMPT + tokenizer.decode([token])
    assert tokenizer(branched)["input_ids"] == [*before.ids[: before.prompt_len], token]
    following = generate(model, tokenizer, branched, max_new_tokens=3).ids[0].tolist()
    assert list(after.ids[before.prompt_len + 1 :]) == following[-3:]  # greedy again after the token picked
    assert at.query_params["pick"] == f"0.{token}"
    picked = re.findall(r'<span class="picked(?: next)?"[^>]*>(.*?)</span>', writing(at))  # next: the bars' token
    assert [html.unescape(p) for p in picked] == [tokenizer.decode([token])]  # shown apart in the text
    colours = bars(at)["data"][0]["marker"]["color"]
    assert colours.count("crimson") == 1 and colours[0] != "crimson"  # the token picked, not the top one
    again = start(model=WRITER_NAME, s=PROMPT, view="next", cont="1", n="4", pick=f"0.{token}")
    assert again.session_state["continuation"].ids == after.ids  # the branch is in the link
    bad = start(model=WRITER_NAME, s=PROMPT, view="next", cont="1", n="4", pick="0.999999")
    no_errors(bad)
    assert "token id 999999 picked is not in the model's" in infos(bad)


def test_a_written_token_clicked_opens_the_bars_it_was_chosen_from():
    at = start(model=WRITER_NAME, s=PROMPT, view="head", cont="1", n="3")
    no_errors(at)
    written = at.session_state["continuation"]
    pills = at.get("button_group")
    (tokens,) = [p for p in pills if p.key == "written_token"]
    tokens.set_value(2).run()  # the third token written
    no_errors(at)
    assert at.session_state["view"] == "Next token"
    assert at.session_state["next_position"] == written.prompt_len + 1
    assert at.selectbox(key="next_pick").options  # its candidates, to pick another from


def spans(at) -> list[tuple[str, str]]:
    """The writing line's (classes, characters) spans, unescaped."""
    return [(c, html.unescape(t)) for c, t in re.findall(r'<span class="([^"]*)"[^>]*>(.*?)</span>', writing(at))]


def step_back(at):
    next(b for b in at.button if b.key == "next_prev_position").click()  # ←
    return at.run()


def test_a_presentation_shows_the_prompt_over_the_bars_and_the_line_follows_the_position():
    """Before a token is written the line is the prompt (the sidebar's text is hidden); ← moves the bars, and the
    line marks the token after their position, as its bar is, and fades the rest."""
    at = start(model=WRITER_NAME, s=PROMPT, present="1", view="next")
    no_errors(at)
    last = at.session_state["next_position"]
    assert spans(at) == [("prompt", PROMPT)]  # the last position: nothing follows it
    at = step_back(at)
    assert at.session_state["next_position"] == last - 1
    assert spans(at) == [("prompt", "The cat sat on"), ("prompt next", " the")]
    assert f"After position {last - 1} (on)" in bars(at)["layout"]["title"]["text"]
    page = start(model=WRITER_NAME, s=PROMPT, view="next")  # the page has its text box: no line
    assert not [h for h in page.get("html") if 'class="writing"' in h.proto.body]


def test_the_line_of_a_continuation_frames_the_bars_position_the_written_tokens_still_coloured():
    at = start(model=WRITER_NAME, s=PROMPT, present="1", view="next", cont="1", n="3")
    no_errors(at)
    written = at.session_state["continuation"]
    first = at.session_state["next_position"] + 1  # the bars that chose the first written token
    assert first == written.prompt_len
    kinds = [c for c, _ in spans(at)]
    assert kinds[:2] == ["prompt", "written next"] and set(kinds[2:]) <= {"written after", "newest after"}, kinds
    at = step_back(at)
    kinds = [c for c, _ in spans(at)]
    assert kinds[:2] == ["prompt", "prompt next"] and "written after" in kinds, kinds
    assert written_part(at) == written.text.text[len(written.prompt) :]  # what the model wrote, faded, not lost
