"""What the report's header and captions say: the choices that shaped the view, only those that apply to it
(the writing settings only where the model wrote, the coreference mode's own choices, nothing left empty), and
each part's caption in words."""

from __future__ import annotations

import html
import re

import plotly.graph_objects as go
import streamlit as st

from attention.analysis.coref.mentions import word_spans

from ..compute.generation import Settings
from ..state.state import COREF_MODES, COREF_TWINS, NO_GROUPING, current_choices, view_key
from ..state.view_context import ViewContext

# the coreference choices, kept as word indices, are shown as the words of the submitted sentence
WORD_CHOICES = {"coref_pronoun": "pronoun", "coref_candidates": "candidates", "coref_answer": "answer"}
# Continue's settings: one row saying how the text was written, where it was
WRITING = ("cont", "n", "sample", "temp", "topk", "topp", "seed")
# the coreference view's choices, by the mode (and, for minimal pairs, the twins) that draws them
COREF_USES = {
    "sentence": {"pronoun", "candidates", "answer", "rank"},
    "suite": {"set", "by", "ga", "gb", "vs"},
    "pairs suite": {"twins", "set", "pair"},
    "pairs sentence": {"twins", "twin", "tanswer"},
}
# a figure's internal name (its PNG's file name), or its pieces, in words, for a figure without a title
NAME_WORDS = {
    "head-embedding": "Heads compared across sentences",
    "overview": "Every head of every layer",
    "coref": "coreference:",
    "qk": "query·key",
    "gqk": "global query·key",
    "gqa": "grouped-query attention",
    "walk": "guided walk:",
    "ranked": "heads ranked by accuracy",
}


def report_facts(ctx: ViewContext) -> list[tuple[str, str]]:
    """The view (drawn from `ctx`) and every choice that shaped it, as (name, value) rows for the report's header,
    each as the page shows it; a choice that does not apply to this view, mode or model, or is left empty, is not
    said."""
    said = st.session_state.get("page_shown", {})
    words: list[str] | None = None
    rows = []
    for p, value in current_choices():
        if p.key in ("present", "source") or not applies(p.name, value, p.key in said):
            continue
        label, text = p.label, shown(value)
        if p.key in said:
            text = said[p.key]
        elif p.key in WORD_CHOICES:
            words = sentence_words(ctx) if words is None else words
            label, text = WORD_CHOICES[p.key], in_words(value, words)
        rows.append((label[0].upper() + label[1:], text))
    if ctx.continuation is not None:  # the views were drawn on a continuation: how it was written
        rows.append(("Continued by the model", Settings.chosen().describe()))
    return rows


def applies(name: str, value, said: bool) -> bool:
    """Whether the choice URL-named `name` shaped this page: set, and drawn for this view's mode."""
    if value is None or value == "" or value == [] or name in WRITING:
        return False
    if name == "strip":  # only a long input's strip can be folded; the page says so where it is
        return said
    if name in ("by", "ga", "gb") and st.session_state.get("coref_by", NO_GROUPING) == NO_GROUPING:
        return False
    if view_key() == "coref" and any(name in uses for uses in COREF_USES.values()):
        return name in COREF_USES[coref_mode()]
    return True


def coref_mode() -> str:
    s = st.session_state
    mode = next((word for word, label in COREF_MODES.items() if label == s.get("coref_mode")), "sentence")
    if mode == "pairs":
        return "pairs sentence" if s.get("coref_twins") == COREF_TWINS["sentence"] else "pairs suite"
    return mode


def shown(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(f"L{v[0]} H{v[1]}" if isinstance(v, tuple) else str(v) for v in value) or "none"
    return str(value)


def sentence_words(ctx: ViewContext) -> list[str]:
    """The words of the sentence drawn (its first segment) as the tokenizer cuts them, as the coreference view
    offers them."""
    enc = ctx.run.encoded
    word_ids = [w if s == 0 else None for w, s in zip(enc.word_ids, enc.sequence_ids)]  # a pair's B: other text
    return [written for written, _ in word_spans(ctx.sentence, word_ids, enc.offsets)]


def in_words(value, words: list[str]) -> str:
    """A word index, or a list of them, as the words; an index past the sentence's words as the number."""

    def word(i: int) -> str:
        return words[i] if 0 <= i < len(words) else str(i)

    if isinstance(value, list):
        return ", ".join(map(word, value)) or "none"
    return word(value)


def part_caption(name: str, part) -> str:
    """A figure's title (else its name in words), a table's name; a line of text has none."""
    if isinstance(part, go.Figure):
        return figure_caption(name, part)
    return "" if isinstance(part, str) else name


def figure_caption(name: str, fig) -> str:
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else ""
    return html.unescape(re.sub(r"<[^>]+>", " ", title)).strip() or name_in_words(name)  # the report escapes it


def name_in_words(name: str) -> str:
    """A figure's internal name in words: "coref-ranked" → "Coreference: heads ranked by accuracy",
    "rollout-layer3" → "Rollout layer 3", "gqa-pairs-l2" → "Grouped-query attention pairs layer 2"."""
    if name in NAME_WORDS:
        return NAME_WORDS[name]
    pieces = []
    for piece in name.split("-"):
        if found := re.fullmatch(r"(layer|l|h|head)(\d+)", piece):
            pieces.append(f"{'head' if found.group(1)[0] == 'h' else 'layer'} {found.group(2)}")
        else:
            pieces.append(NAME_WORDS.get(piece, piece))
    text = " ".join(pieces).removesuffix(":").replace("_", " ")
    return text[:1].upper() + text[1:]
