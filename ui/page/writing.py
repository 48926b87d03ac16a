"""The text a causal model is writing, above the view's figure: the prompt, then what the model wrote in the
strip's "written by the model" colours, its newest token outlined, a token picked in place of its own apart. The
text is a person's and a model's: every character is escaped into a span (never read as markup). Presentation
mode shows one line, the text's end."""

from __future__ import annotations

import html

import streamlit as st

from viz._style import HIGHLIGHT
from viz._text import SHOWN_BYTES, readable
from viz.tokens import WRITTEN

from ..state.actions import open_written
from ..state.view_context import ViewContext

NEXT_VIEW = "next"  # the Next token view's key (ui/page/registry.py): its bars' position frames the line
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
    "next": f"outline: 2px solid {HIGHLIGHT}; border-radius: 3px",  # the token that came next: the bars' red one
    "after": "opacity: 0.4",  # past the Next token view's position
}
AFTER_CHARS = 24  # presentation mode: the characters shown after the bars' position and the token that came next
ONE_LINE = "white-space: nowrap; overflow: hidden"
CAPTION = (
    "The model's writing: your text, then in green what it wrote (the newest token outlined; a token picked in "
    "place of the model's in orange; on the Next token view the token after the position outlined in red, as "
    "its bar is, and the rest faded)."
)


def segments(ctx: ViewContext, halves: list[str] | None = None, position: int | None = None) -> list[tuple[str, str]]:
    """The text as (kind, characters) segments, neighbours of one kind joined: a continuation's prompt, then each
    written token with the spaces before it, of a kind of STYLES; a typed text is all prompt. At `position` (the
    Next token view's), the token after it is also "next" (outlined as the bars' red one) and the rest "after"
    (faded), e.g. "written after": the line shows where the bars are. A written piece that is half a character
    the text has no whole character for (its "�", the pieces after it until one adds characters) is shown as its
    bytes ("<0xF0 0x9F>"), its raw piece added to `halves`."""
    found: list[tuple[str, str]] = []
    for i, kind, part in token_parts(ctx, halves):
        if position is not None and i > position:
            kind += " next" if i == position + 1 else " after"
        if found and found[-1][0] == kind:
            found[-1] = (kind, found[-1][1] + part)
        else:
            found.append((kind, part))
    return found or [("prompt", "")]


def token_parts(ctx: ViewContext, halves: list[str] | None) -> list[tuple[int, str, str]]:
    """(position, kind, characters) of every token: the characters from the previous token's end to its own (the
    last token's to the text's end), a prompt token's "prompt", a written one's "written", "picked" or "newest"."""
    written = ctx.continuation
    encoded = written.text.encoded if written is not None else ctx.run.encoded
    text = written.text.text if written is not None else ctx.sentence
    prompt_len = written.prompt_len if written is not None else len(encoded.tokens)
    prompt_end = len(written.prompt) if written is not None else len(text)
    picked = {prompt_len + k for k, _ in written.settings.picks} if written is not None else set()
    last, start, pending = len(encoded.tokens) - 1, 0, False
    parts = []
    for i, piece in enumerate(encoded.tokens):
        bound = prompt_end if i < prompt_len else len(text)
        end = bound if i in (last, prompt_len - 1) else min(max(encoded.offsets[i][1], start), bound)
        part = text[start:end]
        if i < prompt_len:
            kind = "prompt"
        else:
            kind = "newest" if i == last else "picked" if i in picked else "written"
            if encoded.byte_level and ("\ufffd" in part or (pending and not part)):
                shown_bytes = readable(piece, byte_level=True)
                pending = shown_bytes != readable(piece)  # half a character: shown as its bytes
                if pending:
                    part = shown_bytes
                    if halves is not None:
                        halves.append(piece)
            else:
                pending = False
        parts.append((i, kind, part))
        start = max(start, end)
    return parts


def framed(found: list[tuple[str, str]], present: bool) -> list[tuple[str, str]]:
    """In a presentation's one line, what is "after" the bars' position cut to AFTER_CHARS ("…" last): the line's
    end, kept by ``shown``, is the position read and the token that came next."""
    if not present or not found[-1][0].endswith(" after") or len(found[-1][1]) <= AFTER_CHARS:
        return found
    kind, rest = found[-1]
    return [*found[:-1], (kind, rest[:AFTER_CHARS].rstrip() + "…")]


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


def has_line(ctx: ViewContext) -> bool:
    """Whether the page draws the writing line: over a continuation, and in a presentation over the Next token
    view's bars before a token is written too (the sidebar, and the text typed there, are hidden)."""
    return ctx.continuation is not None or (ctx.present and ctx.view == NEXT_VIEW)


def writing(ctx: ViewContext) -> None:
    """The writing line above the view's figure, where the page has one; the Next token view draws its own, framed
    at its position (``writing_at``)."""
    if ctx.view != NEXT_VIEW:
        writing_at(ctx)


def writing_at(ctx: ViewContext, position: int | None = None) -> None:
    """The text above the figure (where ``has_line``), at `position` the token after it marked and the rest faded
    (``segments``). On the ordinary page a box of at most ORDINARY_LINES lines: a column-reverse flex box starts
    scrolled to its end, the newest token or the bars' position."""
    if not has_line(ctx):
        return
    halves: list[str] = []
    found = framed(segments(ctx, halves, position), ctx.present)
    spans = shown(found, PRESENT_CHARS if ctx.present else ORDINARY_CHARS, ctx.present)
    hover = f' title="{html.escape("Half a character, shown as its bytes: " + " ".join(halves))}"'
    titled = [hover if SHOWN_BYTES.search(html.unescape(part)) else "" for _, part in spans]
    text = "".join(
        f'<span class="{kind}" style="{"; ".join(STYLES[k] for k in kind.split())}"{title}>{part}</span>'
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
