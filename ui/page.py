"""What every view's page shares: figures with their download, text as typed, sizes for presentation
mode, the token strip, the view/layer/head selectors and the report of the view in use."""
from __future__ import annotations

import html
import re

import streamlit as st

import viz
from attention.bigrun import NeedsSmallerInput, is_big
from viz._style import one_line_title, title_layout
from viz.tokens import COMPACT_ABOVE

from . import registry
from .layout import expander_px, main_px
from .models import get_model
from .present import MIN_PRESENT_LABEL_PX, figure_height
from .state import current_choices, view_key


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


def figure_slot():
    """Presentation mode: a place for the view's figure above its controls (drawn after them)."""
    return st.container() if st.session_state.get("present") else None


def present_size() -> dict:
    """The figure's size budget in presentation mode (the first screen); nothing otherwise."""
    if not st.session_state.get("present"):
        return {}
    return {"width": main_px(), "height": figure_height(), "min_label": MIN_PRESENT_LABEL_PX}


def present_title(fig, layer: int, head: int) -> None:
    """Presentation: the figure's title becomes one compact line, "L2 H3 · " and the sentence cut to the
    figure's width, so a PNG from the camera icon says what it shows. A figure drawn with a title keeps
    the room its layout made for it (within its first-screen budget); one drawn without gets room above."""
    if not st.session_state.get("present"):
        return
    if not (fig.layout.title and fig.layout.title.text):
        fig.update_layout(title=title_layout(".", font_size()))
    width = fig.layout.width or main_px()
    fig.layout.title.update(x=0, xref="container", pad={"l": 8})  # from the figure's left edge, not the plot's
    fig.layout.title.text = one_line_title(f"L{layer} H{head} · ", st.session_state.submitted[0], width,
                                           fig.layout.title.font.size or round(font_size() * 1.2))


def progress_bar(label: str):
    """A progress bar and the callback that moves it: fraction, optional text."""
    bar = st.progress(0.0, text=label)

    def update(fraction: float, text: str | None = None) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=text or label)

    return bar, update


def too_big_for_batch(run) -> bool:
    """For a big model's run, say that the padded batch (which keeps every map of two sentences) needs a
    shorter input, and return True; False for an ordinary run."""
    if not is_big(run):
        return False
    st.info(str(NeedsSmallerInput(run.n_layers, run.n_heads, len(run.tokens))).replace(
        "This view needs", "The padded batch needs") + " The rest of this view reads one layer.")
    return True


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
    st.segmented_control("View", registry.labels(), key="view", required=True)
    left, right, _ = st.columns([1, 1, 4])
    left.selectbox("Layer", range(run.n_layers), key="layer")
    right.selectbox("Head", range(run.n_heads), key="head")


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
