"""Session state: examples, the URL in and out, and the widgets' callbacks."""
from __future__ import annotations

import re

import streamlit as st

from attention import ModelLoadError

from .cache import get_model

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
VIEWS = {"head": "Head", "overview": "Overview", "flow": "Shape flow", "masks": "Masks", "coref": "Coreference",
         "stats": "Head stats", "rollout": "Rollout & flow", "qk": "Query·key", "ablation": "Ablation",
         "efficient": "GQA & fused"}
MAX_URL_TEXT = 20_000  # longer sentences are not carried in (or restored from) the URL
FLOW_DEFAULT_STEP = "probs"


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


def view_key() -> str:
    """The chosen view's short name ("head", "overview", ...), as in the URL."""
    return next(k for k, v in VIEWS.items() if v == st.session_state.view)


def write_url() -> None:
    text, text_b = st.session_state.submitted
    view = view_key()
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


def use_preset() -> None:
    text, text_b = PRESETS[st.session_state.preset]
    st.session_state.text, st.session_state.text_b = text, text_b
    st.session_state.submitted = (text, text_b)


def submit() -> None:
    st.session_state.submitted = (st.session_state.text, st.session_state.text_b.strip())


def open_head(layer: int, head: int) -> None:
    st.session_state.layer, st.session_state.head = int(layer), int(head)
    st.session_state.view = VIEWS["head"]


def open_clicked_head(chart_key: str, text: str | None = None) -> None:
    """Open the head clicked in a chart in the head view (on `text` when given)."""
    for point in st.session_state[chart_key].selection.get("points", []):
        data = point.get("customdata")
        if data is not None and len(data) >= 2:
            open_head(data[0], data[1])
            if text is not None:
                st.session_state.text, st.session_state.text_b = text, ""
                st.session_state.submitted = (text, "")
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
