"""The Head view: one head's map of the sentence, as a heatmap or as lines between the tokens, with
[CLS]/[SEP] hidden, rows renormalised or word pieces merged."""

from __future__ import annotations

import numpy as np
import streamlit as st

import viz
from attention.run import head_map

from ..page import figure_slot, font_size, kept_checkbox, present_size, present_title, show
from ..state import DRAW_MODES


def draw(run) -> None:
    slot = figure_slot()
    a, b, c, d = st.columns(4)
    specials = list(dict.fromkeys(t for t, s in zip(run.tokens, run.encoded.special) if s))
    hide = a.checkbox(
        f"Hide {'/'.join(specials)}" if specials else "Hide special tokens (this model adds none)",
        key="hide_special",
        disabled=not specials,
    )
    renormalize = kept_checkbox(b, "Renormalise rows", "renormalize", hide, "Applies when special tokens are hidden")
    merge = c.checkbox("Merge word pieces", key="merge_words", help="Each word one row and one column")
    mode = d.radio("Draw as", list(DRAW_MODES.values()), key="draw", horizontal=True)
    layer, head = st.session_state.layer, st.session_state.head
    if mode == DRAW_MODES["heatmap"]:
        hm = head_map(run, layer, head, hide, renormalize, merge)
        fig = viz.head_heatmap(
            hm.matrix,
            hm.labels,
            title=f"Layer {layer}, head {head}",
            font_size=font_size(),
            title_size=present_size().get("min_label"),
            **present_size(),
        )
        present_title(fig, layer, head)  # one line with the sentence, for the PNG
        with slot or st.container():
            show(fig, f"layer{layer}-head{head}")
    else:
        heads = st.multiselect(
            "Heads to draw", range(run.n_heads), key="line_heads", format_func=lambda h: f"head {h}"
        ) or [head]
        maps = [head_map(run, layer, h, hide, renormalize, merge) for h in heads]
        fig = viz.lines_view(
            np.stack([m.matrix for m in maps]),
            maps[0].labels,
            heads=[f"L{layer} H{h}" for h in heads],
            font_size=font_size(),
        )
        if st.session_state.present:  # the rows close up to fit the first screen
            fig.update_layout(height=min(fig.layout.height, present_size()["height"]))
            present_title(fig, layer, head)
        with slot or st.container():
            show(fig, f"layer{layer}-lines")
        hm = maps[0]
    st.caption(hm.note)
