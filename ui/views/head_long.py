"""The Head view of a long text (a LongRun, attention/runs/longrun.py): the head's block map (its exact means over
blocks of rows and keys); a click or a drag on it opens the exact tile there at full resolution, with its tokens; a
query's whole row as a line over every key; a search over the tokens that jumps to a position."""

from __future__ import annotations

import contextlib

import numpy as np
import streamlit as st

import viz
from viz._text import escape, numbered, readable
from viz.heatmap import grid_cell_px
from viz.long import block_figure, mark_tile, row_figure

from ..compute.stores import kept
from ..page.layout import column_px, main_px
from ..page.page import font_size, plain, present_size, show
from ..state.view_context import ViewContext

BLOCKS = 128  # the block map's cells a side
SIDES = (16, 32, 64, 128)  # a tile's rows and keys: at 16 every one labelled
FOUND_MAX = 200  # the most positions a search lists
TILE_LABEL_EM = 1.15  # a 16-token tile's cells: at least this many font sizes tall, every token labelled readably
FIRST_SCREEN_PX = 430  # the figures' height: under the selectors and the token strip, within 800 px


def draw(ctx: ViewContext) -> None:
    run, layer, head = ctx.run, ctx.layer, ctx.head
    L = len(run.tokens)
    spec = widths(run.tokens, font_size(ctx.present), ctx.present)
    left, right = st.columns(spec)  # the figures first: on the first screen, their controls under them
    side_box, row_box, col_box, find_box = st.columns([3, 2, 2, 3])
    side = min(side_box.radio("Tile size", SIDES, key="long_side", horizontal=True), L)
    first_row = row_box.number_input("First query", 0, L - side, key="long_row0", step=side // 2)
    first_col = col_box.number_input("First key", 0, L - side, key="long_col0", step=side // 2)
    query = search(find_box, run.tokens, L, side, ctx.model.causal)
    st.caption(
        f"{L:,} tokens: each {L:,} × {L:,} map is made exactly, a tile at a time, and never held whole. Click the "
        "block map to open the exact tile there; find a word to draw a query's row." + again_note(run.maps)
    )
    rows, cols = range(first_row, first_row + side), range(first_col, first_col + side)
    width, tile_width = column_px(ctx.present, spec), column_px(ctx.present, spec, 1)
    height = int(present_size(ctx.present).get("height", FIRST_SCREEN_PX))
    with made_again(run.maps, layer):
        blocks = block_map(ctx.key, layer, head, min(BLOCKS, L), _maps=run.maps)
    title = f"Layer {layer}, head {head}: block means"
    fig = mark_tile(block_figure(blocks, run.tokens, title, font_size=font_size(ctx.present), width=width,
                                 height=height), rows, cols)  # fmt: skip
    with left:
        show(fig, f"layer{layer}-head{head}-blocks", key="long_blocks", on_select=lambda: open_tile(L, side),
             selection_mode=("points", "box"))  # fmt: skip
    tile = run.maps.tile(layer, head, slice(rows.start, rows.stop), slice(cols.start, cols.stop))
    tile_fig = viz.head_heatmap(
        tile, run.tokens[rows.start : rows.stop], run.tokens[cols.start : cols.stop],
        title=f"Queries {rows.start}–{rows.stop - 1} × keys {cols.start}–{cols.stop - 1}",
        font_size=font_size(ctx.present), width=tile_width, height=height, byte_level=run.encoded.byte_level,
    )  # fmt: skip
    with right:
        show(tile_fig, f"layer{layer}-head{head}-tile")
    if query is not None:
        row = run.maps.row(layer, head, query)
        show(row_figure(row, query, run.tokens, causal=ctx.model.causal, font_size=font_size(ctx.present),
                        width=main_px(ctx.present)), f"layer{layer}-head{head}-row{query}")  # fmt: skip


def widths(tokens: list[str], font: int, present: bool) -> list[int]:
    """The two columns' widths in px: the tile's, the least in which 16 of the text's tokens are each labelled
    (the longest of them at the font), the block map's the rest of the page."""
    main = column_px(present, 1)
    longest = max(tokens, key=lambda t: len(readable(t)), default="")
    labels = [escape(readable(longest))] * 16
    tile = next(
        (w for w in range(200, main, 8) if grid_cell_px(labels, labels, font, w) >= TILE_LABEL_EM * font), main // 2
    )
    tile = min(tile, main * 3 // 5)  # a text with a very long piece: that one's label may be thinned
    return [main - tile, tile]


def again_note(maps) -> str:
    """What a layer made again costs, where the run keeps layer inputs (attention/long_maps.py's `every`)."""
    every = maps.keep.every if maps.keep is not None else None
    if not every:
        return ""
    nth = {1: "", 2: "2nd ", 3: "3rd "}.get(every, f"{every}th ")
    return (f" This run keeps every {nth}layer's input, not every layer's queries and keys: opening a layer "
            f"outside the last {every} made runs up to {every} layers again first.")  # fmt: skip


@contextlib.contextmanager
def made_again(maps, layer: int):
    """A spinner while `layer`'s queries and keys are made again from a kept layer input."""
    if not maps.made_again(layer):
        yield
        return
    with st.spinner(f"Making layer {layer}'s queries and keys again from the layer input kept before it…"):
        yield


@kept(max_entries=64)  # 64 KB each
def block_map(key, layer: int, head: int, n: int, _maps):
    """A head's (n, n) block means of the long run of `key`, kept per head (one pass of row tiles each)."""
    return _maps.blocks(layer, head, n)


def search(place, tokens: list[str], n_tokens: int, side: int, causal: bool) -> int | None:
    """A search box over the text the tokens make; the position picked of the tokens where a match starts (its
    row drawn, the tile moved to it), or None."""
    found_text = place.text_input("Find in the text", key="long_find", max_chars=100, placeholder="e.g. she",
                                  on_change=lambda: to_found(tokens, n_tokens, side, causal))  # fmt: skip
    found = found_at(tokens, found_text)
    if not found_text.strip():
        return None
    if not found:
        place.caption(f"“{plain(found_text)}” is not in the text.")
        return None
    return place.selectbox(
        f"{len(found)}{'+' if len(found) == FOUND_MAX else ''} found: a query's row", found,
        format_func=lambda i: numbered(i, tokens[i]), key="long_query",
        on_change=lambda: move_tile(st.session_state.long_query, n_tokens, side, causal),
    )  # fmt: skip


def to_found(tokens: list[str], n_tokens: int, side: int, causal: bool) -> None:
    """A word typed in the search box: the tile moved to its first match."""
    found = found_at(tokens, st.session_state.get("long_find", ""))
    if found:
        st.session_state.pop("long_query", None)  # the list starts again at the first match
        move_tile(found[0], n_tokens, side, causal)


def move_tile(query: int, n_tokens: int, side: int, causal: bool) -> None:
    """The tile placed on `query`'s row, midway down, over the keys beside it (on a causal model, those up to
    the query itself)."""
    place_tile(query - side // 2, query - side + 1 if causal else query - side // 2, n_tokens, side)


def place_tile(row: float, col: float, n_tokens: int, side: int) -> None:
    """The tile's first query and key at `row` and `col`, rounded and kept within the text."""
    top = n_tokens - side
    st.session_state.long_row0 = int(min(max(round(row), 0), top))
    st.session_state.long_col0 = int(min(max(round(col), 0), top))


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
    place_tile(y, x, n_tokens, side)
