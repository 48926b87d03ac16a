"""The page around a view, in its two layouts: the ordinary page (the sentence, the view selector and the notices
above the figure, the model and the token strip in the sidebar) and presentation mode (`?present=1`: one row of
controls, the figure on the first screen, everything else under it). app.main draws the page through one."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ..compute.models import get_seq2seq
from ..state.view_context import ViewContext
from .controls import input_form, sidebar, way_back, writer_offer
from .page import plain, selectors, tokens_strip
from .present import controls as present_controls
from .present import keys as present_keys
from .present import link_control
from .registry import by_label
from .writing import notes, writing

PRESENTATION_CSS = """<style>
section[data-testid="stSidebar"], div[data-testid="stSidebarCollapsedControl"] {display: none;}
html {font-size: 22px;}
header[data-testid="stHeader"] {display: none;}
div[data-testid="stMainBlockContainer"] {padding-top: 0.75rem;}
[data-testid="stMain"]:focus::before, [data-testid="stMain"]:focus-visible::before {box-shadow: none;}
</style>"""
# ordinary mode: the page starts just under the header (3.75 rem), not 6 rem down, so the figure comes higher
PAGE_CSS = """<style>div[data-testid="stMainBlockContainer"] {padding-top: 4rem;}</style>"""
ENCODER_CAPTION = "An encoder-decoder: this view reads its encoder's self-attention; Cross-attention shows its decoder."
SCROLL_SCRIPT = """<script>/* %d */
for (const el of [document.querySelector('[data-testid="stMain"]'), document.scrollingElement]) {
  if (el) el.scrollTo({top: 0});
}
</script>"""
NO_TEXT = "Type a sentence above and press Run to see its tokens and attention."


def reads_encoder() -> bool:
    """Whether the view shown reads an encoder-decoder's encoder (every view but Cross-attention)."""
    return get_seq2seq(st.session_state.source) is not None and by_label(st.session_state.view).key != "cross"


def special_only(run) -> None:
    if all(run.encoded.special):
        st.info(
            "The sentence has no characters the tokenizer keeps (only spaces, invisible or control "
            "characters), so only [CLS] and [SEP] remain."
        )


class Ordinary:
    """The sentence form at the top; the selectors, the token strip and the notices before the view."""

    css = PAGE_CSS

    def __init__(self) -> None:
        self.strip_place = None  # the sidebar's place for the token strip

    def chrome(self) -> None:
        """Around the page, once the model is loaded: the sidebar (the model, the examples, the strip's place)."""
        self.strip_place = sidebar()

    def form(self) -> None:
        input_form()

    def no_text(self) -> None:
        st.info(NO_TEXT)

    def above(self, ctx: ViewContext, notices: list[str]) -> None:
        run = ctx.run
        selectors(run, ctx.model.kinds)
        tokens_strip(run, ctx.present, self.strip_place, new_from(ctx))
        for notice in notices:  # shown once, after the link was read
            st.info(notice)
        writer_offer()
        way_back(ctx.key)
        special_only(run)
        if reads_encoder():
            st.caption(ENCODER_CAPTION)
        writing(ctx)

    def below(self, ctx: ViewContext, notices: list[str]) -> Any:
        notes(ctx)
        to_figure()
        return None


class Presentation:
    """One row of controls, then the figure; the notices, the keys, the link, the strip and the form under it."""

    css = PRESENTATION_CSS

    def chrome(self) -> None:
        if st.session_state.get("model_error"):  # no sidebar to say it in
            st.error(plain(st.session_state.model_error) + "  \nThe previous model stays in use.")

    def form(self) -> None:
        """The sentence form comes under the figure (`below`)."""

    def no_text(self) -> None:
        input_form()
        st.toggle("Presentation mode", key="present", persist_state="session")
        st.info(NO_TEXT)

    def above(self, ctx: ViewContext, notices: list[str]) -> None:
        special_only(ctx.run)
        present_controls(ctx.run, ctx.model.kinds)
        writing(ctx)

    def below(self, ctx: ViewContext, notices: list[str]) -> Any:
        """What is not the figure; returns the place of the page's link (present.link_control), filled once
        the page has written it."""
        if reads_encoder():
            st.caption(ENCODER_CAPTION)
        for notice in notices:  # under the figure, never over it
            st.info(notice)
        writer_offer()
        present_keys(ctx.run, ctx.model.kinds)
        link = link_control()
        tokens_strip(ctx.run, ctx.present, new_from=new_from(ctx))
        way_back(ctx.key)
        input_form()
        st.toggle("Presentation mode", key="present", persist_state="session")
        to_figure()
        return link


def to_figure() -> None:
    """After Run, Continue or Write one token (pressed under the figure in presentation mode, or on the keys'
    row), the page scrolls back to its top: the figure on the first screen, not the form pressed."""
    if not st.session_state.pop("to_figure", False):
        return
    st.session_state.scrolls = st.session_state.get("scrolls", 0) + 1  # a new script each time: it runs again
    st.html(SCROLL_SCRIPT % st.session_state.scrolls, unsafe_allow_javascript=True)


def layout() -> Ordinary | Presentation:
    """The layout the page is drawn in, its style set."""
    chosen = Presentation() if st.session_state.get("present") else Ordinary()
    st.html(chosen.css)
    return chosen


def new_from(ctx: ViewContext) -> int | None:
    """Where the model's own tokens start in the strip: a continuation's prompt length, else None."""
    return ctx.continuation.prompt_len if ctx.continuation is not None else None
