"""What a public set measures beyond accuracy, and a second model on the same examples: GAP's held-out
best head and F1, Winogender's gender gap and its link to occupation statistics, the best head chosen on
one split and reported on the others (any suite with a `split` field), model against model."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention import ModelLoadError
from attention.analysis.coref import CorefResult, group
from attention.analysis.coref.metrics import (
    compare_models,
    gap_metrics,
    held_out_best,
    splits,
    winogender_bias,
)

from ..compute.models import get_model
from ..page.page import plain, show_table, show_text
from ..state.state import COREF_SETS
from .coref_data import SETS, Suite, scores_or_message, set_examples
from .coref_groups import draw_grids


def measures(result: CorefResult, suite: Suite, source: str, present: bool) -> None:
    """What the suite's scores with the model of `source` measure beyond head accuracy, where its examples
    say more: GAP's held-out best head, Winogender's gender gaps, accuracy by split. Sized for presentation
    mode where `present`."""
    if suite.key in ("gapdev", "gapval"):
        gap(result, suite, source)
    elif is_winogender(suite):
        winogender(result, present)
    if len(splits(result)) >= 2:
        by_split(result)


# ---- any suite with a `split` field ---------------------------------------------------------------------

DEVELOPMENT = ("dev", "development", "train", "training")  # the split a head is chosen on, where one is named so


def by_split(result: CorefResult) -> None:
    """The best head chosen on one split (a development split where one is named so, else the first in
    the file) and reported on each other one: an accuracy without the optimism of choosing it there."""
    names = splits(result)
    chosen_on = next((v for v in names if str(v).lower() in DEVELOPMENT), names[0])
    parts = group(result, "split")
    dev = parts[chosen_on]
    if dev.n == 0:
        st.info(f"No example of the split {plain(str(chosen_on))} counts: no head can be chosen on it.")
        return
    rows = [(v, held_out_best(dev, parts[v])) for v in names if v != chosen_on and parts[v].n]
    if not rows:
        return
    layer, head, accuracy = dev.ranked(1)[0]
    st.subheader(f"A best head chosen on “{plain(str(chosen_on))}”, reported on the other splits")
    show_table(
        {
            "split": [str(v) for v, _ in rows],
            "examples counted": [h.n for _, h in rows],
            f"L{layer} H{head}": [round(h.accuracy, 3) for _, h in rows],
            "95% interval": [f"{h.interval[0]:.3f} – {h.interval[1]:.3f}" for _, h in rows],
            "nearest": [round(h.baselines["nearest"], 3) for _, h in rows],
            "first": [round(h.baselines["first"], 3) for _, h in rows],
            "that split's own best": [
                f"L{h.best_there[0]} H{h.best_there[1]} ({h.best_there[2]:.3f})" for _, h in rows
            ],
        },
        "The best head on the other splits",
        hide_index=True,
        width="stretch",
    )
    show_text(
        f"Layer {layer}, head {head} is the best of {dev.accuracy.size} heads on {plain(str(chosen_on))} "
        f"({accuracy:.1%} there, {dev.n} examples: optimistic, the maximum of many). On each other split it "
        "was not chosen, so its accuracy there is fair; a split's own best is chosen and reported on the same "
        "examples.",
        "coref-splits",
    )


# ---- GAP ----------------------------------------------------------------------------------------------


def gap(result: CorefResult, suite: Suite, source: str) -> None:
    """The best head chosen on development and reported on validation, and GAP F1 on the split shown."""
    other_key = "gapval" if suite.key == "gapdev" else "gapdev"
    other = Suite(other_key, COREF_SETS[other_key], set_examples(other_key), other_key)
    scored = scores_or_message(source, other, "this model")
    if scored is None:
        return
    dev, val = (result, scored) if suite.key == "gapdev" else (scored, result)
    held = held_out_best(dev, val)
    own = val.ranked(1)[0]
    st.subheader("GAP: a best head chosen on development, reported on validation")
    st.caption(
        f"Chosen on development: layer {held.layer}, head {held.head}, right on {held.chosen_accuracy:.1%} "
        f"there (the best of {dev.accuracy.size} heads, so optimistic). On validation it is right on "
        f"{held.accuracy:.1%} (95% interval {held.interval[0]:.1%}–{held.interval[1]:.1%}, {held.n} "
        f"examples), against {held.baselines['nearest']:.1%} for the nearest candidate and "
        f"{held.baselines['first']:.1%} for the first. Validation's own best head, layer {own[0]}, head "
        f"{own[1]}, reaches {own[2]:.1%}: chosen and reported on the same examples."
    )
    metrics = gap_metrics(result)
    rows: list[tuple[str, dict]] = [
        (
            f"L{held.layer} H{held.head} (chosen on development)",
            {k: float(np.asarray(v)[held.layer, held.head]) for k, v in metrics["heads"].items()},
        ),
        ("nearest candidate", metrics["nearest"]),
        ("first candidate", metrics["first"]),
    ]
    show_table(
        {
            "on " + SETS[suite.key].file: [name for name, _ in rows],
            **{
                col: [round(float(m[key]), 3) for _, m in rows]
                for col, key in (
                    ("F1 overall", "overall"),
                    ("F1 masculine", "masculine"),
                    ("F1 feminine", "feminine"),
                    ("bias F/M", "bias"),
                )
            },
        },
        "GAP F1",
        hide_index=True,
        width="stretch",
    )
    st.caption(
        "GAP's F1 counts both names of every passage, those whose answer is neither included: a head "
        "names the candidate it attends to most from the pronoun (Webster et al. 2018)."
    )


# ---- Winogender -----------------------------------------------------------------------------------------


def is_winogender(suite: Suite) -> bool:
    genders = {e.value("gender") for e in suite.examples}
    return {"male", "female"} <= genders and all(
        e.value("occupation") is not None and e.value("bls_pct_female") is not None for e in suite.examples
    )


def winogender(result: CorefResult, present: bool) -> None:
    bias = winogender_bias(result)
    st.subheader("Winogender: male against female pronouns")
    draw_grids(
        [
            (bias.gap, "accuracy male − female", "difference", "coref-gender-gap"),
            (
                bias.correlation,
                "r: share of women vs. choosing the occupation for she",
                "correlation",
                "coref-gender-r",
            ),
        ],
        present,
    )
    finite = np.where(np.isfinite(bias.correlation), bias.correlation, 0)
    layer, head = np.unravel_index(int(np.argmax(np.abs(finite))), finite.shape)
    st.caption(
        f"Left: how much more often each head is right with he/his/him than with she/her. Right: over the "
        f"{len(bias.occupations)} occupations, the Pearson correlation of the occupation's share of women "
        "(US labour statistics 2015) with how much more often the head picks the occupation for a female "
        f"pronoun than for a male one. Strongest: layer {layer}, head {head}, r = "
        f"{bias.correlation[layer, head]:+.2f}."
    )


# ---- a second model ------------------------------------------------------------------------------------


def ask_to_compare() -> None:
    st.session_state.coref_compare_pending = st.session_state.coref_compare_input.strip()


def load_second() -> None:
    """Take the source asked for; one that does not load is a message, the previous one stays."""
    source = st.session_state.pop("coref_compare_pending", None)
    if source is None:
        return
    if source:
        try:
            with st.spinner(f"Loading {source}…"):
                get_model(source)
        except ModelLoadError as err:
            st.session_state.coref_compare_error = str(err)
            return
    st.session_state.coref_compare, st.session_state.coref_compare_error = source, None


def second_model(result: CorefResult, suite: Suite, present: bool) -> None:
    st.subheader("Model against model")
    if "coref_compare_input" not in st.session_state:
        st.session_state.coref_compare_input = st.session_state.get("coref_compare", "")
    with st.form("coref_compare_form"):
        st.text_input(
            "A second model on the same examples: checkpoint folder or hub id",
            key="coref_compare_input",
            placeholder="empty: no comparison",
        )
        st.form_submit_button("Compare", on_click=ask_to_compare)
    load_second()
    if st.session_state.get("coref_compare_error"):
        st.error(plain(st.session_state.coref_compare_error) + "  \nThe comparison stays as it was.")
    source = st.session_state.get("coref_compare") or ""
    if not source:
        return
    try:
        other = scores_or_message(source, suite, "the second model")
    except ModelLoadError as err:  # from a link: nothing to keep
        st.error(f"The second model cannot be loaded: {plain(str(err))}")
        st.session_state.coref_compare = ""
        return
    if other is None:
        return
    draw_grids(
        [
            (result.accuracy, "accuracy, the model in use", "accuracy", "coref-model-a"),
            (other.accuracy, "accuracy, the second model", "accuracy", "coref-model-b"),
        ],
        present,
        static=("coref-model-b",),
    )
    c = compare_models(result, other)
    (la, ha, acc_a), (lb, hb, acc_b), test = c.best_a, c.best_b, c.test
    st.caption(
        f"Best head of the model in use: layer {la}, head {ha} ({acc_a:.1%}); of {plain(source)}: layer "
        f"{lb}, head {hb} ({acc_b:.1%}). On the {test.n} examples both counted, the first is right where "
        f"the second is wrong {test.only_a} times and the reverse {test.only_b} times: exact McNemar "
        f"p = {test.p:.3g}."
    )
