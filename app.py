"""Attention visualizer: type a sentence, see its WordPiece tokens and what every head attends to.

Widgets and URL state live here; computing is in attention/, figures in viz/.
"""
from __future__ import annotations

import logging
import re

import numpy as np
import streamlit as st

import viz
from attention import ModelLoadError, load_bert
from attention.run import head_map, run_padded_batch, run_sentence
from attention.trace import head_matrix, trace_layer
from viz.shapeflow import shape_flow, tensor_heatmap

log = logging.getLogger("attention-app")

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."
PRESETS = {
    "Coreference: it → animal (tired)": (DEFAULT_SENTENCE, ""),
    "Coreference: it → street (wide)": ("The animal didn't cross the street because it was too wide.", ""),
    "Coreference: it → trophy (big)": ("The trophy doesn't fit in the suitcase because it is too big.", ""),
    "Coreference: it → suitcase (small)": ("The trophy doesn't fit in the suitcase because it is too small.", ""),
    "Sentence pair": ("The cat sat on the mat.", "It was warm and soft."),
    "Sub-word pieces": ("Tokenization splits unbelievably uncommon words into pieces.", ""),
}
SHORT_SECOND = "It was tired."  # the padded partner in the masks view when there is no segment B
VIEWS = {"head": "Head", "overview": "Overview", "flow": "Shape flow", "masks": "Masks"}
MAX_URL_TEXT = 20_000  # longer sentences are not carried in (or restored from) the URL
FLOW_DEFAULT_STEP = "probs"


# ---- cached computations: the model once per process, results per input -------------------

@st.cache_resource(max_entries=3, show_spinner=False)
def get_model(source: str):
    return load_bert(source or None)


@st.cache_resource(max_entries=16, show_spinner=False)
def get_run(source: str, text: str, text_b: str, causal: bool = False):
    model, tokenizer = get_model(source)
    return run_sentence(model, tokenizer, text, text_b, causal=causal)


@st.cache_resource(max_entries=4, show_spinner=False)
def get_trace(source: str, texts: tuple[str, ...], text_b: str, layer: int):
    """The recorded forward pass of one layer: for one sentence (or pair), or a padded batch."""
    model, tokenizer = get_model(source)
    limit = model.config.max_position_embeddings
    if len(texts) == 1:
        enc = tokenizer(texts[0], text_b or None, truncation=True, max_length=limit, return_tensors="pt")
    else:
        enc = tokenizer(list(texts), padding=True, truncation=True, max_length=limit, return_tensors="pt")
    return trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=layer)


@st.cache_resource(max_entries=8, show_spinner=False)
def get_batch(source: str, texts: tuple[str, ...]):
    model, tokenizer = get_model(source)
    return run_padded_batch(model, tokenizer, list(texts))


# ---- small helpers -------------------------------------------------------------------------

def plain(text: str) -> str:
    """Escape markdown so text a person typed is shown exactly as typed."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>$~&])", r"\\\1", text)


def show(fig, name: str, **kwargs):
    """A figure with its PNG download button (plotly's camera icon), drawn as exported: at its own
    width when it sets one (square heatmap cells), else across the column."""
    config = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}}
    width = "content" if fig.layout.width else "stretch"
    return st.plotly_chart(fig, theme=None, config=config, key=kwargs.pop("key", name), width=width, **kwargs)


def font_size() -> int:
    return 22 if st.session_state.get("present") else 14


def axis_labels(axis: str, tokens: list[str], size: int) -> list[str]:
    return tokens if axis in ("L", "S") else [str(i) for i in range(size)]


# ---- state: URL in, URL out ------------------------------------------------------------------

def init_from_url() -> None:
    """On a session's first run, restore sentence(s), view, layer and head from the URL."""
    if "ready" in st.session_state:
        return
    st.session_state.ready = True
    params, notices = st.query_params, []
    text, text_b = params.get("s", DEFAULT_SENTENCE), params.get("s2", "")
    if len(text) > MAX_URL_TEXT or len(text_b) > MAX_URL_TEXT:
        notices.append(f"The link's sentence is longer than {MAX_URL_TEXT:,} characters; the default is shown.")
        text, text_b = DEFAULT_SENTENCE, ""
    st.session_state.text, st.session_state.text_b = text, text_b
    st.session_state.submitted = (text, text_b)
    view = params.get("view", "head")
    if view not in VIEWS:
        notices.append(f"Unknown view in the link; showing {VIEWS['head']}.")
        view = "head"
    st.session_state.view = VIEWS[view]
    for name in ("layer", "head"):
        value = params.get(name, "0")
        if not re.fullmatch(r"\d{1,4}", value):
            notices.append(f"The link's {name} is not a number; using 0.")
            value = "0"
        st.session_state[name] = int(value)
    st.session_state.present = params.get("present") == "1"
    st.session_state.url_notices = notices


def write_url() -> None:
    text, text_b = st.session_state.submitted
    view = next(k for k, v in VIEWS.items() if v == st.session_state.view)
    params = {"view": view, "layer": str(st.session_state.layer), "head": str(st.session_state.head)}
    if st.session_state.present:
        params["present"] = "1"
    if len(text) <= MAX_URL_TEXT and len(text_b) <= MAX_URL_TEXT:
        params["s"] = text
        if text_b:
            params["s2"] = text_b
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)


def clamp_selection(n_layers: int, n_heads: int) -> None:
    for name, n in (("layer", n_layers), ("head", n_heads)):
        value = st.session_state.get(name, 0)
        if not 0 <= value < n:
            st.session_state.url_notices.append(f"{name.capitalize()} {value} does not exist in this model "
                                                f"(0–{n - 1}); showing {min(max(value, 0), n - 1)}.")
            st.session_state[name] = min(max(value, 0), n - 1)


# ---- callbacks ---------------------------------------------------------------------------------

def use_preset() -> None:
    text, text_b = PRESETS[st.session_state.preset]
    st.session_state.text, st.session_state.text_b = text, text_b
    st.session_state.submitted = (text, text_b)


def submit() -> None:
    st.session_state.submitted = (st.session_state.text, st.session_state.text_b.strip())


def open_from_overview() -> None:
    for point in st.session_state.overview_chart.selection.get("points", []):
        data = point.get("customdata")
        if data is not None and len(data) >= 2:
            st.session_state.layer, st.session_state.head = int(data[0]), int(data[1])
            st.session_state.view = VIEWS["head"]
            return


def pick_step() -> None:
    for point in st.session_state.flow_chart.selection.get("points", []):
        data = point.get("customdata")
        if data:
            st.session_state.flow_step = data[0] if isinstance(data, (list, tuple)) else data
            return


def ask_for_model() -> None:
    st.session_state.pending_source = st.session_state.model_input.strip()


def load_pending_model() -> None:
    """Load the model asked for, with a spinner; on failure keep the one in use and say why."""
    source = st.session_state.pop("pending_source", None)
    if source is None:
        return
    try:
        with st.spinner(f"Loading {source or 'the bundled model'}…"):
            get_model(source)
    except ModelLoadError as err:
        st.session_state.model_error = str(err)
        return
    st.session_state.source, st.session_state.model_error = source, None


# ---- page parts --------------------------------------------------------------------------------

def sidebar() -> None:
    with st.sidebar:
        st.header("Model")
        load_pending_model()
        model, _ = get_model(st.session_state.source)
        c = model.config
        st.caption(f"In use: {plain(model.load_report.source)} — {c.num_hidden_layers} layers × "
                   f"{c.num_attention_heads} heads, width {c.hidden_size}")
        with st.form("model_form"):
            st.text_input("Checkpoint folder or hub id", key="model_input",
                          placeholder="empty: the bundled all-MiniLM-L6-v2")
            st.form_submit_button("Load model", on_click=ask_for_model)
        if st.session_state.get("model_error"):
            st.error(plain(st.session_state.model_error) + "  \nThe previous model stays in use.")
        ignored = sorted({re.sub(r"\.(weight|bias)$", "", k) for k in model.load_report.ignored_keys})
        if ignored:
            st.caption("Not part of the encoder, ignored: " + plain(", ".join(ignored)))


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
        st.text_area("Sentence", key="text", height=90)
        st.text_input("Second sentence (segment B, optional)", key="text_b")
        st.form_submit_button("Run", type="primary", on_click=submit)


def tokens_strip(run) -> None:
    enc = run.encoded
    if enc.notice:
        st.warning(enc.notice)
    fig = viz.token_strip(enc.tokens, enc.input_ids[0].tolist(), enc.token_type_ids[0].tolist(), enc.special,
                          font_size=font_size())
    show(fig, "tokens")


def selectors(run) -> None:
    left, mid, right = st.columns([3, 1, 1])
    left.segmented_control("View", list(VIEWS.values()), key="view", required=True)
    mid.selectbox("Layer", range(run.n_layers), key="layer")
    right.selectbox("Head", range(run.n_heads), key="head")


def head_view(run) -> None:
    a, b, c, d = st.columns(4)
    hide = a.checkbox("Hide [CLS]/[SEP]", key="hide_special")
    renormalize = b.checkbox("Renormalise rows", key="renormalize", disabled=not hide)
    merge = c.checkbox("Merge word pieces into words", key="merge_words")
    mode = d.radio("Draw as", ["Heatmap", "Lines"], key="draw", horizontal=True)
    layer, head = st.session_state.layer, st.session_state.head
    if mode == "Heatmap":
        hm = head_map(run, layer, head, hide, renormalize, merge)
        fig = viz.head_heatmap(hm.matrix, hm.labels, title=f"Layer {layer}, head {head}", font_size=font_size())
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


def overview(run) -> None:
    st.caption("Every head of every layer, pooled to small thumbnails on long inputs. Click one to open it.")
    fig = viz.overview_grid(run.attentions, run.tokens, highlight=(st.session_state.layer, st.session_state.head),
                            font_size=font_size())
    show(fig, "overview", key="overview_chart", on_select=open_from_overview, selection_mode="points")


def flow(run) -> None:
    text, text_b = st.session_state.submitted
    padded = st.checkbox(f"Trace a padded batch: this sentence and “{SHORT_SECOND}”", key="flow_padded")
    texts = (text, SHORT_SECOND) if padded else (text,)
    trace = get_trace(st.session_state.source, texts, "" if padded else text_b, st.session_state.layer)
    step = st.session_state.get("flow_step", FLOW_DEFAULT_STEP)
    if step not in trace.names:
        step = FLOW_DEFAULT_STEP
    left, right = st.columns([3, 2])
    with left:
        show(shape_flow(trace, selected=step, font_size=font_size()), "shape-flow", key="flow_chart",
             on_select=pick_step, selection_mode="points")
    with right:
        head = st.session_state.head
        matrix, rows, cols = head_matrix(trace, step, head)
        tokens = run.tokens if not padded else get_batch(st.session_state.source, texts).tokens[0]
        kind = "probs" if step in ("probs", "mask") else "values"
        fig = tensor_heatmap(matrix, axis_labels(rows, tokens, matrix.shape[0]),
                             axis_labels(cols, tokens, matrix.shape[1]),
                             title=f"{trace.step(step).title}, head {head}", font_size=font_size(), kind=kind)
        show(fig, f"tensor-{step}")
        st.caption("Click a box of the diagram to show its tensor for the selected head.")


def masks(run) -> None:
    text, text_b = st.session_state.submitted
    layer, head = st.session_state.layer, st.session_state.head
    texts = (text, text_b or SHORT_SECOND)
    batch = get_batch(st.session_state.source, texts)
    st.subheader("Padding mask of a padded batch")
    st.caption("Two sentences of different lengths in one batch: the shorter is padded, and the mask keeps "
               "every query from attending to padding.")
    show(viz.padding_mask_figure(batch.mask, batch.names, batch.tokens, font_size=font_size()), "padding-mask")
    short = int(np.argmin(batch.mask.sum(1)))
    show(viz.head_heatmap(batch.attentions[layer, short, head], batch.tokens[short],
                          title=f"{batch.names[short]} in the batch: layer {layer}, head {head}",
                          font_size=font_size()), "padded-attention")
    st.subheader("What-if: a causal mask")
    st.caption("BERT reads both directions. This runs the same weights with a causal mask, so each token sees "
               "only itself and earlier tokens — a what-if, not how the model was trained.")
    causal = get_run(st.session_state.source, text, text_b, causal=True)
    left, right = st.columns(2)
    with left:
        show(viz.causal_mask_figure(len(run.tokens), run.tokens, font_size=font_size()), "causal-mask")
    with right:
        show(viz.head_heatmap(causal.attentions[layer, head], causal.tokens,
                              title=f"What-if: causal, layer {layer}, head {head}", font_size=font_size()),
             "causal-attention")


def report_button(run, model_name: str) -> None:
    text, text_b = st.session_state.submitted
    layer, head = st.session_state.layer, st.session_state.head

    def build() -> str:
        enc = run.encoded
        figures = [
            ("Tokens", viz.token_strip(enc.tokens, enc.input_ids[0].tolist(), enc.token_type_ids[0].tolist(),
                                       enc.special)),
            (f"Layer {layer}, head {head}", viz.head_heatmap(run.attentions[layer, head], run.tokens)),
            ("All heads", viz.overview_grid(run.attentions, run.tokens, highlight=(layer, head))),
        ]
        return viz.html_report(text, text_b, model_name, figures)

    st.download_button("Download an offline HTML report", data=build, file_name="attention-report.html",
                       mime="text/html", on_click="ignore")


PRESENTATION_CSS = """<style>
section[data-testid="stSidebar"], div[data-testid="stSidebarCollapsedControl"] {display: none;}
html {font-size: 22px;}
</style>"""


def main() -> None:
    st.set_page_config(page_title="Attention visualizer", layout="wide")
    init_from_url()
    st.session_state.setdefault("source", "")
    st.session_state.setdefault("renormalize", True)
    title, switch = st.columns([3, 1])
    title.title("Attention visualizer")
    switch.toggle("Presentation mode", key="present")
    if st.session_state.present:
        st.html(PRESENTATION_CSS)
    else:
        sidebar()
    model, _ = get_model(st.session_state.source)
    input_form()
    text, text_b = st.session_state.submitted
    if not text.strip():
        st.info("Type a sentence above and press Run to see its tokens and attention.")
        return
    with st.spinner("Running the model…"):
        run = get_run(st.session_state.source, text, text_b)
    clamp_selection(run.n_layers, run.n_heads)
    for notice in st.session_state.url_notices:  # shown once, after the link was read
        st.info(notice)
    st.session_state.url_notices = []
    tokens_strip(run)
    selectors(run)
    {"Head": head_view, "Overview": overview, "Shape flow": flow, "Masks": masks}[st.session_state.view](run)
    report_button(run, model.load_report.source)
    write_url()


try:
    main()
except Exception:  # no traceback on the page; the server log keeps it
    log.exception("unexpected error while drawing the page")
    st.error("Something went wrong while drawing this view. Your sentence is kept: try another view or "
             "sentence, or reload the page.")
