"""The GQA & fused view: a grouped-query model's own grouping, the what-if of fewer key/value heads,
and explicit attention against a fused kernel (bench/fused.py's figures)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import streamlit as st

from attention.analysis.gqa import NOT_PER_HEAD, kv_head_options
from attention.runs.aggregate import group_means
from attention.runs.bigrun import NeedsSmallerInput, is_big
from attention.runs.pooling import pool_map
from viz.fused import fused_panel
from viz.gqa import gqa_change_grid, gqa_groups_figure, head_change_matrix
from viz.heatmap import grid_fits, head_heatmap

from ..compute.computations import CHANGE_MAX_CELLS, get_grouped_run, get_head_change, get_map_change
from ..compute.limits import heavy_guard
from ..compute.models import get_model
from ..page.layout import column_px, main_px, slots
from ..page.page import figure_slot, font_size, show
from ..state.actions import open_clicked_head
from ..state.view_context import ViewContext

FUSED_BENCH = Path(__file__).resolve().parents[2] / "data" / "fused_bench.json"


def real_grouping(ctx: ViewContext, config) -> None:
    """A grouped-query model's own grouping at the chosen layer: its heads laid out by the key/value
    head they read, and how alike the maps of heads sharing one are against heads of other groups."""
    run, layer = ctx.run, ctx.layer
    kv_of, H, G = config.kv_head_of, run.n_heads, config.kv_heads
    slot = figure_slot(ctx.present)  # presentation: the groups first, on the first screen
    st.subheader("Grouped-query attention: this model's own grouping")
    st.caption(
        f"This model was trained with grouped-query attention: its checkpoint gives {G} key/value "
        f"head{'s' * (G > 1)} for its {H} query heads, so each group of {H // G} query heads reads the same "
        f"keys and values. Below, layer {layer}'s heads by the key/value head they share (the model's own "
        "grouping, nothing converted). Click a head to open it."
    )
    with st.spinner(f"Reading layer {layer}…"):
        maps = run.attentions[layer]  # (H, L, L): one layer, on demand for a big model
        change = get_head_change(ctx.source, run, ctx.text, ctx.text_b, layer)
    fig = gqa_groups_figure(
        pool_map(maps, 32), kv_of, layer, font_size=font_size(ctx.present), width=main_px(ctx.present)
    )
    with slot or st.container():
        show(
            fig,
            f"gqa-groups-l{layer}",
            key="gqa_groups_chart",
            on_select=lambda: open_clicked_head("gqa_groups_chart"),
            selection_mode="points",
        )
    within, across = group_means(change, kv_of)
    pooled = len(run.tokens) > CHANGE_MAX_CELLS
    st.caption(
        f"Mean |Δ| between the maps of two heads of layer {layer}"
        f"{f' (pooled to {CHANGE_MAX_CELLS} × {CHANGE_MAX_CELLS} blocks)' if pooled else ''}: "
        + (f"{within:.4f} for heads sharing a key/value head, " if np.isfinite(within) else "")
        + (
            f"{across:.4f} for heads of different groups."
            if np.isfinite(across)
            else "every head shares the one key/value head (multi-query attention)."
        )
    )
    show(
        head_change_matrix(change, kv_of, layer, font_size=font_size(ctx.present), width=main_px(ctx.present)),
        f"gqa-pairs-l{layer}",
    )


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    config = get_model(ctx.source)[0].config
    kv_heads = config.kv_heads  # fewer than n_heads: already grouped
    if kv_heads < run.n_heads:
        real_grouping(ctx, config)
    options = [n for n in kv_head_options(run.n_heads, kv_heads) if n < kv_heads]
    heading = "What-if: fewer key/value heads" if kv_heads < run.n_heads else "Grouped-query attention (what-if)"
    if not (ctx.present and options and not is_big(run)):
        st.subheader(heading)  # presentation: said under the what-if's figure, which comes first
    if config.attention.qkv_per_head:
        st.caption(f"No grouped-query what-if: {NOT_PER_HEAD}.")
    elif not options:
        st.caption(
            "This model already shares one key/value head among all its query heads: there is no "
            "further grouping to try."
        )
    elif is_big(run):
        st.info(
            str(NeedsSmallerInput(run.n_layers, run.n_heads, len(run.tokens))).replace(
                "This view needs", "The what-if conversion compares"
            )
            + " The model's own grouping above reads one layer."
        )
    else:
        what_if_grouping(ctx, options, heading)
    fused_view()


def what_if_grouping(ctx: ViewContext, options: list[int], heading: str) -> None:
    """The model converted to fewer key/value heads (mean-pooled per group), against the original."""
    run, source, text, text_b, layer, head = ctx.run, ctx.source, ctx.text, ctx.text_b, ctx.layer, ctx.head
    if st.session_state.get("gqa_kv") not in options:  # none yet, or one from a link or another model
        st.session_state.gqa_kv = options[len(options) // 2]
    slot = figure_slot(ctx.present)  # presentation: the grid first, on the first screen, and the heading under it
    if slot is not None:
        st.markdown(f"**{heading}**")
    kv = st.select_slider(
        "Key/value heads",
        options[::-1],
        key="gqa_kv",
        persist_state="session",
        format_func=lambda n: f"{n} (multi-query)" if n == 1 else str(n),
    )
    st.caption(
        f"A what-if: each group of {run.n_heads // kv} consecutive query heads shares one key and one value "
        "head, made by mean-pooling the group's key and value projections (how Ainslie et al. 2023 start "
        "uptraining; no training here). Mean |Δ| of each head's map against the original:"
    )
    with st.spinner("Converting and running…"), heavy_guard() as outcome:
        grouped = get_grouped_run(source, kv, text, text_b)
    if not outcome.ok:
        return
    with slot or st.container():
        change = get_map_change(source, kv, text, text_b, run, grouped)
        show(gqa_change_grid(change, kv, font_size=font_size(ctx.present), width=main_px(ctx.present)), f"gqa-{kv}")
    beside = grid_fits(run.tokens, font_size(ctx.present), column_px(ctx.present, 2))
    width = column_px(ctx.present, 2) if beside else main_px(ctx.present)
    if not beside:
        st.caption(
            f"At {len(run.tokens)} tokens the two maps are too dense side by side: the grouped one is "
            "drawn under the original."
        )
    left, right = slots(beside)
    with left:
        show(
            head_heatmap(
                run.attentions[layer, head],
                run.tokens,
                title=f"Original: layer {layer}, head {head}",
                font_size=font_size(ctx.present),
                width=width,
                byte_level=run.encoded.byte_level,
            ),
            f"original-l{layer}-h{head}",
        )
    with right:
        show(
            head_heatmap(
                grouped.attentions[layer, head],
                grouped.tokens,
                title=f"{kv} key/value heads: layer {layer}, head {head}",
                font_size=font_size(ctx.present),
                width=width,
                byte_level=run.encoded.byte_level,
            ),
            f"gqa{kv}-l{layer}-h{head}",
        )


def fused_view() -> None:
    st.subheader("Explicit attention against a fused kernel")
    try:
        bench = json.loads(FUSED_BENCH.read_text())
    except (OSError, ValueError):
        st.info("No fused-kernel benchmark results yet: run python bench/fused.py.")
        return
    st.caption(
        "Our attention materialises the (B, H, L, S) probabilities; PyTorch's fused "
        "scaled_dot_product_attention never does. Numbers from bench/fused.py on the machine named."
    )
    show(fused_panel(bench), "fused")
