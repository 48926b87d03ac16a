"""The Head view of a long text (a LongRun, attention/runs/longrun.py): the head's block map (its exact means over
blocks of rows and keys); a click or a drag on it opens the exact tile there at full resolution, with its tokens; a
query's whole row as a line over every key; a search over the tokens that jumps to a position."""

from __future__ import annotations

import numpy as np
import streamlit as st

import viz
from viz._text import numbered, readable
from viz.long import block_figure, mark_tile, row_figure

from ..compute.stores import kept
from ..page.layout import column_px, main_px
from ..page.page import font_size, plain, present_size, show
from ..state.view_context import ViewContext

BLOCKS = 128  # the block map's cells a side
SIDES = (16, 32, 64, 128)  # a tile's rows and keys: at 16 every one labelled in presentation mode, every other at 800
FOUND_MAX = 200  # the most positions a search lists
# the block map, and the tile beside it: halves on a laptop; in presentation mode's large type the tile takes
# three fifths, so that its 16 rows and keys are each labelled
SPECS = {False: [1, 1], True: [2, 3]}
FIRST_SCREEN_PX = 400  # the figures' height: under the selectors and the token strip, within 800 px


def draw(ctx: ViewContext) -> None:
    run, layer, head = ctx.run, ctx.layer, ctx.head
    L = len(run.tokens)
    spec = SPECS[ctx.present]
    left, right = st.columns(spec)  # the figures first: on the first screen, their controls under them
    side_box, row_box, col_box, find_box = st.columns([3, 2, 2, 3])
    side = min(side_box.radio("Tile size", SIDES, key="long_side", horizontal=True), L)
    first_row = row_box.number_input("First query", 0, L - side, key="long_row0", step=side // 2)
    first_col = col_box.number_input("First key", 0, L - side, key="long_col0", step=side // 2)
    query = search(find_box, run.tokens)
    st.caption(
        f"{L:,} tokens: each {L:,} × {L:,} map is made exactly, a tile at a time, and never held whole. Click the "
        "block map to open the exact tile there; find a word to draw a query's whole row."
    )
    rows, cols = range(first_row, first_row + side), range(first_col, first_col + side)
    width, tile_width = column_px(ctx.present, spec), column_px(ctx.present, spec, 1)
    height = int(min(tile_width, present_size(ctx.present).get("height", FIRST_SCREEN_PX)))
    blocks = block_map(ctx.key, layer, head, min(BLOCKS, L), _maps=run.maps)
    title = f"Layer {layer}, head {head}: block means"
    fig = mark_tile(block_figure(blocks, run.tokens, title, font_size=font_size(ctx.present), width=width,
                                 height=height), rows, cols)  # fmt: skip
    with left:
        show(fig, f"layer{layer}-head{head}-blocks", key="long_blocks", on_select=lambda: open_tile(L, side),
             selection_mode=("points", "box"))  # fmt: skip
    tile = run.maps.tile(layer, head, slice(rows.start, rows.stop), slice(cols.start, cols.stop))
    labels = [numbered(i, run.tokens[i]) for i in range(L)]
    tile_fig = viz.head_heatmap(
        tile, labels[rows.start : rows.stop], labels[cols.start : cols.stop],
        title=f"Queries {rows.start}–{rows.stop - 1} × keys {cols.start}–{cols.stop - 1}",
        font_size=font_size(ctx.present), width=tile_width, height=height,
    )  # fmt: skip
    with right:
        show(tile_fig, f"layer{layer}-head{head}-tile")
    if query is not None:
        row = run.maps.row(layer, head, query)
        show(row_figure(row, query, run.tokens, font_size=font_size(ctx.present), width=main_px(ctx.present)),
             f"layer{layer}-head{head}-row{query}")  # fmt: skip


@kept(max_entries=64)  # 64 KB each
def block_map(key, layer: int, head: int, n: int, _maps):
    """A head's (n, n) block means of the long run of `key`, kept per head (one pass of row tiles each)."""
    return _maps.blocks(layer, head, n)


def search(place, tokens: list[str]) -> int | None:
    """A search box over the text the tokens make; the position picked of the tokens where a match starts (its
    row drawn), or None."""
    found_text = place.text_input("Find in the text", key="long_find", max_chars=100, placeholder="e.g. she")
    found = found_at(tokens, found_text)
    if not found_text.strip():
        return None
    if not found:
        place.caption(f"“{plain(found_text)}” is not in the text.")
        return None
    return place.selectbox(
        f"{len(found)}{'+' if len(found) == FOUND_MAX else ''} found: a query's row", found,
        format_func=lambda i: numbered(i, tokens[i]), key="long_query",
    )  # fmt: skip


def found_at(tokens: list[str], wanted: str) -> list[int]:
    """The positions of the tokens where `wanted` (its case and outer spaces aside) starts in the text the tokens
    read as (viz._text.readable), at most FOUND_MAX."""
    wanted = wanted.strip().lower()
    if not wanted:
        return []
    pieces = [readable(t).lower() for t in tokens]
    text, starts = "".join(pieces), np.cumsum([0] + [len(p) for p in pieces[:-1]])
    found: list[int] = []
    at = text.find(wanted)
    while at >= 0 and len(found) < FOUND_MAX:
        position = int(np.searchsorted(starts, at, side="right")) - 1
        if not found or found[-1] != position:
            found.append(position)
        at = text.find(wanted, at + 1)
    return found


def open_tile(n_tokens: int, side: int) -> None:
    """A click on the block map: the tile centred on the block; a box drawn (plotly's box select): the tile at its
    corner."""
    selection = st.session_state["long_blocks"].selection
    boxes, points = selection.get("box", []), selection.get("points", [])
    if boxes:
        x, y = min(boxes[0]["x"]), min(boxes[0]["y"])
    elif points:
        x, y = points[0]["x"] - side / 2, points[0]["y"] - side / 2
    else:
        return
    top = n_tokens - side
    st.session_state.long_row0 = int(min(max(round(y), 0), top))
    st.session_state.long_col0 = int(min(max(round(x), 0), top))
