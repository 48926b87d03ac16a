"""Which coreference examples the view scores: the built-in suite, a public set (Winogender, GAP) or an
upload; where each public set comes from; and its scores per model, cached, with progress and a stop."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attention.analysis.coref import (
    CorefExample,
    CorefResult,
    ExampleError,
    load_examples,
    score_heads,
)
from attention.analysis.coref.examples import Problems, load_examples_leniently

from ..compute.limits import busy_message, heavy_guard, too_long_message
from ..compute.models import get_model
from ..compute.slots import ServerBusy, TooLong
from ..compute.stores import MB, BoundedStore, kept, store
from ..page.page import plain
from ..serve.settings import MAX_EXAMPLES, MAX_UPLOAD_BYTES
from ..state.state import COREF_SETS

DATA = Path(__file__).resolve().parents[2] / "data"
# MAX_UPLOAD_BYTES (2 MB, the same limit as .streamlit/config.toml) and MAX_EXAMPLES (5,000) are
# operator settings: ui/serve/settings.py


@dataclass(frozen=True)
class PublicSet:
    file: str
    source: str
    licence: str
    cite: str


# from data/README.md
SETS = {
    "builtin": PublicSet(
        "coref_examples.jsonl",
        "87 examples written for this project; 8 lines adapted from the Winograd Schema Challenge (WSC273).",
        "CC BY 4.0 (WSC273: CC BY 4.0)",
        "Hector J. Levesque, Ernest Davis and Leora Morgenstern. 2012. The Winograd Schema Challenge. KR 2012.",
    ),
    "winogender": PublicSet(
        "winogender.jsonl",
        "Winogender Schemas, https://github.com/rudinger/winogender-schemas: 720 sentences, "
        '120 templates × male/female/neutral pronoun × the participant or "someone".',
        "MIT (data/LICENSE-winogender)",
        "Rachel Rudinger, Jason Naradowsky, Brian Leonard and Benjamin Van Durme. 2018. Gender Bias in "
        "Coreference Resolution. NAACL-HLT 2018.",
    ),
    "gapdev": PublicSet(
        "gap-development.jsonl",
        "GAP Coreference, https://github.com/google-research-datasets/gap-coreference: the development "
        "split, 2000 Wikipedia passages.",
        "Apache License 2.0 (data/LICENSE-gap)",
        "Kellie Webster, Marta Recasens, Vera Axelrod and Jason Baldridge. 2018. Mind the GAP: A Balanced "
        "Corpus of Gendered Ambiguous Pronouns. TACL 2018.",
    ),
    "gapval": PublicSet(
        "gap-validation.jsonl",
        "GAP Coreference, https://github.com/google-research-datasets/gap-coreference: the validation "
        "split, 454 Wikipedia passages.",
        "Apache License 2.0 (data/LICENSE-gap)",
        "Kellie Webster, Marta Recasens, Vera Axelrod and Jason Baldridge. 2018. Mind the GAP: A Balanced "
        "Corpus of Gendered Ambiguous Pronouns. TACL 2018.",
    ),
}


@dataclass(frozen=True)
class Suite:
    key: str  # a SETS key or "upload"
    name: str  # shown on the page: the set's label or the uploaded file's name
    examples: list[CorefExample]
    cache_key: str  # what the scores are stored under, with the model's source


@kept(max_entries=8)
def set_examples(key: str) -> list[CorefExample]:
    return load_examples(DATA / SETS[key].file)


def digest(examples: list[CorefExample]) -> str:
    text = "\n".join(repr(e) for e in examples)  # every field: words, spans, answer, grouping fields
    return hashlib.sha256(text.encode()).hexdigest()


def set_key() -> str:
    label = st.session_state.get("coref_set", COREF_SETS["builtin"])
    return next((k for k, v in COREF_SETS.items() if v == label), "builtin")


def chosen_suite() -> Suite | None:
    """The suite picked; None for "Upload" before a valid file came."""
    key = set_key()
    if key == "upload":
        upload = st.session_state.get("coref_suite")  # (file name, examples, digest) of the last valid upload
        return Suite("upload", upload[0], upload[1], upload[2]) if upload else None
    return Suite(key, "the built-in suite" if key == "builtin" else COREF_SETS[key], set_examples(key), key)


# ---- scores, cached per model and suite ------------------------------------------------------------


class TimeLeft:
    """ ", about 40 s left": the time a job of `total` steps still needs at its rate since the first step it
    reported (the first report, before any rate, says nothing)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.first: tuple[float, int] | None = None  # (time, steps done) at the first report

    def __call__(self, done: int, total: int) -> str:
        now = self.clock()
        if self.first is None:
            self.first = (now, done)
        began, done_then = self.first
        if done <= done_then or done >= total:
            return ""
        return f", about {duration((total - done) * (now - began) / (done - done_then))} left"


def duration(seconds: float) -> str:
    """A time to come, no finer than it can be known: to 5 s under a minute, to 10 s under ten, then minutes."""
    step = 5 if seconds < 60 else 10 if seconds < 600 else 60
    rounded = max(5, step * round(seconds / step))
    minutes, rest = divmod(rounded, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def scoring_ahead(source: str) -> bool:
    """Whether this run will score the suite picked with the model of `source` (not yet scored, not stopped)."""
    suite = chosen_suite()
    return (
        suite is not None
        and not is_scored(source, suite)
        and st.session_state.get("coref_stopped") != (source, suite.cache_key)
    )


SHIFT = 4  # elements above the view that may be gone since the last run: a link's notices (shown once) …


def suite_area(source: str):
    """Where the Suite and Twins modes draw. The browser keeps the last run's elements, greyed, until this run
    draws over them or ends, and a container drawn where the last run's was keeps its contents too; so a
    suite about to be scored (GAP: a minute) is drawn after SHIFT empty elements, which take the place of
    the previous suite's results even where up to SHIFT - 1 elements above are gone since the last run."""
    if scoring_ahead(source):
        for _ in range(SHIFT):
            st.empty()  # an element where a block was: the block and all its contents go
    return st.container()


def suite_store() -> BoundedStore:
    return store("coref-suites", 8, 150 * MB)


def suite_scores(source: str, suite: Suite, progress=None) -> CorefResult:
    def compute(deadline):
        model, tokenizer = get_model(source)
        return score_heads(model, tokenizer, suite.examples, progress=deadline.wrap(progress))

    return suite_store().get_or_compute_heavy((source, suite.cache_key), "suite", compute)


def is_scored(source: str, suite: Suite) -> bool:
    return suite_store().get((source, suite.cache_key)) is not None


def stop(source: str, cache_key: str) -> None:
    st.session_state.coref_stopped = (source, cache_key)


def scores_or_message(source: str, suite: Suite, what: str) -> CorefResult | None:
    """The suite's scores with a progress bar and a stop button while they are computed; None (and a
    message saying why) when the suite cannot be scored with this model or the scoring was stopped.

    The stop button is Streamlit's own: clicking it asks for a rerun, which interrupts this script at
    its next progress update; the rerun finds `coref_stopped` set and offers to start again."""
    if st.session_state.get("coref_stopped") == (source, suite.cache_key) and not is_scored(source, suite):
        # In a container of their own: drawn where "Stop scoring" is drawn next, "Score it" would be
        # reused for it in the browser, and the first click on Stop after a restart would be lost.
        stopped = st.container()
        stopped.info(f"Scoring {plain(suite.name)} with {plain(what)} was stopped.")
        if stopped.button("Score it", key=f"rescore-{suite.cache_key}-{what}"):
            st.session_state.coref_stopped = None
            st.rerun()
        return None
    bar, button = st.empty(), st.empty()
    if not is_scored(source, suite):
        button.button(
            "Stop scoring", key=f"stop-{suite.cache_key}-{what}", on_click=stop, args=(source, suite.cache_key)
        )
    left = TimeLeft()

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Scoring {what}: {done} of {total} examples{left(done, total)}…")

    try:
        with heavy_guard() as outcome:
            result = suite_scores(source, suite, progress)
    except ExampleError as err:  # a word this model's tokenizer splits or joins otherwise
        st.error(f"{plain(suite.name)} cannot be scored with {plain(what)}: {plain(str(err))}")
        return None
    finally:
        bar.empty()
        button.empty()
    if not outcome.ok:
        return None
    if result.n == 0:
        st.info(
            f"None of the {len(suite.examples)} examples with an answer could be scored with {plain(what)}"
            + (f" ({plain(excluded_reasons(result))})." if result.excluded else ".")
        )
        return None
    return result


def excluded_reasons(result: CorefResult) -> str:
    return "; ".join(f"{n} with {reason}" if n > 1 else reason for reason, n in result.excluded_counts.items())


# ---- the picker ------------------------------------------------------------------------------------

SHOWN_PROBLEMS = 20  # an upload's bad lines listed; the others are counted


def read_upload(data: bytes) -> tuple[list[CorefExample], Problems]:
    """An upload's good examples and its bad lines' problems, read as a heavy job of the "suite" kind: in the
    server's heavy slot, within the suite's time limit (checked every few lines: TooLong past it), kept per
    file content."""

    def compute(deadline):
        return load_examples_leniently(data, check=deadline.check, keep=SHOWN_PROBLEMS)

    key = ("upload", hashlib.sha256(data).hexdigest())
    return store("coref-uploads", 4, 50 * MB).get_or_compute_heavy(key, "suite", compute)


def too_big(name: str, size: int) -> str:
    """The message for a file past MAX_UPLOAD_BYTES; its size to the byte where tenths of MB would hide it."""
    shown = f"{size / MB:.1f} MB" if round(size / MB, 1) > MAX_UPLOAD_BYTES / MB else f"{size:,} bytes"
    limit = f"{MAX_UPLOAD_BYTES / MB:g} MB" if MAX_UPLOAD_BYTES * 10 % MB == 0 else f"{MAX_UPLOAD_BYTES:,} bytes"
    return f"{name} is {shown}; files up to {limit} are accepted."


def upload_or_refusal(upload) -> tuple[list[CorefExample], Problems] | str:
    """The upload's good examples and its problems, or the message saying why the file as a whole is refused:
    too big, not UTF-8 or without a line, too long to read, the server busy, too many examples."""
    if upload.size > MAX_UPLOAD_BYTES:
        return too_big(upload.name, upload.size)
    try:
        examples, problems = read_upload(upload.getvalue())
    except ExampleError as err:
        return f"{upload.name}: {err}"
    except TooLong as err:
        return f"{upload.name}: {too_long_message(err)}"
    except ServerBusy as err:
        return f"{upload.name}: {busy_message(err)}"
    if len(examples) > MAX_EXAMPLES:
        good = " without a problem" if problems.count else ""
        return f"{upload.name} has {len(examples):,} examples{good}; a suite may have at most {MAX_EXAMPLES:,}."
    return examples, problems


def take_upload() -> None:
    """Read an uploaded JSONL file. A good one is the suite in use; one with bad lines waits, its problems
    listed, until its person chooses to score its good examples; a refused one is a message. Until a file
    is taken, the suite in use stays as it was."""
    upload = st.session_state.get("coref_upload")
    st.session_state.coref_upload_error = None
    st.session_state.coref_upload_waiting = None
    if upload is None:
        return
    read = upload_or_refusal(upload)
    if isinstance(read, str):
        st.session_state.coref_upload_error = read
        return
    examples, problems = read
    suite = (upload.name, examples, "upload:" + digest(examples))  # (file name, examples, digest)
    if problems.count:
        st.session_state.coref_upload_waiting = (suite, problems)
    else:
        use_upload(suite)


def use_upload(suite: tuple[str, list[CorefExample], str]) -> None:
    st.session_state.coref_suite = suite
    st.session_state.coref_set = COREF_SETS["upload"]


def take_good_lines() -> None:
    """The button under a file's problems: its good examples become the suite in use."""
    suite, _ = st.session_state.coref_upload_waiting
    st.session_state.coref_upload_waiting = None
    use_upload(suite)


def problems_text(name: str, problems: Problems) -> str:
    """The bad lines of an upload as markdown: one per line, the first SHOWN_PROBLEMS, then how many more."""
    said = "a bad line" if problems.count == 1 else f"{problems.count:,} bad lines"
    lines = [f"{plain(name)} has {said}:", *(plain(m) for m in problems.first)]
    if problems.more:
        lines.append(f"and {problems.more:,} more.")
    return "  \n".join(lines)


def waiting_upload() -> bool:
    """An upload with bad lines: its problems and the button that scores its good examples. True if one waits."""
    waiting = st.session_state.get("coref_upload_waiting")
    if not waiting:
        return False
    (name, examples, _), problems = waiting
    box = st.container()  # the list and its button drawn as one, where the upload's error would be
    if examples:
        box.error(problems_text(name, problems) + "  \nThe examples in use stay as they are until you choose.")
        noun = "example" if len(examples) == 1 else "examples"
        box.button(f"Score the {len(examples):,} valid {noun}", key="coref_take_good", on_click=take_good_lines)
    else:
        box.error(
            problems_text(name, problems) + "  \nNone of its lines can be scored; the examples in use "
            "stay as they were."
        )
    return True


def suite_picker() -> Suite | None:
    """The set picker, the chosen public set's source, licence and citation, and the upload box."""
    left, right = st.columns([2, 3])
    with left:
        st.selectbox("Examples to score", list(COREF_SETS.values()), key="coref_set", persist_state="session")
    key = set_key()
    with right:
        if key in SETS:
            facts = SETS[key]
            # the project's own text (SETS above), not a visitor's: shown as markdown so its address is a link
            st.caption(f"Source: {facts.source}  \nLicence: {facts.licence}  \nCite: {facts.cite}")
        else:
            st.file_uploader(
                "A JSONL file: text, pronoun, candidates, answer per line (see data/README.md)",
                type=["jsonl", "json", "txt"],
                key="coref_upload",
                on_change=take_upload,
            )
    if st.session_state.get("coref_upload_error"):
        st.error(plain(st.session_state.coref_upload_error) + "  \nThe examples in use stay as they were.")
    waiting = key == "upload" and waiting_upload()
    suite = chosen_suite()
    if suite is None:
        if not waiting:
            st.info("Upload a JSONL file of examples to score them.")
    elif key == "upload":
        st.caption(f"Examples in use: {plain(suite.name)}")
    return suite
