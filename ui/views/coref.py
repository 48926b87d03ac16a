"""The Coreference view: which heads send a pronoun to its antecedent, on one sentence, on a suite
of examples, and on twin sentences whose answer flips."""

from __future__ import annotations

import streamlit as st

from attention.analysis.coref import flipping_heads, twin_pairs
from attention.analysis.coref.metrics import (
    best_against_baselines,
    best_head,
    heads_against_best,
)
from attention.analysis.coref.result_csv import csv_text, examples_csv_text, file_name
from viz.coref import flip_grid, head_grid
from viz.coref_ranking import ranked_heads

from ..compute.computations import coref_values
from ..compute.models import get_model
from ..coref.coref_data import excluded_reasons, scores_or_message, suite_area, suite_picker
from ..coref.coref_groups import counts, grouped
from ..coref.coref_measures import measures, second_model
from ..coref.coref_pick import picks_after_scoring
from ..coref.coref_rows import examples_table
from ..coref.coref_sentence import (
    causal_note,
    criterion_picker,
    pick_example,
    ranked_table,
    twin_scores,
)
from ..page.layout import column_px, main_px, slots
from ..page.page import (
    figure_slot,
    figures_of,
    font_size,
    plain,
    present_size,
    show,
    show_table,
    show_text,
    shown_as,
)
from ..state.actions import open_clicked_head
from ..state.state import COREF_MODES, COREF_TWINS
from ..state.view_context import ViewContext

# the sentence's grid title for each ranking criterion (coref.heads.CRITERIA), the words filled in
GRID_TITLES = {
    "margin": "margin of {pronoun} → {answer}",
    "specificity": "specificity of {pronoun} → {answer}",
}

# ---- the three modes -------------------------------------------------------------------------------


def draw(ctx: ViewContext) -> None:
    slot = figure_slot(ctx.present)
    mode = st.segmented_control(
        "Coreference",
        list(COREF_MODES.values()),
        key="coref_mode",
        persist_state="session",
        required=True,
        label_visibility="collapsed",
    )
    views = {"sentence": this_sentence, "suite": suite, "pairs": minimal_pairs}
    chosen = next((word for word, label in COREF_MODES.items() if label == mode), "sentence")
    if chosen == "sentence":
        this_sentence(ctx, slot)
    else:
        with suite_area(ctx.source):  # a suite about to be scored clears the previous one's results
            views[chosen](ctx)


def this_sentence(ctx: ViewContext, slot=None) -> None:
    """``slot``: where the grid goes in presentation mode, above the pickers."""
    run = ctx.run
    picked = pick_example(run, ctx.sentence)
    if picked is None:
        return
    causal_note(ctx.model.causal)
    words, p, answer = picked.words, picked.pronoun, st.session_state.coref_answer
    grid_col, side_col = st.columns([3, 2])
    with side_col:  # the grid is coloured by the criterion the table ranks by
        criterion = criterion_picker()
    score, values = coref_values(run, picked.example, criterion)
    size = {k: v for k, v in present_size(ctx.present).items() if k != "min_label"} or {
        "width": column_px(ctx.present, [3, 2])
    }
    with slot or grid_col:
        show(
            head_grid(
                values,
                GRID_TITLES[criterion].format(pronoun=words[p], answer=words[answer]),
                kind=criterion,
                highlight=(ctx.layer, ctx.head),
                font_size=font_size(ctx.present),
                **size,
            ),
            "coref-margin",
            key="coref_grid",
            on_select=lambda: open_clicked_head("coref_grid"),
            selection_mode="points",
        )
        show_text(
            f"{int(score.heads_right().sum())} of {score.heads_right().size} heads attend more from "
            f"“{plain(words[p])}” to “{plain(words[answer])}” than to any other candidate. "
            "Click a head to open it.",
            "coref-count",
        )
    ranked_table(run, score, criterion)  # under both: its six columns need the page's width


def picked_and_scored(source: str):
    """The suite picked and its scores with the model of `source`; None where either is missing."""
    suite = suite_picker()
    if suite is None:
        return None, None
    return suite, scores_or_message(source, suite, "this model")


def suite(ctx: ViewContext) -> None:
    suite, result = picked_and_scored(ctx.source)
    if result is None:
        return
    if picks_after_scoring(ctx.source):  # the page's own head is the suite's best: the boxes above name it
        st.rerun()
    with figures_of(suite_title(suite)):  # a PNG's title names the suite, not the sentence typed
        suite_results(ctx, suite, result)


def suite_title(suite) -> str:
    """What a suite's figures are of, as their presentation titles say it: "the built-in suite (87 examples)"."""
    return f"{suite.name} ({len(suite.examples):,} examples)"


def suite_results(ctx: ViewContext, suite, result) -> None:
    name, examples = suite.name, suite.examples
    causal_note(ctx.model.causal)
    layer, head, best = result.ranked(1)[0]
    left_out = f" ({len(result.excluded)} left out: {plain(excluded_reasons(result))})" if result.excluded else ""
    show_text(
        f"{len(examples)} examples from {plain(name)}{left_out}. Best head: layer {layer}, head {head}, right "
        f"on {best:.0%} of those scored; the baselines pick the nearest candidate before the pronoun "
        f"({result.baselines['nearest']:.0%} right) or the first candidate ({result.baselines['first']:.0%}). "
        "The bars' whiskers are exact 95% intervals; the grid's hover gives each head's count and interval.",
        "coref-suite",
    )
    grid_col, bars_col = st.columns([3, 2])
    with grid_col:
        show(
            head_grid(
                result.accuracy,
                "accuracy of each head",
                kind="accuracy",
                highlight=(ctx.layer, ctx.head),
                font_size=font_size(ctx.present),
                width=column_px(ctx.present, [3, 2]),
                notes=counts(result),  # "56 of 87, [0.53, 0.74]": right on how many, the exact 95% interval
            ),
            "coref-accuracy",
            key="suite_grid",
            on_select=lambda: open_clicked_head("suite_grid"),
            selection_mode="points",
        )
    with bars_col:
        show(
            ranked_heads(
                result.ranked(),
                result.baselines,
                top=15,
                font_size=font_size(ctx.present),
                intervals=result.interval,
                width=column_px(ctx.present, [3, 2], 1),
            ),
            "coref-ranked",
            key="suite_bars",
            on_select=lambda: open_clicked_head("suite_bars"),
            selection_mode="points",
        )
    against_best(result)
    examples_table(result, name, (ctx.layer, ctx.head), ctx.present)
    downloads(result, suite, ctx.source)
    excluded_table(result)
    measures(result, suite, ctx.source, ctx.present)
    grouped(result, examples, get_model(ctx.source)[0].load_report.source, name, ctx.present)
    second_model(result, suite, ctx.present)


TOP_COMPARED = 10  # heads shown against the best one; Holm's correction is over every other head


def against_best(result) -> None:
    """The top heads against the best one on the same examples, and the best against the baselines: is the
    difference more than noise? The p-values are the CSV's: Holm's correction over every other head."""
    everyone = [(layer, h) for layer, h, _ in result.ranked()]
    tests = heads_against_best(result, everyone)[:TOP_COMPARED]
    heads = everyone[:TOP_COMPARED]
    family = len(everyone) - 1
    low, high = result.interval
    st.caption(
        f"The {len(heads)} best heads, each against the best on the same examples: exact McNemar test on "
        f"the examples where one of the two is right and the other wrong, p-values corrected by Holm's "
        f"method for the {family} comparisons of every other head with the best (as in the CSV)."
    )
    show_table(
        {
            "head": [f"L{layer} H{h}" for layer, h in heads],
            "accuracy": [round(float(result.accuracy[layer, h]), 3) for layer, h in heads],
            "95% interval": [f"{low[layer, h]:.3f} – {high[layer, h]:.3f}" for layer, h in heads],
            "only this head right": [t.only_a for t, _ in tests],
            "only the best right": [t.only_b for t, _ in tests],
            f"p vs best (Holm over {family})": ["—" if i == 0 else f"{p:.3g}" for i, (_, p) in enumerate(tests)],
        },
        "The best heads against the best: accuracy, exact 95% interval, McNemar",
        hide_index=True,
        width="stretch",
    )
    show_text(plain(baselines_note(result)), "coref-baselines")


def baselines_note(result) -> str:
    layer, head = best_head(result)
    said = [
        f"against the {name} candidate ({result.baselines[name]:.1%} right) it alone is right on {t.only_a} "
        f"examples and the baseline alone on {t.only_b}, exact McNemar p = {t.p:.3g}"
        for name, t in best_against_baselines(result).items()
    ]
    return (
        f"The best head, layer {layer}, head {head}, against the baselines (each test on its own, "
        f"uncorrected): {'; '.join(said)}."
    )


def downloads(result, suite, source: str) -> None:
    """Every head's accuracy, and every example's right/wrong per head, named by model and examples."""
    model = get_model(source)[0].load_report.source
    left, right = st.columns(2)
    left.download_button(
        "Download every head's accuracy (CSV)",
        data=lambda: csv_text(result, model=model, suite=suite.name),
        file_name=file_name("heads", model, suite.name),
        mime="text/csv",
        on_click="ignore",
    )
    right.download_button(
        "Download each example × head, right or wrong (CSV)",
        data=lambda: examples_csv_text(result, model, suite.name),
        file_name=file_name("examples", model, suite.name),
        mime="text/csv",
        on_click="ignore",
    )


def accuracy_csv(result) -> str:
    """Every head, best first, as the command line writes it: accuracy, its exact 95% interval, the
    McNemar p against the best head (Holm-corrected), per group accuracy."""
    return csv_text(result)


def excluded_table(result) -> None:
    """The examples left out of head accuracy, each with its line and why."""
    if not result.excluded:
        return
    with st.expander(f"{len(result.excluded)} examples left out of head accuracy"):
        show_table(
            {
                "example": [e.index + 1 for e in result.excluded],
                "line": [e.example.line for e in result.excluded],
                "reason": [e.reason for e in result.excluded],
                "text": [e.example.text[:200] for e in result.excluded],
            },
            "Examples left out of head accuracy",
            hide_index=True,
            width="stretch",
        )


def minimal_pairs(ctx: ViewContext) -> None:
    source = st.segmented_control(
        "Twins",
        list(COREF_TWINS.values()),
        key="coref_twins",
        persist_state="session",
        required=True,
        label_visibility="collapsed",
    )
    if source == COREF_TWINS["sentence"]:
        scored = twin_scores(ctx.run, ctx.sentence, ctx.source)
        if scored is not None:
            draw_twins(*scored, ctx.present)
    else:
        suite_twins(ctx.source, ctx.present)


def suite_twins(source: str, present: bool) -> None:
    suite, result = picked_and_scored(source)
    if result is None:
        return
    examples = suite.examples
    pairs = twin_pairs(examples)
    if not pairs:
        st.info(
            "These examples have no twins: give two lines the same pair_id to compare them, or compare this "
            "sentence with a twin of your own."
        )
        return
    labels = {i: f"{examples[a].pair_id}: {examples[a].text}  /  {examples[b].text}" for i, (a, b) in enumerate(pairs)}
    if st.session_state.get("coref_pair") not in labels:
        st.session_state.coref_pair = 0
    choice = st.selectbox(
        "Twin sentences", list(labels), format_func=labels.__getitem__, key="coref_pair", persist_state="session"
    )
    shown_as("coref_pair", labels[choice])  # the report names the twins, not their index
    a, b = pairs[choice]
    scored = {d.index: d for d in result.details}  # examples that could not be scored are left out
    if a not in scored or b not in scored:
        st.info("One of these twins could not be scored with this model (see the suite's notes).")
        return
    draw_twins(scored[a], scored[b], present)


def draw_twins(da, db, present: bool) -> None:
    """Each twin's margins and the heads whose choice flips between them, sized for presentation mode where
    `present`."""
    flips = flipping_heads(da, db)
    both = flips & da.correct & db.correct
    half, size = column_px(present, 2), font_size(present)
    grids = [
        head_grid(d.margin, "margin: answer minus best other", kind="margin", marked=flips, font_size=size, width=half)
        for d in (da, db)
    ]
    beside = all(g.layout.width <= half for g in grids)  # else each twin's grid across the page
    if not beside:
        grids = [
            head_grid(
                d.margin,
                "margin: answer minus best other",
                kind="margin",
                marked=flips,
                font_size=size,
                width=main_px(present),
            )
            for d in (da, db)
        ]
    for col, detail, grid, key in zip(slots(beside), (da, db), grids, ("twin_a", "twin_b")):
        with col:
            st.text(detail.example.text)
            st.caption(f"answer: {plain(detail.example.answer)}")
            show(
                grid,
                f"coref-{key}",
                sentence=detail.example.text,  # each twin's own, not the sentence typed
                key=key,
                on_select=lambda k=key, t=detail.example.text: open_clicked_head(k, t),
                selection_mode="points",
            )
    show(
        flip_grid(
            flips, da.correct, db.correct, font_size=size, title="heads whose choice flips", width=main_px(present)
        ),
        "coref-flips",
        sentence=f"{da.example.text} / {db.example.text}",
        key="flip_grid",
        on_select=lambda: open_clicked_head("flip_grid", da.example.text),
        selection_mode="points",
    )
    st.caption(flip_note(int(flips.sum()), int(both.sum())))


def flip_note(flips: int, both: int) -> str:
    """What the flip grid shows, the zero cases worded on their own."""
    if flips == 0:
        return (
            "No head changes its preferred candidate between the twins: each picks the same word in both, so "
            "none follows the meaning here."
        )
    changed = "1 head changes its" if flips == 1 else f"{flips} heads change their"
    if both == 0:
        right = "it is not right on both" if flips == 1 else "none of them is right on both"
    elif both == 1:
        right = (
            "it is" if flips == 1 else "1 of them is"
        ) + " right on both — it follows the meaning, not the position"
    else:
        right = f"{both} of them are right on both — they follow the meaning, not the position"
    return f"{changed} preferred candidate between the twins; {right}. Click a head to open it."
