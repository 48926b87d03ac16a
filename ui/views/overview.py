"""The Overview: every head of every layer as a thumbnail; a click opens the head."""

from __future__ import annotations

import streamlit as st

import viz
from attention.runs.bigrun import is_big
from viz.overview import LABEL_MIN_TILE_PX, overview_figure, tile_px_for

from ..compute.computations import sentence_patterns
from ..page.layout import main_px
from ..page.page import figure_slot, font_size, present_size, show
from ..state.actions import open_clicked_head
from ..state.state import STATS_OVER
from ..state.view_context import ViewContext
from .overview_sinks import sink_shares_of


def pattern_labels(ctx: ViewContext) -> dict[tuple[int, int], str] | None:
    """Each head's pattern on this sentence, or over a corpus run (its folder, as Head stats opens it)."""
    of, folder = st.columns([2, 3])
    if (
        of.radio("Patterns of", list(STATS_OVER.values()), key="stats_over", persist_state="session", horizontal=True)
        == STATS_OVER["corpus"]
    ):
        from ..serve import preload

        preload.later()  # pandas and pyarrow (the run's tables), imported once for the process, as a table view does
        from .corpus_stats import corpus_patterns, opened_run

        corpus = opened_run(folder)
        return None if corpus is None else corpus_patterns(corpus, ctx.model.n_layers, ctx.model.n_heads)
    patterns = sentence_patterns(ctx.source, ctx.run)[1]
    layers, heads = ctx.model.n_layers, ctx.model.n_heads
    return {(layer, head): str(patterns[layer, head]) for layer in range(layers) for head in range(heads)}


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    slot = figure_slot(ctx.present)
    said, box = st.columns([3, 2], vertical_alignment="center")  # one row above the grid
    said.caption("Every head of every layer, pooled to small thumbnails on long inputs. Click one to open it.")
    labels = None
    if box.checkbox(  # short: at 1280 px presenting, a longer label was cut ("… (see Head st…")
        "Label each head with its pattern",
        key="overview_patterns",
        persist_state="session",
        help="Each head's pattern on this sentence as Head stats labels it: vertical, diagonal, block, broad or "
        "heterogeneous (hetero. on a tile).",
    ):
        labels = pattern_labels(ctx)
    sinks = sink_shares_of(ctx, st)
    size = {k: v for k, v in present_size(ctx.present).items() if k != "min_label"} or {"width": main_px(ctx.present)}
    highlight = (ctx.layer, ctx.head)
    if (
        labels
        and tile_px_for(run.n_layers, run.n_heads, None, size.get("width"), size.get("height"), bool(sinks))
        < LABEL_MIN_TILE_PX
    ):
        st.caption(f"{run.n_layers} × {run.n_heads} tiles are too small to write on: hover a tile to read its pattern.")
    if is_big(run):  # pooled as the forward pass went: the full maps were never held together
        fig = overview_figure(
            run.pooled,
            run.strongest,
            len(run.tokens),
            run.tokens,
            labels=labels,
            highlight=highlight,
            font_size=font_size(ctx.present),
            sinks=sinks,
            **size,
        )
    else:
        fig = viz.overview_grid(
            run.attentions,
            run.tokens,
            labels=labels,
            highlight=highlight,
            font_size=font_size(ctx.present),
            sinks=sinks,
            **size,
        )
    with slot or st.container():
        show(
            fig,
            "overview",
            key="overview_chart",
            on_select=lambda: open_clicked_head("overview_chart"),
            selection_mode="points",
        )
