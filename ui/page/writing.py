"""The text a causal model is writing, above the view's figure: the prompt, then what the model wrote in the
strip's "written by the model" colours, its newest token outlined. The text is a person's and a model's: every
character is escaped into a span (never read as markup). Presentation mode shows one line, the text's end."""

from __future__ import annotations

import html

import streamlit as st

from viz._text import readable
from viz.tokens import WRITTEN

from ..state.actions import open_written
from ..state.view_context import ViewContext

WRITING_PX = 44  # presentation mode: the line's height and the gap under it, taken from the figure's budget
PRESENT_CHARS = 100  # presentation mode: the text's last characters shown (one line at 1280 px)
ORDINARY_CHARS = 1_500  # the ordinary page: the text's last characters shown (a long prompt's head is cut)
PROMPT_STYLE = "color: #333"
WRITTEN_STYLE = f"color: #1a1a1a; background: {WRITTEN[0]}; border-radius: 3px"
NEWEST_STYLE = f"{WRITTEN_STYLE}; outline: 2px solid {WRITTEN[1]}"
CAPTION = "The model's writing: your text, then in green what it wrote (the newest token outlined)."


def parts(ctx: ViewContext) -> tuple[str, str, str] | None:
    """The continuation's text in three: the prompt, what the model wrote before its newest token, and the newest
    token (with the spaces before it); None where the text is not a continuation."""
    written = ctx.continuation
    if written is None:
        return None
    text, cut = written.text.text, len(written.prompt)
    offsets = written.text.encoded.offsets
    newest = offsets[-1][0] if len(written.ids) > written.prompt_len and offsets else len(text)
    newest = min(max(newest, cut), len(text))
    start = max(cut, _end_before(offsets, written.prompt_len, newest))
    return text[:cut], text[cut:start], text[start:]


def _end_before(offsets, first_new: int, newest: int) -> int:
    """Where the token before the newest ends (its spaces go with the newest), at least the prompt's end."""
    ends = [end for _, end in offsets[first_new:-1] if end <= newest]
    return max(ends, default=0)


def shown(parts: tuple[str, str, str], limit: int, one_line: bool) -> list[str]:
    """The three parts cut from the front to the last `limit` characters ("…" first), each escaped; on
    `one_line`, a new line shown as ↵."""
    cut: list[str] = []
    room = limit
    for part in reversed(parts):
        kept = part[max(len(part) - room, 0) :]
        room -= len(kept)
        cut.insert(0, kept)
    if sum(map(len, cut)) < sum(map(len, parts)):
        first = next((i for i, p in enumerate(cut) if p), 2)
        cut[first] = "…" + cut[first]
    escaped = [html.escape(p) for p in cut]
    return [p.replace("\n", " ↵ ") for p in escaped] if one_line else escaped


def writing(ctx: ViewContext) -> None:
    """The continuation's text above the figure, where the text is one."""
    found = parts(ctx)
    if found is None:
        return
    prompt, before, newest = shown(found, PRESENT_CHARS if ctx.present else ORDINARY_CHARS, ctx.present)
    lines = "white-space: nowrap; overflow: hidden" if ctx.present else "white-space: pre-wrap"
    size = "font-size: 20px; line-height: 30px" if ctx.present else "font-size: 16px; line-height: 1.5"
    st.html(
        f'<div class="writing" style="{size}; {lines}">'
        f'<span class="prompt" style="{PROMPT_STYLE}">{prompt}</span>'
        f'<span class="written" style="{WRITTEN_STYLE}">{before}</span>'
        f'<span class="newest" style="{NEWEST_STYLE}">{newest}</span></div>'
    )
    if not ctx.present:
        st.caption(CAPTION)
        written_tokens(ctx)


def written_tokens(ctx: ViewContext) -> None:
    """The tokens the model wrote, one button each (up to MAX_NEW_TOKENS): a click opens the bars that chose the
    token, where another of the candidates can be picked in its place."""
    written = ctx.continuation
    assert written is not None
    tokens = written.text.encoded.tokens[written.prompt_len :]
    st.pills(
        "Click a written token for the candidates it was chosen from",
        range(len(tokens)),
        key="written_token",
        format_func=lambda k: readable(tokens[k]).strip() or readable(tokens[k]),
        on_change=open_written,
        args=(written.prompt_len,),
    )
