"""The page's parts and views: each view reads the one run of the submitted sentence."""
from __future__ import annotations

import html
import re

import numpy as np
import streamlit as st

import viz
from attention.analysis.stats import head_stats, pattern_labels, punctuation_mask
from attention.run import head_map
from attention.trace import head_matrix
from viz.heatmap import grid_fits
from viz.masks import causal_legend_px
from viz.overview import LABEL_MIN_TILE_PX, overview_figure, tile_px_for
from viz.shapeflow import min_width, shape_flow, tensor_fits, tensor_heatmap
from viz.tokens import COMPACT_ABOVE

from .cache import NeedsSmallerInput, get_batch, get_model, get_run, get_trace, is_big, precision_caption
from .layout import column_px, expander_px, main_px, slots
from .present import MIN_PRESENT_LABEL_PX, figure_height
from .sources import policy
from .state import (DRAW_MODES, FLOW_DEFAULT_STEP, MAX_TEXT_CHARS, PRESETS, SHORT_SECOND, VIEWS, ask_for_model,
                    choose_model, current_choices, open_clicked_head, pick_step, submit, use_preset, view_key)


def plain(text: str) -> str:
    """Escape markdown so text a person typed is shown exactly as typed."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>$~&])", r"\\\1", text)


def show(fig, name: str, **kwargs):
    """A figure with its PNG download button (plotly's camera icon), drawn as exported: at its own
    width when it sets one (square heatmap cells), else across the column."""
    config = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}}
    width = "content" if fig.layout.width else "stretch"
    st.session_state.setdefault("page_figures", []).append((name, fig))  # what the report holds
    return st.plotly_chart(fig, theme=None, config=config, key=kwargs.pop("key", name), width=width, **kwargs)


def is_causal() -> bool:
    """Whether the model in use is a decoder: every token sees only itself and earlier tokens."""
    return bool(get_model(st.session_state.source)[0].config.causal)


def font_size() -> int:
    return 22 if st.session_state.get("present") else 14


def axis_labels(axis: str, tokens: list[str], size: int) -> list[str]:
    return tokens if axis in ("L", "S") else [str(i) for i in range(size)]


def sidebar() -> None:
    with st.sidebar:
        st.header("Model")
        model, _ = get_model(st.session_state.source)
        c = model.config
        st.caption(f"In use: {plain(model.load_report.source)} — {c.model_type}"
                   f"{' (causal)' if c.causal else ''}, {c.num_hidden_layers} layers × "
                   f"{c.num_attention_heads} heads, width {c.hidden_size}{precision_caption(model.load_report)}")
        rules = policy()
        if rules.locked:  # a public server: only the operator's list, nothing typed reaches the disk
            choices = ["", *rules.allowed]
            if st.session_state.get("model_choice") not in choices:
                st.session_state.model_choice = st.session_state.source if st.session_state.source in choices else ""
            st.selectbox("Model", choices, key="model_choice", on_change=choose_model,
                         format_func=lambda s: s or "all-MiniLM-L6-v2 (bundled)")
        else:
            with st.form("model_form"):
                st.text_input("Checkpoint folder or hub id", key="model_input",
                              placeholder="empty: the bundled all-MiniLM-L6-v2")
                st.form_submit_button("Load model", on_click=ask_for_model)
        if st.session_state.get("model_error"):
            st.error(plain(st.session_state.model_error) + "  \nThe previous model stays in use.")
        ignored = sorted({re.sub(r"\.(weight|bias)$", "", k) for k in model.load_report.ignored_keys})
        if ignored:
            st.caption("Task-head tensors, not used by these views: " + plain(", ".join(ignored)))


def input_form() -> None:
    if st.session_state.present:  # the figure is the point; the form folds away
        with st.expander("Sentence and examples"):
            _input_widgets()
    else:
        _input_widgets()


def _input_widgets() -> None:
    st.selectbox("Examples", list(PRESETS), index=None, placeholder="Pick an example…", key="preset",
                 on_change=use_preset)
    with st.form("sentence_form"):
        st.text_area("Sentence", key="text", height=90, max_chars=MAX_TEXT_CHARS)
        st.text_input("Second sentence (segment B, optional)", key="text_b", max_chars=MAX_TEXT_CHARS)
        st.form_submit_button("Run", type="primary", on_click=submit)


def tokens_strip(run) -> None:
    """The strip of the input's pieces. A long input's strip (more than COMPACT_ABOVE pieces: a
    thousand pixels of boxes at 512) waits in a closed expander, drawn only once it is opened, so
    the view's figure is not pushed below it; the figure's axes and hovers name every token."""
    enc = run.encoded
    if enc.notice:
        st.warning(enc.notice)
    n = len(enc.tokens)
    folded = n > COMPACT_ABOVE
    if folded:
        place = st.expander(f"Token strip: {n} pieces", key="show_strip", on_change="rerun")
        if not place.open:
            return
    else:
        place = st.container()
    with place:
        show(strip_figure(enc, expander_px() if folded else main_px()), "tokens")


def strip_figure(enc, width: int):
    """The token strip of an encoded input, its rows wrapped within `width` px (its column)."""
    return viz.token_strip(enc.tokens, enc.input_ids[0].tolist(), enc.token_type_ids[0].tolist(), enc.special,
                           font_size=font_size(), width=width)


def selectors(run) -> None:
    st.segmented_control("View", list(VIEWS.values()), key="view", required=True)
    left, right, _ = st.columns([1, 1, 4])
    left.selectbox("Layer", range(run.n_layers), key="layer")
    right.selectbox("Head", range(run.n_heads), key="head")


def figure_slot():
    """Presentation mode: a place for the view's figure above its controls (drawn after them)."""
    return st.container() if st.session_state.get("present") else None


def present_size() -> dict:
    """The figure's size budget in presentation mode (the first screen); nothing otherwise."""
    if not st.session_state.get("present"):
        return {}
    return {"width": main_px(), "height": figure_height(), "min_label": MIN_PRESENT_LABEL_PX}


def head_view(run) -> None:
    slot = figure_slot()
    a, b, c, d = st.columns(4)
    specials = list(dict.fromkeys(t for t, s in zip(run.tokens, run.encoded.special) if s))
    hide = a.checkbox(f"Hide {'/'.join(specials)}" if specials else "Hide special tokens (this model adds none)",
                      key="hide_special", disabled=not specials)
    renormalize = b.checkbox("Renormalise rows", key="renormalize", disabled=not hide)
    merge = c.checkbox("Merge word pieces", key="merge_words", help="Each word one row and one column")
    mode = d.radio("Draw as", list(DRAW_MODES.values()), key="draw", horizontal=True)
    layer, head = st.session_state.layer, st.session_state.head
    if mode == DRAW_MODES["heatmap"]:
        hm = head_map(run, layer, head, hide, renormalize, merge)
        title = None if st.session_state.present else f"Layer {layer}, head {head}"  # the row above says it
        fig = viz.head_heatmap(hm.matrix, hm.labels, title=title, font_size=font_size(),
                               **present_size())
        with slot or st.container():
            show(fig, f"layer{layer}-head{head}")
    else:
        heads = st.multiselect("Heads to draw", range(run.n_heads), key="line_heads",
                               format_func=lambda h: f"head {h}") or [head]
        maps = [head_map(run, layer, h, hide, renormalize, merge) for h in heads]
        fig = viz.lines_view(np.stack([m.matrix for m in maps]), maps[0].labels,
                             heads=[f"L{layer} H{h}" for h in heads], font_size=font_size())
        show(fig, f"layer{layer}-lines")
        hm = maps[0]
    st.caption(hm.note)


def sentence_patterns(run) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-head statistics of the run's sentence and a pattern label per head (milliseconds)."""
    enc = run.encoded
    if is_big(run):  # a pass of its own, one layer's maps at a time, cached
        stats = run.stats
    else:
        stats = head_stats(run.attentions, enc.special, enc.sequence_ids, punctuation_mask(enc.tokens))
    pair = any(s == 1 for s in enc.sequence_ids)
    return stats, pattern_labels(stats, len(enc.tokens), pair=pair)


def overview(run) -> None:
    slot = figure_slot()
    st.caption("Every head of every layer, pooled to small thumbnails on long inputs. Click one to open it.")
    labels = None
    if st.checkbox("Label each head with its pattern (see Head stats)", key="overview_patterns"):
        patterns = sentence_patterns(run)[1]
        labels = {(layer, head): str(patterns[layer, head]) for layer in range(run.n_layers)
                  for head in range(run.n_heads)}
    size = {k: v for k, v in present_size().items() if k != "min_label"} or {"width": main_px()}
    highlight = (st.session_state.layer, st.session_state.head)
    if labels and tile_px_for(run.n_layers, run.n_heads, None, size.get("width"), size.get("height")) \
            < LABEL_MIN_TILE_PX:
        st.caption(f"{run.n_layers} × {run.n_heads} tiles are too small to write on: hover a tile to read its "
                   "pattern.")
    if is_big(run):  # pooled as the forward pass went: the full maps were never held together
        fig = overview_figure(run.pooled, run.strongest, len(run.tokens), run.tokens, labels=labels,
                              highlight=highlight, font_size=font_size(), **size)
    else:
        fig = viz.overview_grid(run.attentions, run.tokens, labels=labels, highlight=highlight,
                                font_size=font_size(), **size)
    with slot or st.container():
        show(fig, "overview", key="overview_chart", on_select=lambda: open_clicked_head("overview_chart"), selection_mode="points")


def flow(run) -> None:
    slot = figure_slot()
    text, text_b = st.session_state.submitted
    padded = st.checkbox(f"Trace a padded batch: this sentence and “{SHORT_SECOND}”", key="flow_padded")
    if padded and too_big_for_batch(run):
        padded = False
    texts = (text, SHORT_SECOND) if padded else (text,)
    trace = get_trace(st.session_state.source, texts, "" if padded else text_b, st.session_state.layer)
    step = st.session_state.get("flow_step", FLOW_DEFAULT_STEP)
    if step not in trace.names:
        step = FLOW_DEFAULT_STEP
    tokens = run.tokens if not padded else get_batch(st.session_state.source, texts).tokens[0]
    fs, spec = font_size(), [3, 2]
    head = st.session_state.head
    matrix, rows, cols = head_matrix(trace, step, head)
    kind = "probs" if step in ("probs", "mask") else "values"

    def tensor(width: int, height: int | None = None):
        fig = tensor_heatmap(matrix, axis_labels(rows, tokens, matrix.shape[0]),
                             axis_labels(cols, tokens, matrix.shape[1]),
                             title=f"{trace.step(step).title}, head {head}", font_size=fs, kind=kind,
                             width=width, height=height)
        show(fig, f"tensor-{step}")

    if slot is not None:  # presentation: the diagram is taller than a screen, so the tensor comes first
        with slot:
            tensor(main_px(), figure_height())
        show(shape_flow(trace, selected=step, font_size=fs, width=main_px()),
             "shape-flow", key="flow_chart", on_select=pick_step, selection_mode="points")
        st.caption("Click a box of the diagram to show its tensor, above, for the selected head.")
        return
    beside = column_px(spec, 0) >= min_width(fs) and tensor_fits(tokens, fs, column_px(spec, 1))
    if not beside:
        st.caption(f"At {len(tokens)} tokens the "
                   "diagram and the tensor do not fit side by side: the tensor is drawn under the diagram.")
    left, right = st.columns(spec) if beside else slots(False)
    with left:
        show(shape_flow(trace, selected=step, font_size=fs, width=column_px(spec, 0) if beside else main_px()),
             "shape-flow", key="flow_chart", on_select=pick_step, selection_mode="points")
    with right:
        tensor(column_px(spec, 1) if beside else main_px())
        st.caption("Click a box of the diagram to show its tensor for the selected head.")


def masks(run) -> None:
    text, text_b = st.session_state.submitted
    layer, head = st.session_state.layer, st.session_state.head
    texts = (text, text_b or SHORT_SECOND)
    fs, full = font_size(), main_px()
    st.subheader("Padding mask of a padded batch")
    if not too_big_for_batch(run):
        batch = get_batch(st.session_state.source, texts)
        st.caption("Two sentences of different lengths in one batch: the shorter is padded, and the mask keeps "
                   "every query from attending to padding.")
        show(viz.padding_mask_figure(batch.mask, batch.names, batch.tokens, font_size=fs, width=full),
             "padding-mask")
        short = int(np.argmin(batch.mask.sum(1)))
        show(viz.head_heatmap(batch.attentions[layer, short, head], batch.tokens[short],
                              title=f"{batch.names[short]} in the batch: layer {layer}, head {head}",
                              font_size=fs, width=full), "padded-attention")
    if is_causal():
        st.subheader("The causal mask")
        st.caption("This model is causal, as it was trained: each token sees only itself and earlier tokens. The "
                   "map beside the mask is the model's own.")
    else:
        st.subheader("What-if: a causal mask")
        st.caption("This model reads both directions. This runs the same weights with a causal mask, so each token "
                   "sees only itself and earlier tokens — a what-if, not how the model was trained.")
    causal = get_run(st.session_state.source, text, text_b, causal=True)
    half = column_px(2)
    beside = grid_fits(run.tokens, fs, half, right=causal_legend_px(fs))
    width = half if beside else full
    if not beside:
        st.caption(f"At {len(run.tokens)} tokens the mask and the map are too dense side by side: one is drawn "
                   "under the other, across the page.")
    left, right = slots(beside)
    with left:
        show(viz.causal_mask_figure(len(run.tokens), run.tokens, font_size=fs, width=width), "causal-mask")
    with right:
        show(viz.head_heatmap(causal.attentions[layer, head], causal.tokens,
                              title=f"{'Causal' if is_causal() else 'What-if: causal'}, layer {layer}, head {head}",
                              font_size=fs, width=width),
             "causal-attention")


def too_big_for_batch(run) -> bool:
    """For a big model's run, say that the padded batch (which keeps every map of two sentences) needs a
    shorter input, and return True; False for an ordinary run."""
    if not is_big(run):
        return False
    st.info(str(NeedsSmallerInput(run.n_layers, run.n_heads, len(run.tokens))).replace(
        "This view needs", "The padded batch needs") + " The rest of this view reads one layer.")
    return True


def report_facts() -> list[tuple[str, str]]:
    """The view and every choice that shaped it, as (name, value) rows for the report's header."""
    def shown(value) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, (list, tuple)):
            return ", ".join(f"L{v[0]} H{v[1]}" if isinstance(v, tuple) else str(v) for v in value) or "none"
        return str(value)

    return [(p.label[0].upper() + p.label[1:], shown(value)) for p, value in current_choices()
            if p.key not in ("present", "source") and value is not None]


def figure_caption(name: str, fig) -> str:
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else ""
    return html.unescape(re.sub(r"<[^>]+>", " ", title)).strip() or name  # the report escapes it again


def report_button(model_name: str) -> None:
    """Download the figures this run drew (the current view), with the sentence and choices written on it."""
    text, text_b = st.session_state.submitted
    figures = [(figure_caption(name, fig), fig) for name, fig in st.session_state.get("page_figures", [])]
    details = st.session_state.page_details = report_facts()  # kept beside page_figures: what the report says

    def build() -> str:
        return viz.html_report(text, text_b, model_name, figures, details=details)

    st.download_button("Download this view as an offline HTML report", data=build,
                       file_name=f"attention-{view_key()}.html", mime="text/html", on_click="ignore")
