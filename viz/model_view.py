"""bertviz's model view as one self-contained plotly figure: every layer × head at once, as thumbnails.

Rows are layers, columns heads; a seq2seq model's encoder, decoder and cross attention are grids one
above the other. Each map is mean-pooled to at most ``max_cells`` a side (attention.runs.pooling.pool_map) and a grid is
one heatmap trace. A sentence pair's filter ("A → B" …) is a menu in the figure: each block has its
own trace, tiles padded to the same size so the axes never move, and the menu restyles ``visible``.
"""

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._maps import colour_axis, encode, is_compact
from viz._style import SEQUENTIAL, base_layout, clean_axis
from viz._text import head_label
from viz.kind_menu import kind_items, suffix
from viz.notebook import MENU_PX, _menu, _placed
from viz.overview import GRID_PX, MAX_TILE_PX, MIN_TILE_PX
from viz.panels import Panel, chosen_layers, pair_blocks, panels

DARK = dict(paper_bgcolor="#111111", plot_bgcolor="#111111", font=dict(color="#e8e8e8"))


def model_view(
    attentions=None,
    tokens=None,
    sentence_b_start: int | None = None,
    prettify_tokens: bool = True,
    display_mode: str = "light",
    *,
    encoder_attention=None,
    decoder_attention=None,
    cross_attention=None,
    encoder_tokens=None,
    decoder_tokens=None,
    include_layers: Sequence[int] | None = None,
    include_heads: Sequence[int] | None = None,
    max_cells: int = 48,
    compact: bool | None = None,
    attention=None,
    font_size: int = 14,
    title: str | None = None,
) -> go.Figure:
    """Every head of every layer as a thumbnail; hover names the head ("L3 H1"), zoom enlarges one.

    Arguments as ``head_view``'s. ``include_layers`` and ``include_heads`` keep only those rows and
    columns. ``display_mode`` is "light" (this project's look) or "dark" (bertviz's default). Maps
    are pooled to at most ``max_cells`` per side: a thumbnail is some 40–90 px across, so at 128
    tokens its cells would be under a pixel anyway; pass ``max_cells=10**6`` to keep every cell.
    """
    attentions = attention if attentions is None else attentions
    if display_mode not in ("light", "dark"):
        raise ValueError(f'display_mode is "light" or "dark", not {display_mode!r}')
    views = panels(
        attentions,
        tokens,
        encoder_attention=encoder_attention,
        decoder_attention=decoder_attention,
        cross_attention=cross_attention,
        encoder_tokens=encoder_tokens,
        decoder_tokens=decoder_tokens,
        prettify_tokens=prettify_tokens,
    )
    layers = chosen_layers(views, include_layers)
    n_heads = max(p.n_heads for p in views)
    heads = list(range(n_heads)) if include_heads is None else [int(h) for h in include_heads]
    if not heads or any(not 0 <= h < n_heads for h in heads):
        raise ValueError(f"include_heads {heads} must name heads 0–{n_heads - 1}")
    if sentence_b_start is not None and len(views) > 1:
        raise ValueError("sentence_b_start is for one sequence's attention, not an encoder-decoder's")
    blocks = (
        pair_blocks(len(views[0].queries), sentence_b_start) if len(views) == 1 else {"All": (slice(None), slice(None))}
    )

    grids = [[_grid(p, layers, heads, rows, cols, max_cells) for rows, cols in blocks.values()] for p in views]
    compact = is_compact(sum(g.size for per_panel in grids for g in per_panel), compact)
    tile_px = float(np.clip(GRID_PX / len(heads), MIN_TILE_PX, MAX_TILE_PX))
    traces = []
    for index, (panel, per_block) in enumerate(zip(views, grids)):
        axes = dict(xaxis=f"x{suffix(index)}", yaxis=f"y{suffix(index)}")
        for number, grid in enumerate(per_block):
            traces.append(
                go.Heatmap(
                    z=encode(grid, compact), coloraxis="coloraxis", hoverinfo="skip", visible=number == 0, **axes
                )
            )
        traces.append(_tile_markers(panel, layers, heads, _cells(panel, max_cells), tile_px, axes))
    layout = _layout(views, layers, heads, max_cells, tile_px, title, font_size)
    fig = go.Figure(traces, layout)
    fig.update_layout(coloraxis=colour_axis(compact, SEQUENTIAL))
    if display_mode == "dark":
        fig.update_layout(**DARK)
    if len(blocks) > 1:
        is_map = [isinstance(t, go.Heatmap) for t in fig.data]
        items = [
            (name, [dict(visible=[not m or n == number for m, n in zip(is_map, _block_numbers(is_map))])])
            for number, name in enumerate(blocks)
        ]
        fig.update_layout(updatemenus=_placed([_menu("Sentences", items, 0)], fig.layout))
    if len(views) > 1:  # an encoder-decoder: its grids together or one alone
        kinds = _menu("Attention", kind_items(views, layout, "y"), 0, method="relayout")
        fig.update_layout(updatemenus=_placed([kinds], fig.layout))
    return fig


def _block_numbers(is_map: list[bool]) -> list[int]:
    """Each heatmap's block (its place among its panel's heatmaps); -1 for the markers."""
    numbers, count = [], 0
    for m in is_map:
        numbers.append(count if m else -1)
        count = count + 1 if m else 0
    return numbers


def _cells(panel: Panel, max_cells: int) -> tuple[int, int]:
    """A tile's rows and columns: the panel's queries and keys, at most ``max_cells`` each."""
    return min(len(panel.queries), max_cells), min(len(panel.keys), max_cells)


def _grid(panel: Panel, layers: list[int], heads: list[int], rows: slice, cols: slice, max_cells: int) -> np.ndarray:
    """One block of every chosen map, pooled, each in a tile padded with NaN to the panel's tile size,
    tiles one NaN row and column apart: layers down, heads across."""
    from attention.runs.pooling import pool_map  # here: `import viz` imports no torch

    c_q, c_k = _cells(panel, max_cells)
    tiles = np.full((len(layers), len(heads), c_q + 1, c_k + 1), np.nan, dtype=np.float32)
    for r, layer in enumerate(layers):
        if layer >= panel.n_layers:
            continue
        present = [h for h in heads if h < panel.n_heads]
        block = pool_map(panel.maps[layer][present][:, rows, cols], max_cells)  # (heads, ≤c_q, ≤c_k)
        tiles[r, : len(present), : block.shape[1], : block.shape[2]] = block
    grid = tiles.transpose(0, 2, 1, 3).reshape(len(layers) * (c_q + 1), len(heads) * (c_k + 1))
    return grid[:-1, :-1]


def _tile_markers(panel: Panel, layers, heads, cells, tile_px: float, axes: dict) -> go.Scatter:
    """Invisible squares at the tiles' centres whose hover names the head."""
    (c_q, c_k), where = cells, f"{panel.name} " if panel.name else ""
    pairs = [(r, c) for r in range(len(layers)) for c in range(len(heads))]
    return go.Scatter(
        x=[c * (c_k + 1) + (c_k - 1) / 2 for _, c in pairs],
        y=[r * (c_q + 1) + (c_q - 1) / 2 for r, _ in pairs],
        hovertext=[where + head_label(layers[r], heads[c]) for r, c in pairs],
        hovertemplate="%{hovertext}<extra></extra>",
        mode="markers",
        marker=dict(symbol="square", size=tile_px * 0.8, color="rgba(0,0,0,0)"),
        showlegend=False,
        **axes,
    )


def _layout(
    views: list[Panel], layers, heads, max_cells: int, tile_px: float, title: str | None, font_size: int
) -> dict:
    """Grids one above the other, square cells, heads labelled on top, layer 0 first."""
    heights = [len(layers) * tile_px * _cells(p, max_cells)[0] / _cells(p, max_cells)[1] for p in views]
    gap = font_size * 4 if len(views) > 1 else 0  # room for the next grid's head labels and name
    plot_h = sum(heights) + gap * (len(views) - 1)
    title_px = int(font_size * 1.2 * 1.5) + 12 if title else 0
    margin = dict(l=90, r=90, b=10, t=MENU_PX + title_px + font_size * 3)
    layout = base_layout(font_size, title)
    layout.update(margin=margin, width=int(len(heads) * tile_px) + 180, height=int(plot_h) + margin["t"] + 10)
    if title:
        layout["title"]["pad"] = dict(t=MENU_PX + 8)
    top = 1.0
    for index, (panel, height) in enumerate(zip(views, heights)):
        c_q, c_k = _cells(panel, max_cells)
        s = suffix(index)
        layout[f"xaxis{s}"] = clean_axis(
            tickmode="array",
            tickvals=[c * (c_k + 1) + (c_k - 1) / 2 for c in range(len(heads))],
            ticktext=[f"H{h}" for h in heads],
            side="top",
            range=[-0.5, len(heads) * (c_k + 1) - 1.5],
            anchor=f"y{s}",
            constrain="domain",
            title=dict(text=panel.name or None),
        )
        layout[f"yaxis{s}"] = clean_axis(
            tickmode="array",
            tickvals=[r * (c_q + 1) + (c_q - 1) / 2 for r in range(len(layers))],
            ticktext=[f"L{i}" for i in layers],
            range=[len(layers) * (c_q + 1) - 1.5, -0.5],
            domain=[max(0.0, top - height / plot_h), top],
            anchor=f"x{s}",
            scaleanchor=f"x{s}",
            scaleratio=1,
            constrain="domain",
            constraintoward="top",
        )
        top -= (height + gap) / plot_h
    return layout
