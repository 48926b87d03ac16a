"""The Coreference view: which heads send a pronoun to its antecedent, on one sentence, on a suite
of examples, and on twin sentences whose answer flips."""
from __future__ import annotations

import numpy as np
import streamlit as st

from attention.analysis.coref import (
    CorefExample,
    flipping_heads,
    score_example,
    twin_pairs,
    word_spans,
)
from attention.analysis.coref_csv import csv_text
from attention.analysis.coref_metrics import heads_against_best
from viz.coref import flip_grid, head_grid, ranked_heads

from ..coref_data import excluded_reasons, scores_or_message, suite_area, suite_picker
from ..coref_groups import grouped
from ..coref_measures import measures, second_model
from ..layout import column_px, main_px, slots
from ..page import figure_slot, font_size, is_causal, plain, present_size, show
from ..state import COREF_MODES, PRESET_COREF, open_clicked_head

# ---- the three modes -------------------------------------------------------------------------------

def draw(run) -> None:
    slot = figure_slot()
    mode = st.segmented_control("Coreference", list(COREF_MODES.values()), key="coref_mode", required=True,
                                label_visibility="collapsed")
    views = {"sentence": this_sentence, "suite": suite, "pairs": minimal_pairs}
    chosen = next((word for word, label in COREF_MODES.items() if label == mode), "sentence")
    if chosen == "sentence":
        this_sentence(run, slot)
    else:
        with suite_area():  # a suite about to be scored clears the previous one's results
            views[chosen](run)


def this_sentence(run, slot=None) -> None:
    """``slot``: where the grid goes in presentation mode, above the pickers."""
    enc = run.encoded
    text = st.session_state.submitted[0]
    # words of the first segment: offsets of a pair's second segment point into the other text
    word_ids = [w if s == 0 else None for w, s in zip(enc.word_ids, enc.sequence_ids)]
    words = [written for written, _ in word_spans(text, word_ids, enc.offsets)]
    if len(words) < 3:
        st.info("Coreference needs a sentence with a pronoun and at least two candidate words.")
        return
    labels = [f"{w} ({i + 1})" if [x.lower() for x in words].count(w.lower()) > 1 else w for i, w in enumerate(words)]
    prefill(text, words)
    left, mid, right = st.columns([1, 2, 1])
    if st.session_state.get("coref_pronoun") not in range(len(words)):  # from a link, or a longer sentence
        st.session_state.coref_pronoun = 0
    p = left.selectbox("Pronoun", range(len(words)), format_func=labels.__getitem__, key="coref_pronoun")
    firsts = [i for i, w in enumerate(words) if [x.lower() for x in words].index(w.lower()) == i
              and w.lower() != words[p].lower()]
    st.session_state.coref_candidates = [c for c in st.session_state.get("coref_candidates") or [] if c in firsts]
    chosen = mid.multiselect("Candidates", firsts, format_func=words.__getitem__, key="coref_candidates")
    if len(chosen) < 2:
        st.info("Pick the pronoun and at least two candidate words (usually the nouns it could refer to).")
        return
    if st.session_state.get("coref_answer") not in chosen:
        st.session_state.coref_answer = chosen[0]
    answer = right.selectbox("Answer", chosen, format_func=words.__getitem__, key="coref_answer")
    causal_note()
    occurrence = [w.lower() for w in words[:p + 1]].count(words[p].lower())
    example = CorefExample(text, words[p], tuple(words[i] for i in chosen), words[answer], occurrence)
    score = score_example(example, run.attentions, enc.tokens, word_ids, enc.offsets)
    margin = score.margin
    grid_col, table_col = st.columns([3, 2])
    size = {k: v for k, v in present_size().items() if k != "min_label"} or {"width": column_px([3, 2])}
    with slot or grid_col:
        show(head_grid(margin, f"attention {words[p]} → {words[answer]} minus the best other candidate",
                       kind="margin", highlight=(st.session_state.layer, st.session_state.head), font_size=font_size(),
                       **size),
             "coref-margin", key="coref_grid", on_select=lambda: open_clicked_head("coref_grid"),
             selection_mode="points")
        st.caption(f"{int(score.correct.sum())} of {score.correct.size} heads attend more from "
                   f"“{plain(words[p])}” to “{plain(words[answer])}” than to any other candidate. "
                   "Click a head to open it.")
    with table_col:
        order = np.argsort(-margin, axis=None)[:15]
        layers, heads = np.unravel_index(order, margin.shape)
        a = score.example.answer_index
        st.dataframe({"layer": layers, "head": heads,
                      f"→ {words[answer]}": score.attention[layers, heads, a].round(3),
                      "best other": np.delete(score.attention, a, axis=-1).max(-1)[layers, heads].round(3),
                      "margin": margin[layers, heads].round(3)}, hide_index=True, width="stretch")


def causal_note() -> None:
    if is_causal():
        st.caption("This model is causal: a head sees only the pronoun and the tokens before it, so a candidate "
                   "after the pronoun gets no attention and these scores can only pick an earlier one.")


def prefill(text: str, words: list[str]) -> None:
    """Pre-fill pronoun, candidates and answer once per sentence for the app's examples."""
    if st.session_state.get("coref_prefilled") == text:
        return
    st.session_state.coref_prefilled = text
    lower = [w.lower() for w in words]
    pronoun, candidates, answer = PRESET_COREF.get(text, (None, [], None))
    if pronoun is None:  # a guess: the first common pronoun, candidates left to the person
        pronoun = next((w for w in lower if w in ("it", "he", "she", "they", "him", "her", "them")), lower[0])
    st.session_state.coref_pronoun = lower.index(pronoun) if pronoun in lower else 0
    st.session_state.coref_candidates = [lower.index(c) for c in candidates if c in lower]
    if answer in lower:
        st.session_state.coref_answer = lower.index(answer)


def picked_and_scored():
    """The suite picked and its scores with the model in use; None where either is missing."""
    suite = suite_picker()
    if suite is None:
        return None, None
    return suite, scores_or_message(st.session_state.source, suite, "this model")


def suite(run) -> None:
    suite, result = picked_and_scored()
    if result is None:
        return
    name, examples = suite.name, suite.examples
    causal_note()
    layer, head, best = result.ranked(1)[0]
    left_out = f" ({len(result.excluded)} left out: {plain(excluded_reasons(result))})" if result.excluded else ""
    st.caption(f"{len(examples)} examples from {plain(name)}{left_out}. Best head: layer {layer}, head {head}, right "
               f"on {best:.0%} of those scored; the baselines pick the nearest candidate before the pronoun "
               f"({result.baselines['nearest']:.0%} right) or the first candidate ({result.baselines['first']:.0%}). "
               "The bars' whiskers are exact 95% intervals.")
    grid_col, bars_col = st.columns([3, 2])
    with grid_col:
        show(head_grid(result.accuracy, "accuracy of each head", kind="accuracy",
                       highlight=(st.session_state.layer, st.session_state.head), font_size=font_size(),
                       width=column_px([3, 2])),
             "coref-accuracy", key="suite_grid", on_select=lambda: open_clicked_head("suite_grid"),
             selection_mode="points")
    with bars_col:
        show(ranked_heads(result.ranked(), result.baselines, top=15, font_size=font_size(),
                          intervals=result.interval), "coref-ranked",
             key="suite_bars", on_select=lambda: open_clicked_head("suite_bars"), selection_mode="points")
    against_best(result)
    st.download_button("Download every head's accuracy (CSV)", data=lambda: accuracy_csv(result),
                       file_name="coreference-heads.csv", mime="text/csv", on_click="ignore")
    excluded_table(result)
    measures(result, suite)
    grouped(result, examples)
    second_model(result, suite)


TOP_COMPARED = 10  # heads tested against the best one, with Holm's correction over them


def against_best(result) -> None:
    """The top heads against the best one on the same examples: is the difference more than noise?"""
    heads = [(l, h) for l, h, _ in result.ranked(TOP_COMPARED)]
    tests = heads_against_best(result, heads)
    low, high = result.interval
    st.caption(f"The {len(heads)} best heads, each against the best on the same examples: exact McNemar test on "
               f"the examples where one of the two is right and the other wrong, p-values corrected for the "
               f"{len(heads) - 1} comparisons by Holm's method.")
    st.dataframe({"head": [f"L{l} H{h}" for l, h in heads],
                  "accuracy": [round(float(result.accuracy[l, h]), 3) for l, h in heads],
                  "95% interval": [f"{low[l, h]:.3f} – {high[l, h]:.3f}" for l, h in heads],
                  "only this head right": [t.only_a for t, _ in tests],
                  "only the best right": [t.only_b for t, _ in tests],
                  "p vs best (Holm)": ["—" if i == 0 else f"{p:.3g}" for i, (_, p) in enumerate(tests)]},
                 hide_index=True, width="stretch")


def accuracy_csv(result) -> str:
    """Every head, best first, as the command line writes it: accuracy, its exact 95% interval, the
    McNemar p against the best head (Holm-corrected), per group accuracy."""
    return csv_text(result)


def excluded_table(result) -> None:
    """The examples left out of head accuracy, each with its line and why."""
    if not result.excluded:
        return
    with st.expander(f"{len(result.excluded)} examples left out of head accuracy"):
        st.dataframe({"example": [e.index + 1 for e in result.excluded],
                      "line": [e.example.line for e in result.excluded],
                      "reason": [e.reason for e in result.excluded],
                      "text": [e.example.text[:200] for e in result.excluded]}, hide_index=True, width="stretch")


def minimal_pairs(run) -> None:
    suite, result = picked_and_scored()
    if result is None:
        return
    examples = suite.examples
    pairs = twin_pairs(examples)
    if not pairs:
        st.info("These examples have no twins: give two lines the same pair_id to compare them.")
        return
    labels = {i: f"{examples[a].pair_id}: {examples[a].text}  /  {examples[b].text}" for i, (a, b) in enumerate(pairs)}
    if st.session_state.get("coref_pair") not in labels:
        st.session_state.coref_pair = 0
    choice = st.selectbox("Twin sentences", list(labels), format_func=labels.__getitem__, key="coref_pair")
    a, b = pairs[choice]
    scored = {d.index: d for d in result.details}  # examples that could not be scored are left out
    if a not in scored or b not in scored:
        st.info("One of these twins could not be scored with this model (see the suite's notes).")
        return
    da, db = scored[a], scored[b]
    flips = flipping_heads(da, db)
    both = flips & da.correct & db.correct
    half = column_px(2)
    grids = [head_grid(d.margin, "margin: answer minus best other", kind="margin", marked=flips,
                       font_size=font_size(), width=half) for d in (da, db)]
    beside = all(g.layout.width <= half for g in grids)  # else each twin's grid across the page
    if not beside:
        grids = [head_grid(d.margin, "margin: answer minus best other", kind="margin", marked=flips,
                           font_size=font_size(), width=main_px()) for d in (da, db)]
    for col, detail, grid, key in zip(slots(beside), (da, db), grids, ("twin_a", "twin_b")):
        with col:
            st.text(detail.example.text)
            st.caption(f"answer: {plain(detail.example.answer)}")
            show(grid, f"coref-{key}", key=key,
                 on_select=lambda k=key, t=detail.example.text: open_clicked_head(k, t), selection_mode="points")
    show(flip_grid(flips, da.correct, db.correct, font_size=font_size(), title="heads whose choice flips",
                   width=main_px()),
         "coref-flips", key="flip_grid", on_select=lambda: open_clicked_head("flip_grid", da.example.text),
         selection_mode="points")
    st.caption(f"{int(flips.sum())} heads change their preferred candidate between the twins; {int(both.sum())} "
               "of them are right on both — they follow the meaning, not the position. Click a head to open it.")
