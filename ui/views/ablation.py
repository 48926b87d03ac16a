"""The Ablation view: the sentence run again with chosen heads zeroed or made uniform, and what changes:
hidden states, every head's map, the sentence embedding and the [MASK] guesses."""
from __future__ import annotations

import numpy as np
import streamlit as st

from viz.analysis import ablation_figure

from ..computations import get_ablation, get_mlm_head
from ..limits import heavy_guard
from ..page import figure_slot, font_size, plain, show
from ..state import ABLATION_MODES


def draw(run) -> None:
    text, text_b = st.session_state.submitted
    all_heads = [(layer, head) for layer in range(run.n_layers) for head in range(run.n_heads)]
    st.session_state.setdefault("ablate_heads", [(st.session_state.layer, st.session_state.head)])
    gone = [h for h in st.session_state.ablate_heads if h not in all_heads]
    if gone:  # chosen on a bigger model
        kept = [h for h in st.session_state.ablate_heads if h in all_heads]
        st.session_state.ablate_heads = kept or [(st.session_state.layer, st.session_state.head)]
        st.info("Not in this model, so no longer ablated: " + ", ".join(f"L{l} H{h}" for l, h in gone))
    slot = figure_slot()  # presentation: the figure first, on the first screen
    left, right = st.columns([3, 2])
    heads = left.multiselect("Heads to ablate", all_heads, key="ablate_heads", format_func=lambda h: f"L{h[0]} H{h[1]}")
    mode = right.radio("Ablation", list(ABLATION_MODES.values()), key="ablate_mode", horizontal=True)
    if not heads:
        st.info("Pick one or more heads to ablate.")
        return
    with heavy_guard() as outcome:
        result = get_ablation(st.session_state.source, run, text, text_b, tuple(sorted(heads)),
                              next(word for word, label in ABLATION_MODES.items() if label == mode))
    if not outcome.ok:
        return
    st.caption("The same sentence with the chosen heads ablated: cosine between the original and the ablated hidden "
               "states per layer (mean over tokens), and how much each head's map moves (mean |Δ|). Heads before "
               "the first ablated layer do not change.")
    with slot or st.container():
        show(ablation_figure(result.hidden_cosine, result.attention_change, result.embedding_cosine,
                             np.array(heads), font_size=font_size()), "ablation")
    st.write(f"Sentence embedding (mean-pooled, what the default model is trained for): cosine "
             f"{result.embedding_cosine:.4f} to the original.")
    if result.predictions is not None:
        p = result.predictions
        st.write(f"Top predictions for [MASK] at position {p.position}:")
        rows = [{"rank": k + 1, "before": b[0], "p before": round(b[1], 4), "after": a[0],
                 "p after": round(a[1], 4)} for k, (b, a) in enumerate(zip(p.before, p.after))]
        st.dataframe(rows, hide_index=True)
    elif (reason := get_mlm_head(st.session_state.source)[1]) is not None:
        st.caption(plain(reason))
    else:
        st.caption("Put [MASK] in the sentence to see the model's top predictions before and after ablation.")
