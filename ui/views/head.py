"""The Head view: one head's map of the sentence, as a heatmap or as lines between the tokens, with
[CLS]/[SEP] hidden, rows renormalised or word pieces merged."""

from __future__ import annotations

import numpy as np
import streamlit as st

import viz
from attention.runs.longrun import LongRun
from attention.runs.run import head_map
from viz._text import readable
from viz.heatmap import grid_width, mark_prompt_end, mark_token
from viz.lines import TooManyLines

from ..page.layout import FIGURE_MAX_PX, ROUNDING_PX, main_px, rem_px
from ..page.page import figure_slot, font_size, kept_checkbox, plain, present_size, present_title, show
from ..state.state import DRAW_MODES
from ..state.view_context import ViewContext
from . import head_long

PANEL_REM = 14  # the room the panel of controls needs beside the map, in root font sizes (224 px, 308 presenting)


def places(ctx: ViewContext) -> tuple:
    """Where the figure and its controls go, and the figure's size. The map is drawn as large as the page lets it
    be: across the main column and as tall as the first screen allows (in presentation mode, the first screen's
    height). Its panel of controls goes beside it where the map leaves room for one (``PANEL_REM``), else in a row
    under it. So a shorter sentence's map is never smaller than a longer one's: a 16-token map had 15 px cells
    beside a column of checkboxes at 1280 × 800, while 28 tokens, drawn across the page, had 21 px. The lines come
    first, their controls under them."""
    lines = st.session_state.get("draw") == DRAW_MODES["lines"]  # drawn at its own width, wider than the column
    if lines:
        if ctx.present:
            return figure_slot(ctx.present), st.container(), present_size(ctx.present), False
        panel = st.container()
        return st.container(), panel, {"width": main_px(ctx.present)}, False
    size = present_size(ctx.present) or {"width": main_px(ctx.present), "height": FIGURE_MAX_PX}
    keys = [*ctx.run.tokens, SINK] if "sinks" in ctx.model.kinds else ctx.run.tokens
    drawn = grid_width(ctx.run.tokens, keys, font_size(ctx.present), byte_level=ctx.run.encoded.byte_level, **size)
    room = main_px(ctx.present) - rem_px(ctx.present)  # the two columns' widths, less the gap between them
    panel_px = PANEL_REM * rem_px(ctx.present)
    if drawn > room - panel_px:  # no room beside the map for its panel
        return st.container(), st.container(), size, False
    slot, panel = st.columns([room - panel_px, panel_px])  # the panel the room it needs, the map the rest
    return slot, panel, {**size, "width": room - panel_px - ROUNDING_PX}, True


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    if isinstance(run, LongRun):  # a long text: its maps made a tile at a time
        return head_long.draw(ctx)
    slot, panel, size, beside = places(ctx)
    a, b, c, d = [panel] * 4 if beside else panel.columns(4)
    specials = list(dict.fromkeys(t for t, s in zip(run.tokens, run.encoded.special) if s))
    hide = a.checkbox(  # short: the label shares a quarter of the row (it was cut at "(this model add…")
        f"Hide {'/'.join(specials)}" if specials else "Hide special tokens",
        key="hide_special",
        persist_state="session",
        disabled=not specials,
        help=None if specials else "This model adds no special tokens to the text: there are none to hide.",
    )
    renormalize = kept_checkbox(b, "Renormalise rows", "renormalize", hide, "Applies when special tokens are hidden")
    merge = c.checkbox(
        "Merge word pieces", key="merge_words", persist_state="session", help="Each word one row and one column"
    )
    mode = d.radio("Draw as", list(DRAW_MODES.values()), key="draw", persist_state="session", horizontal=True)
    layer, head = ctx.layer, ctx.head
    if mode == DRAW_MODES["heatmap"]:
        hm = head_map(run, layer, head, hide, renormalize, merge)
        matrix, keys = with_sink(hm, "sinks" in ctx.model.kinds and not hide)
        fig = viz.head_heatmap(
            matrix,
            hm.labels,
            keys,
            title=f"Layer {layer}, head {head}",
            font_size=font_size(ctx.present),
            title_size=size.get("min_label"),
            byte_level=run.encoded.byte_level,
            **size,
        )
        present_title(fig, ctx)  # one line with the sentence, for the PNG
        marked(fig, hm, run, panel)
        prompt_end(fig, hm, ctx)
        with slot:
            show(fig, f"layer{layer}-head{head}")
    else:
        heads = panel.multiselect(
            "Heads to draw",
            range(run.n_heads),
            key="line_heads",
            persist_state="session",
            format_func=lambda h: f"head {h}",
        ) or [head]
        maps = [head_map(run, layer, h, hide, renormalize, merge) for h in heads]
        try:  # each head's strongest lines, within the page's message limit (viz/lines.py)
            fig = viz.lines_view(
                np.stack([m.matrix for m in maps]),
                maps[0].labels,
                heads=[f"L{layer} H{h}" for h in heads],
                font_size=font_size(ctx.present),
                byte_level=run.encoded.byte_level,
            )
        except TooManyLines as err:
            slot.info(str(err))
            panel.caption(maps[0].note)
            return
        if ctx.present:  # the rows close up to fit the first screen
            fig.update_layout(height=min(fig.layout.height, present_size(ctx.present)["height"]))
            present_title(fig, ctx)
        with slot:
            show(fig, f"layer{layer}-lines")
        hm = maps[0]
    panel.caption(hm.note)


SINK = "∅ sink"  # the column of a learned sink: the share of each row that goes to no token


def with_sink(hm, sinks: bool) -> tuple[np.ndarray, list[str]]:
    """The map and its key labels; for a model with learned sinks (gpt-oss) one more column, each row's share
    that went to its sink and to no token (1 − the row's sum), so that every row of the figure sums to 1. Not
    where special tokens are hidden: their columns' share would read as the sink's."""
    if not sinks:
        return hm.matrix, list(hm.labels)
    share = np.clip(1.0 - hm.matrix.sum(axis=1, keepdims=True), 0.0, 1.0)  # (rows, 1)
    return np.concatenate([hm.matrix, share], axis=1), [*hm.labels, SINK]


def prompt_end(fig, hm, ctx: ViewContext) -> None:
    """A continuation's map: lines where the prompt ends and what the model wrote starts."""
    written = ctx.continuation
    row = hm.row_of(written.prompt_len) if written is not None else None
    if row is not None:
        mark_prompt_end(fig, row)


def marked(fig, hm, run, panel) -> None:
    """Outline the token a link or a click in another view marked (session_state.head_mark, a position in
    the sentence), and say which it is; a position the map does not show is said, not marked."""
    position = st.session_state.get("head_mark")
    if position is None:
        return
    if position >= len(run.tokens):
        panel.caption(f"The marked token (position {position}) is past this sentence's {len(run.tokens)} tokens.")
        return
    row = hm.row_of(position)
    if row is None:
        panel.caption(
            f"The marked token (position {position}), {plain(readable(run.tokens[position], run.encoded.byte_level))}, "
            "is hidden here."
        )
        return
    mark_token(fig, row)
    panel.caption(
        f"Outlined: {plain(hm.labels[row])} (position {position}), its row as a query and its column as a key."
    )
