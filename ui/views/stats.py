"""The Head stats view: per-head statistics and patterns of this sentence, and every head laid out by
how alike its maps are across sentences; a row or a point opens the head. Or, chosen at the top, a corpus
run's heads (ui/views/corpus_stats.py)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from viz.stats import head_scatter, stats_frame

from ..compute.computations import (
    COMPARE_MAX_TOKENS,
    comparison_sentences,
    head_map_embedding,
    sentence_patterns,
)
from ..compute.limits import heavy_guard
from ..page.page import figure_slot, font_size, present_size, progress_bar, show, show_table, show_text
from ..state.actions import open_clicked_head, open_head
from ..state.state import STATS_OVER
from ..state.view_context import ViewContext
from .corpus_stats import draw_corpus
from .overview_sinks import weighted_first_share


def open_selected_row(frame) -> None:
    rows = st.session_state.stats_table.selection.get("rows", [])
    if rows:
        open_head(frame.iloc[rows[0]]["layer"], frame.iloc[rows[0]]["head"])


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    slot = figure_slot(ctx.present)  # presentation: the map of the heads first, on the first screen; the table under it
    places = st.columns([2, 3, 2])  # one row: the choice, and a corpus run's folder and measure
    over = places[0].radio("Statistics of", list(STATS_OVER.values()), key="stats_over", persist_state="session")
    if over == STATS_OVER["corpus"]:
        draw_corpus(places[1], places[2], ctx.present, slot)
        return
    stats, labels = sentence_patterns(ctx.source, run)
    weighted = weighted_first_share(ctx)[0]  # the Mixing view's maps, cached; None where a model has none
    stats = stats if weighted is None else {**stats, "to_first_weighted": weighted}  # the cached dict kept as it is
    st.caption(
        "Per head, on this sentence: mean row entropy (nats), share of attention to [CLS], to [SEP], to "
        "the token itself, to the previous and next token and to punctuation, and mean distance (positions) "
        "from query to key; share to the first token (an attention sink's mark), raw and, where the model has "
        "them, of the value-weighted maps ‖a·f(x)‖ (what the head moves). Click a column to sort, a row to open "
        "the head. Patterns (Kovaleva et al. 2019): vertical when [CLS]+[SEP] get ≥ 0.5, diagonal when "
        "previous+self+next get ≥ 0.5, block when a pair's queries keep ≥ 0.8 within their sentence, broad when "
        "entropy ≥ 0.7 of a uniform row's, else heterogeneous."
    )
    frame = stats_frame(stats, labels)
    counts = {name: int((labels == name).sum()) for name in np.unique(labels)}
    show_text("Patterns: " + ", ".join(f"{n} {name}" for name, n in counts.items()), "stats-patterns", st.write)
    show_table(
        frame,
        "Each head on this sentence",
        hide_index=True,
        key="stats_table",
        on_select=lambda: open_selected_row(frame),
        selection_mode="single-row",
        height=min(36 * (len(frame) + 1), 420),
    )

    if slot is None:
        st.subheader("Heads compared across sentences")
    pairs = comparison_sentences(ctx.text, ctx.text_b, len(run.tokens))
    over = (
        f"this sentence and the {len(pairs) - 1} examples"
        if len(run.tokens) <= COMPARE_MAX_TOKENS
        else f"the {len(pairs)} examples (this sentence is longer than {COMPARE_MAX_TOKENS} tokens, which would take "
        "a long time, so it is left out)"
    )
    st.caption(
        f"Jensen-Shannon distance between every two heads' maps, averaged over {over}, laid out in 2-D by "
        "multidimensional scaling (as in Clark et al. 2019). Nearby heads attend alike. Click a point to open "
        "the head."
    )
    bar, update = progress_bar("Comparing heads…")
    with heavy_guard() as outcome:
        _, embedding = head_map_embedding(ctx.source, pairs, update)
    bar.empty()
    if not outcome.ok:
        return
    n_heads = run.n_heads
    index = np.arange(len(embedding.layer))
    names = [f"{labels[i // n_heads, i % n_heads]}" for i in index]
    size = {k: v for k, v in present_size(ctx.present).items() if k != "min_label"}
    fig = head_scatter(
        embedding.coords, embedding.layer, index % n_heads, labels=names, font_size=font_size(ctx.present), **size
    )
    with slot or st.container():
        show(
            fig,
            "head-embedding",
            key="embedding_chart",
            on_select=lambda: open_clicked_head("embedding_chart"),
            selection_mode="points",
        )
        if slot is not None:
            st.markdown("**Heads compared across sentences** (the table of this sentence's heads is below)")
