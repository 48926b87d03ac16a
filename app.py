"""Attention visualizer: type a sentence, see its WordPiece tokens and what every head attends to.

The page's outline; its parts are in ui/, the computing in attention/, the figures in viz/.

`streamlit run app.py` finds `app` below (an st.App, made only when this file is imported as a
module, not when Streamlit runs it as the page): that import starts warming the process up (torch,
the model, the default sentence; ui/preload.py) while the server starts and the first browser is
still loading the page. The page's modules are imported in `main`, after `preload` has waited for
that, so no two threads import them at once.
"""

from __future__ import annotations

import logging

import streamlit as st

from ui import preload

log = logging.getLogger("attention-app")
# imported by `streamlit run app.py`'s server; Streamlit runs the page as __main__, and a flow worker
# (ui/workers.py) imports this file as __mp_main__, multiprocessing's copy of the page: neither warms up
if __name__ not in ("__main__", "__mp_main__"):
    app = st.App(__file__)
    preload.start_warm_up()

PRESENTATION_CSS = """<style>
section[data-testid="stSidebar"], div[data-testid="stSidebarCollapsedControl"] {display: none;}
html {font-size: 22px;}
header[data-testid="stHeader"] {display: none;}
div[data-testid="stMainBlockContainer"] {padding-top: 0.75rem;}
[data-testid="stMain"]:focus::before, [data-testid="stMain"]:focus-visible::before {box-shadow: none;}
</style>"""
ENCODER_CAPTION = "An encoder-decoder: this view reads its encoder's self-attention; Cross-attention shows its decoder."
PANICKED = (
    "The model's tokenizer gave up on this text ({}). Your sentence is kept: change or shorten it, or load "
    "another model."
)
# ordinary mode: the page starts just under the header (3.75 rem), not 6 rem down, so the figure comes higher
PAGE_CSS = """<style>div[data-testid="stMainBlockContainer"] {padding-top: 4rem;}</style>"""


def main() -> None:
    st.set_page_config(page_title="Attention visualizer", layout="wide")
    warming = None
    if not preload.ready() and preload.loading_figure() is not None:  # the server is still warming up
        # a chart now lets the browser fetch and start the chart library while the model loads
        warming = st.empty()
        warming.plotly_chart(preload.loading_figure(), key="warming", config={"staticPlot": True})
    preload.preload()
    if warming is not None:
        warming.empty()
    from attention.bigrun import NeedsSmallerInput
    from ui import registry
    from ui.computations import strongest_head
    from ui.controls import input_form, sidebar, way_back
    from ui.generation import continued, views_read
    from ui.models import LOADED, get_model, get_seq2seq, model_kinds
    from ui.page import plain, report_button, selectors, start_report, tokens_strip
    from ui.present import controls as present_controls
    from ui.present import keys as present_keys
    from ui.present import link_control, show_link
    from ui.runs import get_run
    from ui.state import (
        clamp_selection,
        fit_view,
        init_from_url,
        keep_choices,
        load_pending_model,
        write_url,
    )
    from viz._style import message_figure

    preload.one_thread_per_computation()  # before any model runs; done already where the server warmed up
    init_from_url()
    keep_choices()
    start_report()  # filled by every figure, table and text shown: the report holds this run's
    present = bool(st.session_state.get("present"))
    # presentation: the figure first, the switch goes under it, the page's title goes
    st.html(PRESENTATION_CSS if present else PAGE_CSS)
    loading = st.empty()
    if st.session_state.source not in LOADED:  # the process's first page: the model loads for seconds
        # a chart now lets the browser fetch and start the chart library while the model loads
        loading.plotly_chart(message_figure("Loading the model…"), key="loading", config={"staticPlot": True})
    strip_place = None  # the sidebar's place for the token strip
    try:
        load_pending_model()
        if not st.session_state.present:
            strip_place = sidebar()
        elif st.session_state.get("model_error"):  # no sidebar to say it in
            st.error(plain(st.session_state.model_error) + "  \nThe previous model stays in use.")
        model, _ = get_model(st.session_state.source)
    finally:  # loaded, or failed: the placeholder goes either way
        loading.empty()
    if not present:
        input_form()
    text, text_b = st.session_state.submitted
    if not text.strip():
        if present:
            input_form()
            st.toggle("Presentation mode", key="present")
        st.info("Type a sentence above and press Run to see its tokens and attention.")
        return
    shown, written = continued(st.session_state.source, text, text_b)
    with views_read(shown, written):  # the views read the prompt and its continuation
        text, text_b = st.session_state.submitted
        with st.spinner("Running the model…"):
            run = get_run(st.session_state.source, text, text_b)
        clamp_selection(run.n_layers, run.n_heads)
        kinds = model_kinds(st.session_state.source)
        fit_view(kinds)  # a view not for this model (a link's, the last model's) gives way, with a notice
        view = registry.by_label(st.session_state.view)
        # a first visit without a head in the link, on a view of the sentence's own heads (Cross-attention's
        # layer and head are the decoder's)
        if st.session_state.pop("pick_head", False) and view.own_heads:
            found = strongest_head(run, text, st.session_state.get("coref_rank"))
            if found:
                st.session_state.layer, st.session_state.head, why = found
                st.session_state.url_notices.append(why)
        if not present:  # the view, layer and head under the sentence, the strip in the sidebar; the notices after them
            selectors(run, kinds)
            tokens_strip(run, strip_place)
        # shown once, after the link was read; in presentation mode under the figure, never over it
        notices, st.session_state.url_notices = st.session_state.url_notices, []
        if not present:
            for notice in notices:
                st.info(notice)
            way_back()
        if all(run.encoded.special):
            st.info(
                "The sentence has no characters the tokenizer keeps (only spaces, invisible or control "
                "characters), so only [CLS] and [SEP] remain."
            )
        if present:
            present_controls(run, kinds)
        reads_encoder = get_seq2seq(st.session_state.source) and registry.by_label(st.session_state.view).key != "cross"
        if reads_encoder and not present:  # in presentation mode it comes under the figure
            st.caption(ENCODER_CAPTION)
        try:
            view = registry.by_label(st.session_state.view)
            if view.later:  # pandas or scipy first, imported once for the process (not beside a figure being built)
                preload.later()
            view.function()(run)
        except NeedsSmallerInput as err:  # a big run's view that reads every map at once
            st.info(str(err))
        link = None
        if present:  # what is not the figure comes after it
            if reads_encoder:
                st.caption(ENCODER_CAPTION)
            for notice in notices:
                st.info(notice)
            present_keys(run, kinds)
            link = link_control()
            tokens_strip(run)
            way_back()
            input_form()
            st.toggle("Presentation mode", key="present")
        write_url()
        report_button(model.load_report.source)  # after write_url: the report's link is this page's
    if link is not None:  # the link as written just now
        show_link(link)


if __name__ == "__main__":
    with preload.page_run():  # the warm-up's last imports wait for the page runs under way (ui/preload.py)
        try:
            main()
        except Exception:  # no traceback on the page; the server log keeps it
            log.exception("unexpected error while drawing the page")
            st.error(
                "Something went wrong while drawing this view. Your sentence is kept: try another view or "
                "sentence, or reload the page."
            )
        except BaseException as err:  # a tokenizer's panic is not an Exception: uncaught, the page spun forever
            from attention.tokenizer import panicked
            from ui.page import plain

            if not panicked(err):  # Streamlit's own stop and rerun, an interrupt
                raise
            log.warning("a library panicked while drawing the page", exc_info=True)
            st.error(PANICKED.format(plain(str(err).splitlines()[0] if str(err) else type(err).__name__)))
