"""The Overview's outlines: each head's share of attention to the first token (an attention sink's mark), raw as
Head stats reads it (stats.first_share of the probabilities), or of the value-weighted maps (mixing.norm_maps)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention.analysis.stats import first_share
from attention.runs.bigrun import KeepsTooMuch

from ..compute.computations import mixing_of, sentence_patterns
from ..page import registry
from ..page.page import plain
from ..state.state import SINK_COLOURS
from ..state.view_context import ViewContext


def sink_shares_of(ctx: ViewContext, where) -> dict[str, np.ndarray] | None:
    """{name: (n_layers, H)} the outlines show, the first colouring them (Overview's `sinks`); None for no outline.
    The choice is a radio in `where`; a value-weighted share a model or an input cannot have is said, not drawn."""
    choice = where.radio(
        "Outline heads by attention to the first token",
        list(SINK_COLOURS.values()),
        key="overview_sinks",
        persist_state="session",
        horizontal=True,
    )
    if choice == SINK_COLOURS["none"]:
        return None
    raw = {"raw": np.asarray(sentence_patterns(ctx.source, ctx.run)[0]["to_first"])}
    if choice == SINK_COLOURS["raw"]:
        return raw
    weighted, why = weighted_first_share(ctx)
    if weighted is None:
        st.info(f"{why} The outlines show the raw share.")
        return raw
    return {"value-weighted": weighted, **raw}


def weighted_first_share(ctx: ViewContext) -> tuple[np.ndarray | None, str]:
    """Each head's share of the value-weighted maps on the first token, (n_layers, H), from the Mixing view's
    cached norm_maps; or None and why not (a model with no such maps, an input past their bound)."""
    mixing = registry.named("mixing")
    if not mixing.applies(ctx.model.kinds):
        return None, f"Value-weighted maps need {mixing.needs}."
    try:
        with st.spinner("Weighting every map by the size of what it moves…"):
            norms = mixing_of(ctx.source, ctx.run, ctx.text, ctx.text_b)
    except KeepsTooMuch as err:  # sized before the work by norm_maps
        return None, plain(str(err))
    return np.stack([first_share(heads) for heads in norms.heads]), ""
