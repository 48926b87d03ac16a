"""The Ablation view: the sentence run again with chosen heads zeroed or made uniform, and what changes:
hidden states, every head's map, the sentence embedding, the [MASK] guesses, on an example with a known
antecedent the pronoun → answer margin and, once a coreference suite is scored, the accuracy of the later heads."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention.analysis.ablation import margin_change, suite_change
from attention.analysis.coref import CorefExample, ExampleError
from viz.ablation import ablation_figure

from ..compute.computations import get_ablation, get_mlm_head, get_suite_ablation
from ..compute.limits import heavy_guard
from ..coref.coref_data import chosen_suite, is_scored, suite_scores
from ..page.page import figure_slot, font_size, plain, present_size, show, show_table, show_text
from ..state.state import ABLATION_MODES, PRESET_COREF
from ..state.view_context import ViewContext
from ..state.written import Text


def draw(ctx: ViewContext) -> None:
    run, source = ctx.run, ctx.source
    all_heads = [(layer, head) for layer in range(run.n_layers) for head in range(run.n_heads)]
    st.session_state.setdefault("ablate_heads", [(ctx.layer, ctx.head)])
    gone = [h for h in st.session_state.ablate_heads if h not in all_heads]
    if gone:  # chosen on a bigger model
        kept = [h for h in st.session_state.ablate_heads if h in all_heads]
        st.session_state.ablate_heads = kept or [(ctx.layer, ctx.head)]
        st.info("Not in this model, so no longer ablated: " + ", ".join(f"L{layer} H{head}" for layer, head in gone))
    slot = figure_slot(ctx.present)  # presentation: the figure first, on the first screen
    left, right = st.columns([3, 2])
    heads = left.multiselect(
        "Heads to ablate",
        all_heads,
        key="ablate_heads",
        persist_state="session",
        format_func=lambda h: f"L{h[0]} H{h[1]}",
    )
    mode = right.radio(
        "Ablation", list(ABLATION_MODES.values()), key="ablate_mode", persist_state="session", horizontal=True
    )
    if not heads:
        st.info("Pick one or more heads to ablate.")
        return
    word = next(word for word, label in ABLATION_MODES.items() if label == mode)
    with heavy_guard() as outcome:
        result = get_ablation(source, run, ctx.text, ctx.text_b, tuple(sorted(heads)), word)
    if not outcome.ok:
        return
    st.caption(
        "The same sentence with the chosen heads ablated: cosine between the original and the ablated hidden "
        "states per layer (mean over tokens), and how much each head's map moves (mean |Δ|). Heads before "
        "the first ablated layer do not change."
    )
    with slot or st.container():
        show(
            ablation_figure(
                result.hidden_cosine,
                result.attention_change,
                result.embedding_cosine,
                np.array(heads),
                font_size=font_size(ctx.present),
                height=present_size(ctx.present).get("height"),
            ),
            "ablation",
        )
    show_text(
        f"Sentence embedding (mean-pooled, what the default model is trained for): cosine "
        f"{result.embedding_cosine:.4f} to the original.",
        "ablation-embedding",
        st.write,
    )
    coref_margin(run, result, ctx.text)
    suite_accuracy(source, tuple(sorted(heads)), word)
    if result.predictions is not None:
        p = result.predictions
        show_text(f"Top predictions for [MASK] at position {p.position}:", "ablation-mask", st.write)
        rows = [
            {"rank": k + 1, "before": b[0], "p before": round(b[1], 4), "after": a[0], "p after": round(a[1], 4)}
            for k, (b, a) in enumerate(zip(p.before, p.after))
        ]
        show_table(rows, "Top predictions for [MASK], before and after", hide_index=True)
    elif (reason := get_mlm_head(source)[1]) is not None:
        st.caption(plain(reason))
    else:
        st.caption("Put [MASK] in the sentence to see the model's top predictions before and after ablation.")


def coref_margin(run, result, text: Text) -> None:
    """On an example the app offers with a known antecedent: the pronoun → answer margin before and after."""
    if text not in PRESET_COREF:
        return
    pronoun, candidates, answer = PRESET_COREF[text]
    enc = run.encoded
    word_ids = [w if s == 0 else None for w, s in zip(enc.word_ids, enc.sequence_ids)]  # the first segment's
    try:
        change = margin_change(
            result, CorefExample(text, pronoun, tuple(candidates), answer), enc.tokens, word_ids, enc.offsets
        )
    except ExampleError:  # a tokenizer that cuts the example's words otherwise
        return
    layer, head = change.best
    show_text(
        f"Coreference: attention from “{pronoun}” to “{answer}” minus the best other candidate "
        f"({', '.join(c for c in candidates if c != answer)}), before and after the ablation; above 0, a "
        "head prefers the answer.",
        "ablation-margin-says",
    )
    show_table(
        {
            "measure": [f"best head before ablation (L{layer} H{head})", "mean over heads", "heads above 0"],
            "before": [f"{change.best_before:+.3f}", f"{change.mean_before:+.3f}", str(change.preferring_before)],
            "after": [f"{change.best_after:+.3f}", f"{change.mean_after:+.3f}", str(change.preferring_after)],
        },
        "The pronoun → answer margin",
        hide_index=True,
    )


def suite_accuracy(source: str, heads: tuple[tuple[int, int], ...], mode: str) -> None:
    """With a coreference suite scored for this model (the Coreference view's Suite mode): the suite scored again
    with the heads ablated, and the accuracy of the heads after the first ablated layer before and after."""
    suite = chosen_suite()
    if suite is None or not is_scored(source, suite):
        st.caption(
            "Score a coreference suite in the Coreference view (Suite mode) to see here how this ablation "
            "changes the suite accuracy of the heads after the first ablated layer."
        )
        return
    before = suite_scores(source, suite)  # kept: is_scored said so
    if before.n == 0:
        return
    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Scoring {plain(suite.name)} with the heads ablated: {done} of {total}…")

    try:
        with heavy_guard() as outcome:
            after = get_suite_ablation(source, suite, heads, mode, progress)
    finally:
        bar.empty()
    if not outcome.ok:
        return
    change = suite_change(before.accuracy, after.accuracy, list(heads))
    show_text(
        f"Coreference suite: {plain(suite.name)}, {before.n} examples with an answer, scored again with the "
        "heads ablated.",
        "ablation-suite-says",
    )
    if change is None:
        st.caption("No head comes after the first ablated layer.")
        return
    layer, head = change.best
    show_table(
        {
            "measure": [
                f"best later head before ablation (L{layer} H{head})",
                f"mean over the {change.n_heads} later heads",
            ],
            "before": [f"{change.best_before:.1%}", f"{change.mean_before:.1%}"],
            "after": [f"{change.best_after:.1%}", f"{change.mean_after:.1%}"],
            "change": [
                f"{100 * (change.best_after - change.best_before):+.1f} pts",
                f"{100 * (change.mean_after - change.mean_before):+.1f} pts",
            ],
        },
        "Suite accuracy of the heads after the first ablated layer",
        hide_index=True,
    )
