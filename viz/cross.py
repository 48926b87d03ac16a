"""An encoder-decoder's maps of one part (cross-attention: decoder tokens over encoder tokens; or either
stack's self-attention), every layer and head as small multiples. One head's map is ``head_heatmap`` with
its two token lists, and the lines between the two rows ``lines_view`` with ``key_tokens``."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from viz._style import SEQUENTIAL, base_layout, clean_axis
from viz.overview import tile_maps

MIN_TILE_PX, MAX_TILE_PX = 24, 96  # a tile's longer side
LABELS_PX, COLORBAR_PX = 60, 80  # the layer labels on the left, the colour bar on the right
CELL_PX = 2.5  # a pooled cell is at least this many pixels


def part_grid(
    maps: np.ndarray,
    highlight: tuple[int, int] | None = None,
    title: str | None = None,
    *,
    font_size: int = 14,
    width: int = 900,
    max_cells: int = 32,
) -> go.Figure:
    """Every head of ``maps [n_layers, n_heads, L_query, L_key]`` (L_query need not be L_key) as a tile:
    layers are rows ("L0" ...), heads columns ("H0" ...), each map mean-pooled (attention.runs.pooling.pool_map) to at
    most ``max_cells`` a side, fewer on small tiles, its cells square. A transparent marker at each tile's centre
    carries ``customdata=[layer, head]`` for a click; ``highlight`` is outlined. Within ``width`` px. Colour
    runs from 0 to 1 whatever the maps' largest weight, so spread-out attention reads as pale.
    ``title`` is plotly markup and is not escaped."""
    from attention.runs.pooling import pool_map  # here: `import viz` imports no torch

    maps = np.asarray(maps)
    if maps.ndim != 4:
        raise ValueError(f"expected maps [n_layers, n_heads, L_query, L_key], got shape {maps.shape}")
    n_layers, n_heads = maps.shape[:2]
    tile_px = min(MAX_TILE_PX, max(MIN_TILE_PX, (width - LABELS_PX - COLORBAR_PX) / n_heads))
    pooled = pool_map(maps, max(1, min(max_cells, int(tile_px / CELL_PX)))).astype(np.float32)
    rows, cols = pooled.shape[2:]
    cell_px = tile_px / max(rows, cols)
    heatmap = go.Heatmap(
        z=tile_maps(pooled),
        colorscale=SEQUENTIAL,
        zmin=0.0,
        zmax=1.0,  # one scale for every grid: a near-uniform map stays pale, as in the head's own map
        hoverinfo="skip",
        colorbar=dict(title=dict(text="weight"), thickness=12),
    )
    layers, heads = np.meshgrid(range(n_layers), range(n_heads), indexing="ij")
    centre_x, centre_y = (cols - 1) / 2, (rows - 1) / 2
    markers = go.Scatter(
        x=(heads * (cols + 1) + centre_x).ravel(),
        y=(layers * (rows + 1) + centre_y).ravel(),
        customdata=np.stack([layers.ravel(), heads.ravel()], axis=1),
        mode="markers",
        marker=dict(size=max(6.0, tile_px * 0.8), color="rgba(0,0,0,0)", symbol="square"),
        hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<extra></extra>",
        showlegend=False,
    )
    layout = base_layout(font_size, title)
    top = layout["margin"]["t"] + 20
    title_px = len(title or "") * font_size * 1.2 * 0.6 + 40  # a narrow grid (few heads) keeps its title whole
    layout.update(
        width=int(max(LABELS_PX + n_heads * (cols + 1) * cell_px + COLORBAR_PX, min(title_px, width))),
        height=int(top + n_layers * (rows + 1) * cell_px + 40),
        margin=dict(l=10, r=10, t=top, b=10),
        xaxis=clean_axis(
            tickvals=[h * (cols + 1) + centre_x for h in range(n_heads)],
            ticktext=[f"H{h}" for h in range(n_heads)],
            side="top",
            constrain="domain",
            range=[-0.5, n_heads * (cols + 1) - 1.5],
        ),
        yaxis=clean_axis(
            tickvals=[layer * (rows + 1) + centre_y for layer in range(n_layers)],
            ticktext=[f"L{layer}" for layer in range(n_layers)],
            range=[n_layers * (rows + 1) - 1.5, -0.5],
            scaleanchor="x",
            constrain="domain",
        ),
        shapes=[_outline(highlight, rows, cols)] if highlight is not None else [],
    )
    return go.Figure([heatmap, markers], layout)


def _outline(highlight: tuple[int, int], rows: int, cols: int) -> dict:
    layer, head = highlight
    x0, y0 = head * (cols + 1) - 0.5, layer * (rows + 1) - 0.5
    return dict(type="rect", x0=x0, x1=x0 + cols, y0=y0, y1=y0 + rows, line=dict(color="#d62728", width=2))
