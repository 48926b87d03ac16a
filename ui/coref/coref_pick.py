"""The head the page opens by itself (a first visit, a model switched): the typed sentence's strongest, or in the
Coreference view's Suite mode the suite's best, so that the notice, the Layer and Head boxes, the grid's outline,
the list of examples and the report all name one head. A head opened by the page (never one a person chose)
follows the Coreference view between its sentence and its suite; a suite not yet scored is picked from once its
scores are in."""

from __future__ import annotations

import streamlit as st

from ..compute.computations import strongest_head
from ..page.page import plain
from ..state.state import COREF_MODES, view_key
from .coref_data import chosen_suite, suite_store

Target = tuple[str, ...]  # what the page's own head was picked for: ("sentence",) or ("suite", source, suite)
PENDING: Target = ("pending",)  # a suite not scored yet: its best is picked once it is
UNSCORED: Target = ("unscored",)  # its scores not kept after all (past the store's size): not waited for again


def target(source: str) -> Target | None:
    """What the page's own head is for now: in the Coreference view's Suite mode the suite picked, with this
    model's scores; in its Minimal pairs mode nothing (its grids are the twins', not the page's head); else the
    sentence."""
    if view_key() != "coref":
        return ("sentence",)
    mode = st.session_state.get("coref_mode")
    if mode == COREF_MODES["suite"]:
        suite = chosen_suite()
        return ("suite", source, suite.cache_key) if suite is not None else None
    return ("sentence",) if mode == COREF_MODES["sentence"] else None


def stale(source: str) -> bool:
    """Whether the head shown is the page's own pick, made for other than what the Coreference view shows now.
    Only that view moves it: another view keeps the head the page opened."""
    own = st.session_state.get("own_head")  # (layer, head, target) of the page's last pick
    if own is None or view_key() != "coref" or (st.session_state.get("layer"), st.session_state.get("head")) != own[:2]:
        return False
    wanted = target(source)
    return wanted is not None and own[2] != wanted


def suite_head(source: str) -> tuple[int, int, str] | None:
    """The best head of the suite picked by its accuracy with this model, and the notice naming it; None while
    the suite is not scored."""
    suite = chosen_suite()
    result = suite_store().get((source, suite.cache_key)) if suite is not None else None
    if suite is None or result is None or result.n == 0:
        return None
    layer, head, best = result.ranked(1)[0]
    return (
        layer,
        head,
        f"Opened layer {layer}, head {head}, the best of {result.accuracy.size} heads on {plain(suite.name)}: right on "
        f"{best:.0%} of the {result.n} examples scored.",
    )


def pick_head(run, text, source: str, asked: bool) -> None:
    """Where the page opens a head itself (`asked`: a first visit without a head in the link, a model switched)
    or its own pick is stale: the suite's best in Suite mode, else the sentence's strongest (strongest_head),
    with its notice. The pick and what it was for are kept (`own_head`)."""
    if not (asked or stale(source)):
        return
    before = st.session_state.get("own_head", (0, 0, ()))[2]
    again = st.session_state.pop("notices_again", [])  # said on the run that scored, which ran again
    wanted = target(source) or ("sentence",)
    found = (
        suite_head(source) if wanted[0] == "suite" else strongest_head(run, text, st.session_state.get("coref_rank"))
    )
    notices = st.session_state.url_notices
    if found is not None:
        st.session_state.layer, st.session_state.head, why = found
        notices[:0] = again if before == PENDING else []
        notices.append(why)
    elif wanted[0] == "suite":
        wanted = UNSCORED if before in (PENDING, UNSCORED) else PENDING
        st.session_state.notices_again = list(notices) if wanted == PENDING else []
    st.session_state.own_head = (st.session_state.layer, st.session_state.head, wanted)


def picks_after_scoring(source: str) -> bool:
    """Whether the page's own head waits for the suite just scored: then the page runs again to open it (the
    Layer and Head boxes are drawn above the view)."""
    return stale(source) and st.session_state.own_head[2] == PENDING
