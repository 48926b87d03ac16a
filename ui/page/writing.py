"""The text a causal model is writing, above the view's figure: the prompt, then what the model wrote in the
strip's "written by the model" colours, its newest token outlined, a token picked in place of its own apart. The
text is a person's and a model's: every character is escaped into a span (never read as markup). Presentation
mode shows one line, the text's end."""

from __future__ import annotations

import html

import streamlit as st

from viz._text import SHOWN_BYTES, readable
from viz.tokens import WRITTEN

from ..state.actions import open_written
from ..state.view_context import ViewContext

WRITING_PX = 44  # presentation mode: the line's height and the gap under it, taken from the figure's budget
PRESENT_CHARS = 100  # presentation mode: the text's last characters shown (one line at 1280 px)
ORDINARY_CHARS = 1_500  # the ordinary page: the text's last characters shown (a long prompt's head is cut)
ORDINARY_LINES = 3  # the ordinary page: the lines of text seen at once, the rest scrolled to (the end shown)
WRITTEN_STYLE = f"color: #1a1a1a; background: {WRITTEN[0]}; border-radius: 3px"
STYLES = {  # the kinds of segment: the prompt, the model's tokens, a token picked in place of one, the newest
    "prompt": "color: #333",
    "written": WRITTEN_STYLE,
    "picked": "color: #1a1a1a; background: #fde7c8; border-radius: 3px; text-decoration: underline dotted",
    "newest": f"{WRITTEN_STYLE}; outline: 2px solid {WRITTEN[1]}",
}
ONE_LINE = "white-space: nowrap; overflow: hidden"
CAPTION = (
    "The model's writing: your text, then in green what it wrote (the newest token outlined; a token picked in "
    "place of the model's in orange)."
)


def segments(ctx: ViewContext, halves: list[str] | None = None) -> list[tuple[str, str]] | None:
    """The continuation's text as (kind, characters) segments: the prompt, then each written token with the spaces
    before it, of a kind of STYLES, neighbours of one kind joined; None where the text is not a continuation. A
    written piece that is half a character the text has no whole character for (its "�", the pieces after it
    until one adds characters) is shown as its bytes ("<0xF0 0x9F>"), its raw piece added to `halves`."""
    written = ctx.continuation
    if written is None:
        return None
    text, start = written.text.text, len(written.prompt)
    picked = {written.prompt_len + k for k, _ in written.settings.picks}
    encoded = written.text.encoded
    offsets, last, pending = encoded.offsets, len(written.ids) - 1, False
    found = [("prompt", text[:start])]
    for i in range(written.prompt_len, len(written.ids)):
        end = len(text) if i == last else min(max(offsets[i][1], start), len(text))
        kind = "newest" if i == last else "picked" if i in picked else "written"
        part, piece = text[start:end], encoded.tokens[i]
        if encoded.byte_level and ("\ufffd" in part or (pending and not part)):
            shown_bytes = readable(piece, byte_level=True)
            pending = shown_bytes != readable(piece)  # half a character: shown as its bytes
            if pending:
                part = shown_bytes
                if halves is not None:
                    halves.append(piece)
        else:
            pending = False
        if found[-1][0] == kind:
            found[-1] = (kind, found[-1][1] + part)
        else:
            found.append((kind, part))
        start = end
    return found


def shown(found: list[tuple[str, str]], limit: int, one_line: bool) -> list[tuple[str, str]]:
    """The segments cut from the front to the last `limit` characters ("…" first), each escaped; on `one_line`, a
    new line shown as ↵."""
    cut: list[tuple[str, str]] = []
    room = limit
    for kind, part in reversed(found):
        kept = part[max(len(part) - room, 0) :]
        room -= len(kept)
        cut.insert(0, (kind, kept))
    if sum(len(p) for _, p in cut) < sum(len(p) for _, p in found):
        first = next((i for i, (_, p) in enumerate(cut) if p), len(cut) - 1)
        cut[first] = (cut[first][0], "…" + cut[first][1])
    escaped = [(kind, html.escape(p)) for kind, p in cut]
    return [(kind, p.replace("\n", " ↵ ")) for kind, p in escaped] if one_line else escaped


def writing(ctx: ViewContext) -> None:
    """The continuation's text above the figure, where the text is one. On the ordinary page a box of at most
    ORDINARY_LINES lines: a column-reverse flex box starts scrolled to its end, the newest token."""
    halves: list[str] = []
    found = segments(ctx, halves)
    if found is None:
        return
    spans = shown(found, PRESENT_CHARS if ctx.present else ORDINARY_CHARS, ctx.present)
    hover = f' title="{html.escape("Half a character, shown as its bytes: " + " ".join(halves))}"'
    titled = [hover if SHOWN_BYTES.search(html.unescape(part)) else "" for _, part in spans]
    text = "".join(
        f'<span class="{kind}" style="{STYLES[kind]}"{title}>{part}</span>'
        for (kind, part), title in zip(spans, titled)
    )
    if ctx.present:
        st.html(f'<div class="writing" style="font-size: 20px; line-height: 30px; {ONE_LINE}">{text}</div>')
        return
    st.html(
        f'<div style="display: flex; flex-direction: column-reverse; overflow-y: auto; max-height: '
        f'{1.5 * ORDINARY_LINES}em; font-size: 16px"><div class="writing" style="line-height: 1.5; '
        f'white-space: pre-wrap">{text}</div></div>'
    )


def notes(ctx: ViewContext) -> None:
    """The ordinary page, under the view: what the writing's colours say and its tokens' buttons."""
    if ctx.present or ctx.continuation is None:
        return
    st.caption(CAPTION)
    written_tokens(ctx)


def written_tokens(ctx: ViewContext) -> None:
    """The tokens the model wrote, one button each (up to MAX_NEW_TOKENS): a click opens the bars that chose the
    token, where another of the candidates can be picked in its place."""
    written = ctx.continuation
    assert written is not None
    tokens, level = written.text.encoded.tokens[written.prompt_len :], written.text.encoded.byte_level
    st.pills(
        "Click a written token for the candidates it was chosen from",
        range(len(tokens)),
        key="written_token",
        format_func=lambda k: readable(tokens[k], level).strip() or readable(tokens[k], level),
        on_change=open_written,
        args=(written.prompt_len,),
    )
