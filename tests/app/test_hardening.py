"""Cheap attacks on a public server, each bounded before any work: a link repeating a head (or an ablated head,
or a candidate) hundreds of times, a list longer than any model, an upload made to be slow or to crash the JSON
reader, a sentence of megabytes, and an unlocked model box said in the server's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_app import SENTENCE, no_errors, start

ROOT = Path(__file__).resolve().parents[2]


class Attrs(dict):
    """Stands for st.session_state outside a page."""

    def __getattr__(self, name):
        return self.get(name)

    def __setattr__(self, name, value):
        self[name] = value


def run_python(code: str, timeout: float) -> dict:
    """`code` in a fresh interpreter, killed past `timeout` seconds; the JSON it prints last."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- a link's lists -----------------------------------------------------------------------------------------


def test_a_link_repeating_a_head_400_times_draws_it_once():
    began = time.perf_counter()
    at = start(s=SENTENCE, view="head", draw="lines", layer="0", head="0", heads=",".join(["0"] * 400))
    no_errors(at)
    traces = [t for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"]]
    drawn = [t for t in traces if t.get("legendgroup") == "L0 H0"]
    assert 1 <= len(drawn) <= 8  # one head's opacity bins, not one set per repeat
    assert at.multiselect(key="line_heads").value == [0]
    assert at.query_params["heads"] == "0"
    assert time.perf_counter() - began < 60


def test_a_link_repeating_an_ablated_head_or_a_candidate_asks_for_each_once():
    at = start(s=SENTENCE, view="ablation", ablate=",".join(["0.0"] * 400))
    no_errors(at)
    assert at.multiselect(key="ablate_heads").value == [(0, 0)]
    assert at.query_params["ablate"] == "0.0"
    at = start(s=SENTENCE, view="coref", pronoun="7", candidates=",".join(["1"] + ["4"] * 400), answer="4")
    no_errors(at)
    assert at.multiselect(key="coref_candidates").value == [1, 4]
    assert at.query_params["candidates"] == "1,4"


def test_a_list_past_its_bounds_is_cut_or_refused_with_a_notice_naming_the_bound():
    from ui.state.url_values import MAX_LIST_CHARS, MAX_LIST_ITEMS

    at = start(s=SENTENCE, draw="lines", heads=",".join(str(i) for i in range(100)))
    no_errors(at)
    assert any(f"at most {MAX_LIST_ITEMS}" in i.value and "100 different items" in i.value for i in at.info)
    assert at.multiselect(key="line_heads").value == list(range(12))  # then the model's 12 heads
    at = start(s=SENTENCE, ablate=",".join(["1.1"] * 1500))  # 5,999 characters
    no_errors(at)
    assert any(f"longer than {MAX_LIST_CHARS:,} characters" in i.value for i in at.info)


def test_clamp_keeps_no_repeats_and_no_head_past_the_model(monkeypatch):
    from ui.state import state

    session = Attrs(
        layer=0,
        head=0,
        url_notices=[],
        line_heads=[3, 3, 1, 15, 1],
        ablate_heads=[(0, 1), (0, 1), (2, 3)],
        coref_candidates=[4, 1, 4, 4],
    )
    monkeypatch.setattr(state.st, "session_state", session)
    state.clamp_selection(6, 12)
    assert session.line_heads == [3, 1]
    assert session.ablate_heads == [(0, 1), (2, 3)]
    assert session.coref_candidates == [4, 1]


# ---- an uploaded suite ------------------------------------------------------------------------------------------


def test_a_2mb_line_with_150000_candidates_is_refused_at_once_naming_the_bound():
    result = run_python(
        """
import json, time
from attention.analysis.coref.examples import ExampleError, parse_examples
words = [f"w{i}" for i in range(150_000)]
line = json.dumps({"text": " ".join(words) + " it", "pronoun": "it", "candidates": words, "answer": "w0"})
began = time.perf_counter()
try:
    parse_examples(line)
    said = None
except ExampleError as err:
    said = str(err)
print(json.dumps({"seconds": time.perf_counter() - began, "said": said, "size": len(line)}))
""",
        timeout=60,
    )
    assert result["size"] > 2_000_000
    assert result["seconds"] < 1
    assert result["said"] == f"line 1: {result['size']:,} characters; a line may have at most 20,000"


def test_a_suite_at_the_bounds_is_read_in_a_second():
    from attention.analysis.coref.examples import (
        MAX_CANDIDATES,
        MAX_LINE_CHARS,
        parse_examples,
    )

    lines = []
    for kind in ("w", "a.w"):  # plain words, and words with punctuation inside (a scan each)
        words = [f"{kind}{i}" for i in range(MAX_CANDIDATES)]
        text = "a.a b " * ((MAX_LINE_CHARS - 2000) // 6) + " ".join(words) + " it"
        lines += [json.dumps({"text": text, "pronoun": "it", "candidates": words, "answer": words[0]})] * 55
    data = "\n".join(lines)
    assert len(data) > 2_000_000 and all(len(line) <= MAX_LINE_CHARS for line in lines)
    began = time.perf_counter()
    assert len(parse_examples(data)) == 110
    assert time.perf_counter() - began < 1.5
    too_many = json.dumps(
        {
            "text": " ".join(f"w{i}" for i in range(70)),
            "pronoun": "w0",
            "candidates": [f"w{i}" for i in range(1, 70)],
            "answer": "w1",
        }
    )
    with pytest.raises(ValueError, match=f"^line 1: has 69 candidates; a line may have at most {MAX_CANDIDATES}$"):
        parse_examples(too_many)


@pytest.mark.parametrize(
    "line, said",
    [
        ("[" * 5000, "line 2: JSON nested too deeply to read"),
        ('{"text": ' + "7" * 5000 + "}", "line 2: a number has more than 4,300 digits"),
    ],
    ids=["deep-json", "long-integer"],
)
def test_deep_json_and_long_integers_are_messages_naming_the_line(monkeypatch, line, said):
    from ui.coref import coref_data

    first = json.dumps({"text": SENTENCE, "pronoun": "it", "candidates": ["animal", "street"], "answer": "animal"})

    class Upload:
        name, size = "odd.jsonl", 100

        def getvalue(self):
            return (first + "\n" + line).encode()

    session = Attrs(coref_upload=Upload())
    monkeypatch.setattr(coref_data.st, "session_state", session)
    coref_data.take_upload()
    (name, examples, _), problems = session.coref_upload_waiting  # listed; the good first line offered
    assert (name, len(examples), problems.first) == ("odd.jsonl", 1, (said,))


def test_reading_an_upload_stops_at_the_suites_time_limit(monkeypatch):
    from ui.compute import slots
    from ui.coref import coref_data

    row = json.dumps(
        {"text": SENTENCE, "pronoun": "it", "candidates": ["animal", "street"], "answer": "animal", "n": 1}
    )

    class Upload:
        name, size = "slow.jsonl", 100

        def getvalue(self):
            return "\n".join([row] * 300).encode()

    session = Attrs(coref_upload=Upload())
    monkeypatch.setattr(coref_data.st, "session_state", session)
    monkeypatch.setitem(slots.TIME_LIMITS, "suite", 0)
    coref_data.take_upload()
    assert session.coref_upload_error.startswith(
        "slow.jsonl: This took longer than 0 s and was stopped; try a smaller suite."
    )
    assert session.coref_suite is None


def test_grouping_fields_are_capped_and_found_once_per_suite(monkeypatch):
    import ui.coref.coref_groups as groups
    from attention.analysis.coref import parse_examples
    from ui.coref.coref_data import Suite

    rows = [
        {
            "text": SENTENCE,
            "pronoun": "it",
            "candidates": ["animal", "street"],
            "answer": "animal",
            **{f"f{k}": f"v{i % 2}" for k in range(40)},
        }
        for i in range(6)
    ]
    examples = parse_examples("\n".join(json.dumps(r) for r in rows))
    assert groups.group_fields(examples) == [f"f{k}" for k in range(groups.MAX_FIELDS)]
    calls = []
    monkeypatch.setattr(groups, "group_fields", lambda e: calls.append(e) or ["f0"])
    monkeypatch.setattr(groups, "chosen_suite", lambda: Suite("upload", "many.jsonl", examples, "upload:many-fields"))
    assert groups.suite_fields(examples) == groups.suite_fields(examples) == ["f0"]
    assert len(calls) == 1


# ---- a sentence of megabytes --------------------------------------------------------------------------------------


def test_encoding_5mb_of_text_is_quick_and_says_it_was_cut():
    result = run_python(
        """
import json, resource, time
from attention import load_model
from attention.runs.inputs import encode
_, tokenizer = load_model()
text = ("The animal didn't cross the street because it was too tired. " * 90_000)[:5_000_000]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
began = time.perf_counter()
enc = encode(tokenizer, text, None, max_length=512)
print(json.dumps({"seconds": time.perf_counter() - began, "tokens": len(enc.tokens), "notice": enc.notice,
                  "grew_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}))
""",
        timeout=120,
    )
    assert result["seconds"] < 2 and result["grew_mb"] < 200  # whole: 7 to 12 s and 850 MB more
    assert result["tokens"] == 512
    assert result["notice"].startswith("The input has at least ")
    assert result["notice"].endswith(
        "tokens; the model reads at most 512 positions, so only the first 512 tokens are shown."
    )


def test_a_cut_that_leaves_fewer_tokens_than_positions_is_said_in_characters(minilm):
    from attention.runs.inputs import CHARS_PER_POSITION, encode

    _, tokenizer = minilm
    enc = encode(tokenizer, "it" + " " * 40_000 + "animal", None, max_length=512)  # spaces make no tokens
    assert enc.tokens == ["[CLS]", "it", "[SEP]"]
    assert enc.notice == (
        f"The input has 40,008 characters; the model reads at most 512 positions, so only the "
        f"first {CHARS_PER_POSITION * 512:,} characters of each sentence are read (3 tokens)."
    )


class Reading:
    """A tokenizer (or its `tokenizers` backend) that notes the longest text it is given, then does as it would."""

    def __init__(self, inner):
        self.inner, self.longest = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def read(self, *texts) -> None:
        flat = [t for text in texts for t in (text if isinstance(text, list) else [text]) if t]
        self.longest = max([self.longest] + [len(t) for t in flat])

    def encode(self, *args, **kwargs):
        self.read(*args[:2])
        return self.inner.encode(*args, **kwargs)

    def __call__(self, texts, **kwargs):
        self.read(texts)
        return self.inner(texts, **kwargs)


def test_the_trace_and_the_padded_batch_read_a_long_text_cut(minilm, monkeypatch):
    """The 5 MB text reaches no tokenizer whole (which would take 10 s and more): each reads at most 64 characters
    per position. What the tokenizer is given is counted, not timed, so a busy machine cannot fail it."""
    from attention.runs.inputs import CHARS_PER_POSITION
    from attention.runs.run import run_padded_batch
    from ui.compute.models import get_model
    from ui.compute.runs import get_trace

    text = "word " * 1_000_000
    app_tokenizer = get_model("")[1]
    backend = Reading(app_tokenizer.backend_tokenizer)
    monkeypatch.setattr(app_tokenizer, "backend_tokenizer", backend)
    trace = get_trace("", (text,), "", 0, 0)
    tokenizer = Reading(minilm[1])
    batch = run_padded_batch(minilm[0], tokenizer, [text, "It was tired."])
    assert 0 < backend.longest <= CHARS_PER_POSITION * 512 and 0 < tokenizer.longest <= CHARS_PER_POSITION * 512
    assert len(batch.tokens[0]) == 512 and trace is not None


def test_a_paste_past_what_runs_is_cut_on_run_and_said():
    """A browser drops a paste longer than the box's max_chars without a word: the box takes far more than runs,
    and Run cuts it to MAX_TEXT_CHARS, says so and shows what runs in the box."""
    from ui.state.url_values import MAX_PASTE_CHARS, MAX_TEXT_CHARS

    at = start()
    box = at.text_area(key="text")
    assert box.max_chars == MAX_PASTE_CHARS and at.text_input(key="text_b").max_chars == MAX_PASTE_CHARS
    pasted = "word " * 12_000  # 60,000 characters
    box.set_value(pasted)
    at.text_input(key="text_b").set_value("more " * 11_000)  # 55,000
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    no_errors(at)
    assert at.session_state["submitted"] == (pasted[:MAX_TEXT_CHARS], ("more " * 11_000)[:MAX_TEXT_CHARS].strip())
    assert at.text_area(key="text").value == pasted[:MAX_TEXT_CHARS]
    said = " ".join(i.value for i in at.info)
    assert "The sentence was 60,000 characters; its first 50,000" in said
    assert "The second sentence was 55,000 characters" in said
    next(b for b in at.button if b.label == "Run").click()  # run again: nothing more to cut, nothing said
    at.run()
    assert not any("characters; its first" in i.value for i in at.info)


# ---- the unlocked model box -----------------------------------------------------------------------------------


def test_the_server_says_how_it_serves_in_its_log_at_start_up(monkeypatch, caplog):
    from ui.serve import preload

    monkeypatch.delenv("ATTENTION_SOURCES", raising=False)
    with caplog.at_level("WARNING", logger="attention-app"):
        preload.log_how_served()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("Serving on 127.0.0.1 (this machine only): the model box is unlocked")
    caplog.clear()
    monkeypatch.setenv("ATTENTION_SOURCES", "")
    preload.log_how_served()
    assert [r.getMessage() for r in caplog.records] == [
        "Serving on 127.0.0.1 (this machine only): the model box loads only ATTENTION_SOURCES's list and the "
        "bundled model; no server file is offered."
    ]


@pytest.mark.slow  # 5-17 s on a busy 2-core machine (two processes of their own): the full command runs it
def test_the_server_warm_up_logs_how_it_serves_once_and_loads_the_writer():
    env = {k: v for k, v in os.environ.items() if k not in ("ATTENTION_SOURCES", "ATTENTION_WARM_WRITER")}
    env["PYTHONPATH"] = str(ROOT)
    # what importing app.py starts in the server, a page shown meanwhile
    code = "from ui.serve import preload; preload.page_shown(); preload.start_warm_up().join()"
    code += "; from ui.compute.models import LOADED; print(sorted(LOADED))"  # the bundled writer warmed last
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.count("Serving on 127.0.0.1 (this machine only)") == 1
    assert out.stdout.strip().splitlines()[-1] == "['', 'smollm2']"
    env["ATTENTION_WARM_WRITER"] = "0"  # the operator's choice: the writer loaded when a page asks for it
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['']"


def test_a_rerun_does_not_read_every_map_again_for_patterns_or_the_gqa_change(monkeypatch):
    """The overview's pattern labels and the GQA view's map change are kept: a rerun of the same page reads
    no map for them (at 512 tokens each reads every map of the run)."""
    from streamlit.testing.v1 import AppTest

    import ui.compute.computations as computations

    calls = {"head_stats": 0, "map_change": 0}

    def counted(name):
        real = getattr(computations, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    for name in calls:
        monkeypatch.setattr(computations, name, counted(name))
    sentence = "A fox saw a hen near the barn."  # a sentence of its own, so nothing is kept from other tests
    for view, params, name in (("overview", {"patterns": "1"}, "head_stats"), ("efficient", {"kv": "6"}, "map_change")):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params.update(s=sentence, view=view, **params)
        at.run()
        assert not at.exception, at.exception
        assert calls[name] == 1
        at.run()  # the same page again: a rerun, as any click makes
        assert not at.exception
        assert calls[name] == 1, f"{name} ran again on a rerun"
