"""Attention visualizer: type a sentence, see its WordPiece tokens and what every head attends to.

The page's outline; its parts are in ui/, the computing in attention/, the figures in viz/.

`streamlit run app.py` finds `app` below (an st.App, made only when this file is imported as a
module, not when Streamlit runs it as the page): that import starts warming the process up (torch,
the model, the default sentence; ui/serve/preload.py) while the server starts and the first browser is
still loading the page. The page's modules are imported in `main`, after `preload` has waited for
that, so no two threads import them at once.
"""

from __future__ import annotations

import logging

import streamlit as st

from ui.serve import preload

log = logging.getLogger("attention-app")
# imported by `streamlit run app.py`'s server; Streamlit runs the page as __main__, and a flow worker
# (ui/compute/workers.py) imports this file as __mp_main__, multiprocessing's copy of the page: neither warms up
if __name__ not in ("__main__", "__mp_main__"):
    app = st.App(__file__)
    preload.start_warm_up()

PANICKED = (
    "The model's tokenizer gave up on this text ({}). Your sentence is kept: change or shorten it, or load "
    "another model."
)


def main() -> None:
    """The page: the model loaded, the sentence run, the view drawn in the page's layout (ui/page/outline.py)."""
    st.set_page_config(page_title="Attention visualizer", layout="wide")
    warm_up()
    from ui.compute.generation import run_key
    from ui.compute.longruns import needs_long, page_long_run
    from ui.compute.runs import get_run
    from ui.page import outline
    from ui.page.page import report_button, start_report
    from ui.page.present import show_link
    from ui.state.state import init_from_url, keep_choices, write_url
    from ui.state.view_context import drawing

    preload.one_thread_per_computation()  # before any model runs; done already where the server warmed up
    init_from_url()
    keep_choices()
    start_report()  # filled by every figure, table and text shown: the report holds this run's
    layout = outline.layout()
    model = load_model(layout)
    layout.form()
    text, text_b = st.session_state.submitted
    if not text.strip():
        layout.no_text()
        return
    key, written = run_key(st.session_state.source, text, text_b)  # the prompt and its continuation, if any
    if needs_long(key.source, key.text, key.text_b):  # one layer's maps too big to hold: made a tile at a time
        run = page_long_run(key.source, key.text, key.text_b)
        if run is None:  # refused or stopped: said on the page, the text kept
            return
    else:
        with st.spinner("Running the model…"):
            run = get_run(key.source, key.text, key.text_b)
    kinds = choose_view(run, key.text)
    notices, st.session_state.url_notices = st.session_state.url_notices, []
    with drawing(view_context(run, key, kinds, written)) as ctx:
        layout.above(ctx, notices)
        draw_view(ctx)
        link = layout.below(ctx, notices)
        write_url()
        report_button(model.load_report.source, ctx)  # after write_url: the report's link is this page's
    if link is not None:  # the link as written just now
        show_link(link)


def warm_up() -> None:
    """Wait for the process's warm-up (ui/serve/preload.py); meanwhile a chart lets the browser fetch and start the
    chart library."""
    warming = None
    if not preload.ready() and preload.loading_figure() is not None:
        warming = st.empty()
        warming.plotly_chart(preload.loading_figure(), key="warming", config={"staticPlot": True})
    preload.preload()
    if warming is not None:
        warming.empty()


def load_model(layout):
    """The model asked for (a pending choice first), with the layout's chrome; "Loading the model…" while the
    process's first model loads."""
    from ui.compute.models import LOADED, get_model
    from ui.state.actions import load_pending_model
    from viz._style import message_figure
    from viz._text import escape

    loading = st.empty()
    if st.session_state.source not in LOADED:
        name = st.session_state.source.strip()[:60] or "the bundled model"  # as typed: text, not markup
        loading.plotly_chart(message_figure(f"Loading {escape(name)}: once on this server, seconds…"), key="loading",
                             config={"staticPlot": True})  # fmt: skip
    try:
        load_pending_model()
        layout.chrome()
        return get_model(st.session_state.source)[0]
    finally:  # loaded, or failed: the placeholder goes either way
        loading.empty()


def choose_view(run, text) -> frozenset[str]:
    """The layer, head and view within what this run's model has; on a first visit without a head in the link, the
    strongest head of a view of the sentence's own heads (`text`'s: the run's, a continuation's as written; in the
    Coreference view's Suite mode, the suite's best: ui/coref/coref_pick.py). Returns what the model is (the views
    offered)."""
    from ui.compute.models import model_kinds
    from ui.coref.coref_pick import pick_head
    from ui.page import registry
    from ui.state.state import clamp_selection, fit_view

    clamp_selection(run.n_layers, run.n_heads)
    kinds = model_kinds(st.session_state.source)
    fit_view(kinds)  # a view not for this model (a link's, the last model's) gives way, with a notice
    # Cross-attention's layer and head are the decoder's: no head of the sentence's own is picked there
    asked = st.session_state.pop("pick_head", False)  # a first visit without a head in the link, a model switched
    if registry.by_label(st.session_state.view).own_heads:
        pick_head(run, text, st.session_state.source, asked)  # the sentence's strongest, or the suite's best
    return kinds


def view_context(run, key, kinds: frozenset[str], written):
    """What every view draws from (ui/state/view_context.py), read once from the page's state: the run of `key` (the
    continuation `written`, if any), the model, the selected layer and head, presentation mode, the view."""
    from ui.page import registry
    from ui.state.view_context import ModelFacts, ViewContext

    s = st.session_state
    return ViewContext(
        run=run,
        key=key,
        model=ModelFacts(kinds, run.n_layers, run.n_heads),
        layer=int(s.layer),
        head=int(s.head),
        present=bool(s.get("present")),
        target=s.get("target") or "",
        continuation=written,
        view=registry.by_label(s.view).key,
    )


def draw_view(ctx) -> None:
    from attention.runs.bigrun import NeedsSmallerInput
    from ui.page import registry

    view = registry.by_key(ctx.view) or registry.DEFAULT  # the view the context was built for
    try:
        if view.later:  # pandas or scipy first, imported once for the process (not beside a figure being built)
            preload.later()
        view.function()(ctx)
    except NeedsSmallerInput as err:  # a big run's view that reads every map at once
        st.info(str(err))


if __name__ == "__main__":
    with preload.page_run():  # the warm-up's last imports wait for the page runs under way (ui/serve/preload.py)
        try:
            main()
        except Exception:  # no traceback on the page; the server log keeps it
            log.exception("unexpected error while drawing the page")
            st.error(
                "Something went wrong while drawing this view. Your sentence is kept: try another view or "
                "sentence, or reload the page."
            )
        except BaseException as err:  # a tokenizer's panic is not an Exception: uncaught, the page spun forever
            from attention.load.tokenizer import panicked
            from ui.page.page import plain

            if not panicked(err):  # Streamlit's own stop and rerun, an interrupt
                raise
            log.warning("a library panicked while drawing the page", exc_info=True)
            st.error(PANICKED.format(plain(str(err).splitlines()[0] if str(err) else type(err).__name__)))
