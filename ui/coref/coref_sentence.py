"""The Coreference view on a typed sentence: the pronoun, candidates and answer picked (pre-filled for the
app's examples, suggested for others), every head valued by the criterion named on the page, and the
sentence's twin whose answer flips."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attention.analysis.coref import (
    CorefExample,
    ExampleError,
    ExampleScore,
)
from attention.analysis.coref.heads import (
    CRITERIA,
    MIN_SEPARATION,
    best_head,
    column_means,
    head_values,
    ranked,
    separates,
    suggest_candidates,
)
from attention.analysis.coref.mentions import word_spans

from ..compute.computations import coref_values
from ..compute.runs import get_run
from ..page.page import plain, show_table
from ..state.state import COREF_RANKS, PRESET_COREF

PRONOUNS = ("it", "he", "she", "they", "him", "her", "them")


@dataclass(frozen=True)
class Picked:
    words: list[str]  # the first segment's words as written
    example: CorefExample
    pronoun: int  # word index
    candidates: list[int]  # word indices


def sentence_words(run, text: str) -> list[str]:
    enc = run.encoded
    # words of the first segment: offsets of a pair's second segment point into the other text
    word_ids = [w if s == 0 else None for w, s in zip(enc.word_ids, enc.sequence_ids)]
    return [written for written, _ in word_spans(text, word_ids, enc.offsets)]


def pick_example(run, text: str) -> Picked | None:
    """The pronoun, candidates and answer pickers; None (and what to pick) until they make an example."""
    words = sentence_words(run, text)
    if len(words) < 3:
        st.info("Coreference needs a sentence with a pronoun and at least two candidate words.")
        return None
    lower = [w.lower() for w in words]
    labels = [f"{w} ({i + 1})" if lower.count(w.lower()) > 1 else w for i, w in enumerate(words)]
    prefill(text, words)
    left, mid, right = st.columns([1, 2, 1])
    if st.session_state.get("coref_pronoun") not in range(len(words)):  # from a link, or a longer sentence
        st.session_state.coref_pronoun = 0
    p = left.selectbox(
        "Pronoun", range(len(words)), format_func=labels.__getitem__, key="coref_pronoun", persist_state="session"
    )
    firsts = [i for i, w in enumerate(lower) if lower.index(w) == i and w != lower[p]]
    st.session_state.coref_candidates = [c for c in st.session_state.get("coref_candidates") or [] if c in firsts]
    chosen = mid.multiselect(
        "Candidates",
        firsts,
        format_func=words.__getitem__,
        key="coref_candidates",
        persist_state="session",
        help="Suggested: the words before the pronoun that are not common function words.",
    )
    if len(chosen) < 2:
        st.info("Pick the pronoun and at least two candidate words (usually the nouns it could refer to).")
        return None
    if st.session_state.get("coref_answer") not in chosen:
        st.session_state.coref_answer = chosen[0]
    answer = right.selectbox(
        "Answer", chosen, format_func=words.__getitem__, key="coref_answer", persist_state="session"
    )
    occurrence = lower[: p + 1].count(lower[p])
    example = CorefExample(text, words[p], tuple(words[i] for i in chosen), words[answer], occurrence)
    return Picked(words, example, p, list(chosen))


def prefill(text: str, words: list[str]) -> None:
    """Pre-fill pronoun, candidates and answer once per sentence: the app's examples as they are known;
    another sentence with its first common pronoun and the words before it that are not function words."""
    if st.session_state.get("coref_prefilled") == text:
        return
    st.session_state.coref_prefilled = text
    lower = [w.lower() for w in words]
    pronoun, candidates, answer = PRESET_COREF.get(text, (None, [], None))
    if pronoun is None:  # a guess: the first common pronoun
        pronoun = next((w for w in lower if w in PRONOUNS), lower[0])
    p = lower.index(pronoun) if pronoun in lower else 0
    st.session_state.coref_pronoun = p
    picked = [lower.index(c) for c in candidates if c in lower] or suggest_candidates(words, p)
    st.session_state.coref_candidates = picked
    st.session_state.coref_answer = lower.index(answer) if answer in lower else (picked[0] if picked else None)


def causal_note(causal: bool) -> None:
    """For a `causal` model, that its heads see no candidate after the pronoun."""
    if causal:
        st.caption(
            "This model is causal: a head sees only the pronoun and the tokens before it, so a candidate "
            "after the pronoun gets no attention and these scores can only pick an earlier one."
        )


# ---- the heads ranked -----------------------------------------------------------------------------------


def criterion_picker() -> str:
    if st.session_state.get("coref_rank") not in COREF_RANKS.values():
        st.session_state.coref_rank = next(iter(COREF_RANKS.values()))
    picked = st.segmented_control(
        "Rank heads by",
        list(COREF_RANKS.values()),
        key="coref_rank",
        persist_state="session",
        required=True,
        help=" · ".join(CRITERIA.values()),
    )
    assert picked is not None  # required: always one
    return picked


def ranked_table(run, score: ExampleScore, criterion: str, top: int = 15) -> None:
    """The best heads by ``criterion``: its value and the other criterion's, attention to the answer, to
    the best other candidate and to the answer from the average other token; and whether any separates."""
    a = score.example.answer_index
    assert a is not None, "the ranked heads are of an example with its answer"
    values = {name: head_values(score.attention, run.attentions, score.located, a, name) for name in CRITERIA}
    order = ranked(values[criterion], top)
    layers, heads = (np.array(x, dtype=int) for x in zip(*order))
    answer = score.example.answer
    assert answer is not None
    columns = {"head": [f"L{layer} H{head}" for layer, head in order]}
    columns |= {name: values[name][layers, heads].round(3) for name in sorted(CRITERIA, key=lambda n: n != criterion)}
    columns |= {
        f"→ {answer}": score.attention[layers, heads, a].round(3),
        "→ best other": np.delete(score.attention, a, axis=-1).max(-1)[layers, heads].round(3),
        f"average token → {answer}": column_means(run.attentions, score.located)[layers, heads, a].round(3),
    }
    show_table(columns, "Heads ranked", hide_index=True, width="stretch")
    first, found = float(values[criterion][layers[0], heads[0]]), best_head(values[criterion], values["margin"])
    if found is not None:
        verdict = f"Best: layer {found[0]}, head {found[1]} ({values[criterion][found]:+.2f})"
        pronoun, said = plain(score.example.pronoun), plain(answer)
        verdict += "." if criterion == "margin" else f", the first whose “{pronoun}” gives “{said}” more."
    elif separates(first):
        verdict = f"No head separates the candidates: none above {MIN_SEPARATION} gives “{plain(answer)}” more."
    else:
        verdict = f"No head separates the candidates: the best value is {first:+.2f}, not above {MIN_SEPARATION}."
    st.caption(
        f"Ranked by {plain(CRITERIA[criterion])}. {verdict} The first visit and the guided walk's last step "
        "open the best head by the same criterion."
    )


# ---- the sentence and its twin ----------------------------------------------------------------------------


def known_twin(text: str) -> str | None:
    """The app's example whose pronoun and candidates are this one's and whose answer differs."""
    if text not in PRESET_COREF:
        return None
    pronoun, candidates, answer = PRESET_COREF[text]
    return next(
        (t for t, (p, c, a) in PRESET_COREF.items() if t != text and (p, c) == (pronoun, candidates) and a != answer),
        None,
    )


def twin_scores(run, text: str, source: str) -> tuple[ExampleScore, ExampleScore] | None:
    """The typed sentence's example (its pickers) and its twin's (a second box, pre-filled with the
    example's twin), each scored on its own run of the model of `source`; None (and why) until both can be."""
    picked = pick_example(run, text)
    if picked is None:
        return None
    if st.session_state.get("coref_twin_of") != text:  # a new sentence: its twin, or an empty box
        from_link = "coref_twin_of" not in st.session_state and st.session_state.get("coref_twin")
        st.session_state.coref_twin_of = text
        if not from_link:
            st.session_state.coref_twin = known_twin(text) or ""
            st.session_state.coref_twin_answer = PRESET_COREF.get(st.session_state.coref_twin, (None,) * 3)[2]
    if st.session_state.get("coref_twin") is None:
        st.session_state.coref_twin = ""
    left, right = st.columns([3, 1])
    twin = left.text_input(
        "Its twin: the same sentence with the answer flipped",
        key="coref_twin",
        persist_state="session",
        placeholder="e.g. the sentence with one word changed so the pronoun means the other candidate",
    )
    candidates = list(picked.example.candidates)
    if st.session_state.get("coref_twin_answer") not in candidates:
        st.session_state.coref_twin_answer = next((c for c in candidates if c != picked.example.answer), None)
    twin_answer = right.selectbox("Answer in the twin", candidates, key="coref_twin_answer", persist_state="session")
    if not twin.strip():
        st.info("Type the twin sentence to compare the heads on both.")
        return None
    ex = picked.example
    twin_example = CorefExample(twin, ex.pronoun, ex.candidates, twin_answer, ex.pronoun_occurrence)
    try:
        a, _ = coref_values(run, ex, "margin")
        b, _ = coref_values(get_run(source, twin, ""), twin_example, "margin")
    except ExampleError as err:
        st.info(f"The twin cannot be scored: {plain(str(err))}. It needs the same pronoun and candidate words.")
        return None
    return a, b
