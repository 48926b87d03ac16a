"""An uploaded suite with bad lines: every bad line listed at once (the first SHOWN_PROBLEMS, then a count), its
good examples offered and taken only when asked; the upload's caps at their exact limits; the time left said
while a suite is scored."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_app import chart, decode, no_errors
from test_app_coref import span_lines, upload

from attention.analysis.coref.examples import (
    ExampleError,
    parse_examples,
    parse_examples_leniently,
)

GOOD = {
    "text": "The cat sat on the mat because it was big.",
    "pronoun": "it",
    "candidates": ["cat", "mat"],
    "answer": "cat",
}


def jsonl(rows) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows)


class Session(dict):
    """Stands for st.session_state outside a page."""

    def __getattr__(self, name):
        return self.get(name)

    def __setattr__(self, name, value):
        self[name] = value


class Upload:
    """What the file box hands over: a name, the size in bytes and the content."""

    def __init__(self, data: bytes, name: str = "mine.jsonl"):
        self.data, self.name, self.size = data, name, len(data)

    def getvalue(self) -> bytes:
        return self.data


def take(monkeypatch, data: bytes, **state) -> Session:
    from ui.coref import coref_data

    session = Session(coref_upload=Upload(data), **state)
    monkeypatch.setattr(coref_data.st, "session_state", session)
    coref_data.take_upload()
    return session


# ---- the lenient reader ------------------------------------------------------------------------------


def test_the_lenient_reader_keeps_good_lines_and_names_every_bad_one():
    text = jsonl([GOOD, "not json", {**GOOD, "answer": "dog"}, "", GOOD, {"text": "x"}, {**GOOD, "pair_id": "p"}])
    examples, problems = parse_examples_leniently(text)
    assert [e.line for e in examples] == [1, 5]
    assert problems.first == (
        "line 2: not valid JSON (Expecting value)",
        "line 3: answer 'dog' is not one of the candidates",
        "line 6: missing field 'pronoun'",
        "line 7: pair_id 'p' is used 1 times, twins come in twos",
    )
    assert (problems.count, problems.more) == (4, 0)
    lines = text.splitlines()
    assert len(parse_examples(jsonl(lines[e.line - 1] for e in examples))) == 2  # a suite the strict reader takes
    with pytest.raises(ExampleError, match="^line 2: not valid JSON"):  # the strict reader: the first bad line
        parse_examples(text)


def test_the_lenient_reader_keeps_the_first_messages_and_counts_the_rest():
    text = jsonl([GOOD] + ["[]"] * 30)
    examples, problems = parse_examples_leniently(text, keep=20)
    assert len(examples) == 1
    assert problems.first == tuple(f"line {n}: expected a JSON object, got list" for n in range(2, 22))
    assert (problems.count, problems.more) == (30, 10)
    with pytest.raises(ExampleError, match="^no examples: the file has no JSON lines$"):
        parse_examples_leniently("\n \n")


# ---- the upload: listed, offered, taken when asked ---------------------------------------------------


def test_an_upload_with_bad_lines_waits_and_the_suite_in_use_stays(monkeypatch):
    from ui.coref import coref_data
    from ui.page.page import as_written

    before = ("old.jsonl", ["an example"], "upload:old")
    data = jsonl([GOOD] * 3 + ["{"] * 25).encode()
    session = take(monkeypatch, data, coref_suite=before, coref_set="Upload")
    assert session.coref_upload_error is None and session.coref_suite == before
    (name, examples, key), problems = session.coref_upload_waiting
    assert (name, len(examples), problems.count, len(problems.first)) == ("mine.jsonl", 3, 25, 20)
    text = as_written(coref_data.problems_text(name, problems)).split("  \n")
    assert text[0] == "mine.jsonl has 25 bad lines:"
    assert text[1] == "line 4: not valid JSON (Expecting property name enclosed in double quotes)"
    assert text[20].startswith("line 23: ") and text[21] == "and 5 more."
    coref_data.take_good_lines()  # the button
    assert session.coref_suite == ("mine.jsonl", examples, key) and session.coref_upload_waiting is None


def test_a_file_without_bad_lines_is_taken_at_once(monkeypatch):
    session = take(monkeypatch, jsonl([GOOD] * 2).encode())
    assert session.coref_upload_waiting is None and session.coref_upload_error is None
    assert session.coref_suite[0] == "mine.jsonl" and len(session.coref_suite[1]) == 2


def test_the_page_lists_the_bad_lines_and_scores_the_good_ones_when_asked(tiny, tiny_dir):
    from attention import load_model
    from attention.analysis.coref import score_heads
    from ui.coref.coref_data import digest
    from ui.page.page import as_written

    at, first = upload(tiny, span_lines())
    rows = [json.dumps(r) for r in span_lines()[:4]]
    text = jsonl(rows[:2] + ['{"text": 1}'] + rows[2:] + ["[]"] * 22)
    examples, problems = parse_examples_leniently(text)
    at.session_state["coref_upload_waiting"] = (("bad.jsonl", examples, "upload:" + digest(examples)), problems)
    at.run()
    listed = as_written(at.error[0].value)
    assert listed.startswith("bad.jsonl has 23 bad lines:  \nline 3: 'text' should be a str  \nline 6: expected")
    assert "line 24: expected a JSON object, got list  \nand 3 more." in listed
    assert listed.endswith("The examples in use stay as they are until you choose.")
    model, tokenizer = load_model(str(tiny_dir))
    shown = decode(chart(at, "accuracy of each head")["data"][0]["z"])
    np.testing.assert_array_equal(shown, score_heads(model, tokenizer, first).accuracy)  # the previous suite
    assert any(c.value == "Examples in use: mine\\.jsonl" for c in at.caption)
    next(b for b in at.button if b.label == "Score the 4 valid examples").click()
    at.run()
    no_errors(at)
    assert any(c.value == "Examples in use: bad\\.jsonl" for c in at.caption)
    np.testing.assert_array_equal(
        decode(chart(at, "accuracy of each head")["data"][0]["z"]), score_heads(model, tokenizer, examples).accuracy
    )


def test_a_file_with_bad_lines_as_the_first_upload_offers_its_good_ones(tiny):
    from ui.coref.coref_data import digest

    at = tiny
    at.selectbox(key="coref_set").select("Upload").run()
    examples, problems = parse_examples_leniently(jsonl([GOOD, "[]"]))
    at.session_state["coref_upload_waiting"] = (("first.jsonl", examples, "upload:" + digest(examples)), problems)
    at.run()
    assert not at.exception and not at.info  # no "Upload a JSONL file" under the list
    assert [e.value.split(" has ")[0] for e in at.error] == ["first\\.jsonl"]  # the list, nothing gone wrong
    assert [b.label for b in at.button if b.label.startswith("Score the")] == ["Score the 1 valid example"]
    with_nothing = parse_examples_leniently(jsonl(["[]"]))
    at.session_state["coref_upload_waiting"] = (("none.jsonl", [], "upload:" + digest([])), with_nothing[1])
    at.run()
    assert not at.exception and not [b for b in at.button if b.label.startswith("Score the")]
    assert len(at.error) == 1 and "None of its lines can be scored" in at.error[0].value


@pytest.fixture
def tiny(tiny_dir):
    from test_app import start

    at = start(view="coref", coref="suite", model=str(tiny_dir))
    no_errors(at)
    return at


# ---- the caps, at their limits -----------------------------------------------------------------------


def test_the_example_cap_takes_exactly_the_limit_and_refuses_one_more(monkeypatch):
    from ui.coref import coref_data

    monkeypatch.setattr(coref_data, "MAX_EXAMPLES", 3)
    session = take(monkeypatch, jsonl([GOOD] * 3).encode())
    assert session.coref_upload_error is None and len(session.coref_suite[1]) == 3
    session = take(monkeypatch, jsonl([GOOD] * 4).encode())
    assert session.coref_upload_error == "mine.jsonl has 4 examples; a suite may have at most 3."
    assert session.coref_suite is None
    session = take(monkeypatch, jsonl([GOOD] * 4 + ["{"]).encode())  # the bad line is not counted
    assert session.coref_upload_error == "mine.jsonl has 4 examples without a problem; a suite may have at most 3."
    assert session.coref_upload_waiting is None


def test_the_byte_cap_takes_exactly_the_limit_and_refuses_one_more(monkeypatch):
    from ui.coref import coref_data

    data = jsonl([GOOD] * 2).encode()
    monkeypatch.setattr(coref_data, "MAX_UPLOAD_BYTES", len(data))
    session = take(monkeypatch, data)
    assert session.coref_upload_error is None and len(session.coref_suite[1]) == 2
    session = take(monkeypatch, data + b"\n")  # a blank line more: one byte past
    assert session.coref_upload_error == (
        f"mine.jsonl is {len(data) + 1:,} bytes; files up to {len(data):,} bytes are accepted."
    )
    assert session.coref_suite is None


def test_a_file_just_past_two_megabytes_is_said_to_the_byte():
    from ui.coref import coref_data

    assert coref_data.MAX_UPLOAD_BYTES == 2 * 1024 * 1024
    assert coref_data.too_big("big.jsonl", 2 * 1024 * 1024 + 1) == (
        "big.jsonl is 2,097,153 bytes; files up to 2 MB are accepted."
    )
    assert coref_data.too_big("big.jsonl", 3 * 1024 * 1024) == "big.jsonl is 3.0 MB; files up to 2 MB are accepted."


# ---- the time left -----------------------------------------------------------------------------------


def test_the_time_left_comes_from_the_rate_since_the_first_report():
    from ui.coref.coref_data import TimeLeft, duration

    now = [100.0]
    left = TimeLeft(clock=lambda: now[0])
    assert left(96, 2000) == ""  # the first report: no rate yet (the tokenizer's time is not in it)
    now[0] = 104.0
    assert left(196, 2000) == ", about 1 min 10 s left"  # 100 examples in 4 s: 1804 more in 72 s
    now[0] = 170.0
    assert left(1990, 2000) == ", about 5 s left"
    assert left(2000, 2000) == ""
    assert [duration(s) for s in (2, 42, 59, 61, 127, 599, 601, 3600)] == [
        "5 s",
        "40 s",
        "1 min",
        "1 min",
        "2 min 10 s",
        "10 min",
        "10 min",
        "60 min",
    ]


# ---- a suite about to be scored clears the previous one's results ------------------------------------


def area_and_before(at) -> tuple[int, list[str]]:
    """The index of the top-level block holding the set picker, and the kinds of the elements before it."""
    children = list(at.main.children.values())
    index = next(
        i
        for i, c in enumerate(children)
        if hasattr(c, "children") and any(s.key == "coref_set" for s in c.get("selectbox"))
    )
    return index, [getattr(c, "type", None) for c in children[:index]]


def test_a_suite_about_to_be_scored_is_drawn_after_empty_places(tiny):
    """In the browser the previous suite's results would stay, greyed, under the progress bar: the run that
    scores draws empty elements where they were (tests/browser/test_browser_upload.py sees them go)."""
    from ui.coref.coref_data import SHIFT

    tiny.selectbox(key="head").select(1).run()  # a head of the person's: the page does not run again to open the best
    at, _ = upload(tiny, span_lines()[::-1])  # examples no other test scores: this run scores them
    index, before = area_and_before(at)
    assert before[-SHIFT:] == ["empty"] * SHIFT
    at.run()  # scored already: drawn where it was, nothing cleared
    index_now, before_now = area_and_before(at)
    assert index_now == index - SHIFT and before_now == before[:-SHIFT]
