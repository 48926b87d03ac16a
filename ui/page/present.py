"""Presentation mode (``?present=1``): one compact row of controls, the figure sized to the first
screen of a 1280 × 720 window, and keys to step through heads, layers and views without a mouse."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from urllib.parse import urlencode, urlsplit, urlunsplit

import streamlit as st

from ..state.actions import write_one
from ..state.state import offered
from ..state.view_context import drawn
from . import registry
from .writing import WRITING_PX, has_line

SCREEN_PX = 720  # the height of the smallest window a presentation is laid out for
TOP_PX = 100  # the page's top padding and the row of controls above the figure
BOTTOM_PX = 12  # slack under the figure
MIN_PRESENT_LABEL_PX = 18  # the smallest tick label a room can read: fewer labels rather than smaller
# (label, shortcut as Streamlit reads it, as shown in the legend): the guided walk's own Left/Right stay free
KEYS = {
    "prev_head": ("Previous head", "Shift+Left", "Shift+←"),
    "next_head": ("Next head", "Shift+Right", "Shift+→"),
    "prev_layer": ("Previous layer", "Shift+Up", "Shift+↑"),
    "next_layer": ("Next layer", "Shift+Down", "Shift+↓"),
    "next_view": ("Next view", "V", "V"),
    "write_one": ("Write one token", "W", "W"),
}
# a view's own keys, Left and Right, on its own buttons: view key → (what they step, previous and next button)
VIEW_KEYS = {
    "shapeflow": ("stage", "shapeflow_prev_stage", "shapeflow_next_stage"),
    "walk": ("step", "walk_prev", "walk_next"),
    "next": ("position", "next_prev_position", "next_next_position"),
}
# the key as the page's script names it (KeyboardEvent.key, "Shift+" when held) → the buttons it clicks, the
# first on the page
PAGE_KEYS = {
    "Shift+ArrowLeft": ["present_prev_head"],
    "Shift+ArrowRight": ["present_next_head"],
    "Shift+ArrowUp": ["present_prev_layer"],
    "Shift+ArrowDown": ["present_next_layer"],
    "v": ["present_next_view"],
    "w": ["present_write_one"],
    "ArrowLeft": [prev for _, prev, _ in VIEW_KEYS.values()],
    "ArrowRight": [ahead for _, _, ahead in VIEW_KEYS.values()],
}
# Streamlit's own shortcuts are not heard while a checkbox, radio, select box or button has the focus (and
# an arrow key then moves a radio), which is the focus a mouse leaves behind. This script, run once in the
# page, hears the keys first, wherever the focus is, except in a text box or an open dropdown's search,
# and clicks the key's button (its `st-key-<key>` class) instead of letting the key reach the widget.
KEYS_SCRIPT = (
    "<script>\nwindow.presentButtons = "
    + json.dumps(PAGE_KEYS)
    + """;
(() => {
  if (window.presentKeys) return;
  window.presentKeys = true;
  const buttons = window.presentButtons;
  const typing = (el) => !!el && (el.tagName === "TEXTAREA" || el.isContentEditable || (el.tagName === "INPUT"
    && (el.getAttribute("role") === "combobox" ? el.getAttribute("aria-expanded") === "true"
        : !["checkbox", "radio", "button", "range", "submit"].includes(el.type))));
  window.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.altKey || event.metaKey || typing(event.target)) return;
    if (!document.querySelector(".st-key-present_next_view")) return;  // not in presentation mode
    const key = event.key.length === 1 ? event.key.toLowerCase() : (event.shiftKey ? "Shift+" : "") + event.key;
    const button = (buttons[key] || []).map((name) => document.querySelector(".st-key-" + name + " button"))
      .find(Boolean);
    if (!button) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    if (!button.disabled) button.click();
  }, true);
})();
</script>"""
)
COPY_BUTTON = """<button class="copy-link" type="button" style="font: inherit; font-size: 16px; padding: 6px 14px;
  border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 8px; background: white; cursor: pointer">
  Copy link to this view</button>
<span class="copy-done" role="status" style="font-size: 15px; color: #1b7f3b; margin-left: 8px"></span>
<script>
(() => {
  const button = [...document.querySelectorAll("button.copy-link")].pop();
  const done = button.parentElement.querySelector(".copy-done");
  const fallback = (text) => {  // a page not served over https or from this machine has no clipboard API
    const box = Object.assign(document.createElement("textarea"), {value: text});
    document.body.appendChild(box);
    box.select();
    const ok = document.execCommand("copy");
    box.remove();
    return ok ? Promise.resolve() : Promise.reject();
  };
  button.addEventListener("click", () => {
    const link = location.href;
    (navigator.clipboard ? navigator.clipboard.writeText(link) : fallback(link)).catch(() => fallback(link))
      .then(() => { done.textContent = "Copied: the link is on the clipboard"; },
            () => { done.textContent = "Could not copy: select the link beside and copy it"; });
  });
})();
</script>"""
WORDS = {
    "prev_head": "Head",
    "next_head": "Head",
    "prev_layer": "Layer",
    "next_layer": "Layer",
    "next_view": "View",
    "write_one": "Write",
}  # one word: each button also shows its key ("Shift + ←"), which says which way (an arrow icon more cut it: "← …")
SHIFTED, PLAIN = 1.12, 0.76  # a button's share of the row: a key with Shift ("Shift + ←") shows wider than V or W


def figure_height(used: int = 0) -> int:
    """Height left for the view's main figure on the first screen, less ``used`` px above it and the line of a
    continuation's text (ui/page/writing.py) where the page draws one."""
    ctx = drawn()
    writes = ctx is not None and ctx.present and has_line(ctx)
    return SCREEN_PX - TOP_PX - BOTTOM_PX - used - (WRITING_PX if writes else 0)


def step_head(delta: int, n_heads: int) -> None:
    st.session_state.head = (st.session_state.head + delta) % n_heads


def step_layer(delta: int, n_layers: int) -> None:
    st.session_state.layer = (st.session_state.layer + delta) % n_layers


def next_view(kinds: Collection[str]) -> None:
    """The next of the views for a model of these `kinds`."""
    st.session_state.view = registry.following(st.session_state.get("view"), kinds)


def controls(run, kinds: Collection[str]) -> None:
    """The view (of those for a model of these `kinds`), layer and head in one row above the figure."""
    view, layer, head, keys_legend = st.columns([2.2, 1.3, 1.3, 2.2], vertical_alignment="center")
    layers, heads = offered(run.n_layers, run.n_heads)
    view.selectbox("View", registry.labels(kinds), key="view", persist_state="session", label_visibility="collapsed")
    with keys_legend:
        legend("causal" in kinds)
    if not registry.by_label(st.session_state.get("view")).picks_head:  # the boxes would change nothing here
        return
    layer.selectbox(
        "Layer",
        range(layers),
        key="layer",
        persist_state="session",
        label_visibility="collapsed",
        format_func=lambda i: f"Layer {i}",
    )
    head.selectbox(
        "Head",
        range(heads),
        key="head",
        persist_state="session",
        label_visibility="collapsed",
        format_func=lambda i: f"Head {i}",
    )


def keys(run, kinds: Collection[str]) -> None:
    """Under the figure, a button for each step, each on its key; the buttons name their keys. V steps through
    the views for a model of these `kinds`; W writes one token (ui/state/actions.py's write_one)."""
    layers, heads = offered(run.n_layers, run.n_heads)
    actions: dict[str, tuple[Callable[..., None], tuple]] = {
        "prev_head": (step_head, (-1, heads)),
        "next_head": (step_head, (1, heads)),
        "prev_layer": (step_layer, (-1, layers)),
        "next_layer": (step_layer, (1, layers)),
        "next_view": (next_view, (kinds,)),
        "write_one": (write_one, ()),  # a model that only reads says so
    }
    widths = [SHIFTED if KEYS[name][1].startswith("Shift") else PLAIN for name in actions]
    for col, (name, (action, args)) in zip(st.columns(widths), actions.items()):
        label, shortcut, shown = KEYS[name]
        col.button(
            WORDS[name],
            key=f"present_{name}",
            help=f"{label}: {shown}",
            on_click=action,
            args=args,
            shortcut=shortcut,
            width="stretch",
        )


def legend(writes: bool) -> None:
    """The keys, small beside the controls: two lines no taller than a select box. The view's own ← / →
    (the shape flow's stages, the walk's steps, the next token's positions) are named on the second line when
    it has them, and W where the model `writes`."""
    shown = {name: KEYS[name][2] for name in KEYS}
    own = VIEW_KEYS.get(registry.by_label(st.session_state.get("view")).key)
    ahead = f"<b>← / →</b> {own[0]} · " if own else ""
    st.html(
        '<div class="present-keys" style="font-size: 14px; line-height: 1.35; color: #555">'
        f"Keys: <b>{shown['prev_head']}</b> / <b>{shown['next_head']}</b> head · "
        f"<b>{shown['prev_layer']}</b> / <b>{shown['next_layer']}</b> layer<br>"
        f"{ahead}<b>{shown['next_view']}</b> next view"
        + (f" · <b>{shown['write_one']}</b> write a token" if writes else "")
        + ("" if own or writes else " (or the buttons under the figure)")
        + "</div>"
        + KEYS_SCRIPT,
        unsafe_allow_javascript=True,
    )


def link_control():
    """Under the keys, a place for the button that copies this page's link in one click; fill it with
    ``show_link`` once the page's address is written (``ui.state.state.write_url``)."""
    return st.container()


def page_link() -> str:
    """This page's address as the browser has it after this run: the app's URL (``st.context.url``,
    without its query) and the query parameters that name the view, layer, head and sentence."""
    base = urlsplit(st.context.url or "")
    address = urlunsplit((base.scheme, base.netloc, base.path or ("/" if base.netloc else ""), "", ""))
    return f"{address}?{urlencode(st.query_params.to_dict())}"


def show_link(control) -> None:
    """The copy button (it copies the address bar's link, as the app has just written it, and says so)
    and the same link as text."""
    with control:
        button, text = st.columns([1, 2], vertical_alignment="center")
        with button:
            st.html(COPY_BUTTON, unsafe_allow_javascript=True)
        with text:
            st.code(page_link(), language=None, wrap_lines=True)
