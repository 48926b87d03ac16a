"""All layers × heads as small thumbnails in one light, clickable figure."""

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import HIGHLIGHT, SEQUENTIAL, base_layout, clean_axis
from viz._text import escape, escape_all, head_label

MIN_TILE_PX, MAX_TILE_PX, GRID_PX = 40, 90, 960
CELL_PX, MIN_CELLS = 2.5, 4  # a pooled cell's least width, and the fewest cells a tile has
CHAR_WIDTH = 0.6  # average glyph width as a fraction of the font size
LABEL_MIN_TILE_PX = 36  # smaller tiles get no label written on them (it stays in the hover)
LABEL_MIN_PX = 8  # the smallest label written on a tile
SHORT_LABELS = {"heterogeneous": "hetero."}  # a pattern label as a tile writes it: its width is the tile's
SINK_SCALE, SINK_BAR_PX = "Oranges", 90  # the first-token share's outlines and the room its colour bar takes
ACROSS_GAIN = 1.25  # layers go across where that makes the tiles this much larger (layers_across)


def tile_maps(maps: np.ndarray) -> np.ndarray:
    """Lay ``[n_layers, n_heads, C, C]`` maps out as one 2-D array.

    Layers are bands of rows, heads bands of columns, and neighbouring
    tiles are separated by one row or column of NaN.
    """
    n_layers, n_heads, c_q, c_k = maps.shape
    padded = np.full((n_layers, n_heads, c_q + 1, c_k + 1), np.nan, dtype=maps.dtype)
    padded[:, :, :c_q, :c_k] = maps
    grid = padded.transpose(0, 2, 1, 3)  # (layers, C+1, heads, C+1)
    grid = grid.reshape(n_layers * (c_q + 1), n_heads * (c_k + 1))
    return grid[:-1, :-1]


def overview_grid(
    attentions: np.ndarray,
    tokens: Sequence[str] | None = None,
    max_cells: int = 32,
    *,
    labels: Mapping[tuple[int, int], str] | None = None,
    highlight: tuple[int, int] | None = None,
    zmax: float | None = None,
    title: str | None = None,
    font_size: int = 14,
    width: int | None = None,
    height: int | None = None,
    sinks: Mapping[str, np.ndarray] | None = None,
) -> go.Figure:
    """Thumbnails of every head of ``attentions [n_layers, n_heads, L, L]``.

    Rows are layers ("L0", "L1", ...), columns heads ("H0", ...). Each map
    is mean-pooled to at most ``max_cells`` square (see attention.runs.pooling.pool_map), fewer
    when the tiles are small (about 2.5 px a cell), and all tiles form a
    single heatmap trace. A transparent marker at each tile centre carries
    ``customdata=[layer, head]`` for click selection; its hover names the
    head and its strongest query → key pair (tokens when given, else
    positions). ``labels`` are written small on their tiles (tiles under
    LABEL_MIN_TILE_PX keep them in the hover only), ``highlight`` is
    outlined. The colour range is [0, zmax], zmax defaulting to the
    largest pooled value. ``title`` is plotly markup and is not escaped;
    tokens and labels are. With ``width`` and ``height`` (px) the tiles
    shrink to fit, and the head and layer labels are thinned to stay legible. ``sinks`` outlines each
    tile in the colour of its head's share of attention to the first token (``sink_outlines``).
    """
    attentions = np.asarray(attentions)
    if attentions.ndim != 4 or attentions.shape[2] != attentions.shape[3]:
        raise ValueError(f"expected attentions [n_layers, n_heads, L, L], got shape {attentions.shape}")
    n_layers, n_heads, n_tokens, _ = attentions.shape
    tile_px = tile_px_for(n_layers, n_heads, title, width, height, bool(sinks))
    from attention.runs.pooling import head_tiles  # here: `import viz` imports no torch

    pooled, strongest = head_tiles(attentions, min(max_cells, _cells_for(tile_px)))
    return overview_figure(
        pooled,
        strongest,
        n_tokens,
        tokens,
        labels=labels,
        highlight=highlight,
        zmax=zmax,
        title=title,
        font_size=font_size,
        width=width,
        height=height,
        sinks=sinks,
    )


def overview_figure(
    pooled: np.ndarray,
    strongest: np.ndarray,
    n_tokens: int,
    tokens: Sequence[str] | None = None,
    max_cells: int = 32,
    *,
    labels: Mapping[tuple[int, int], str] | None = None,
    highlight: tuple[int, int] | None = None,
    zmax: float | None = None,
    title: str | None = None,
    font_size: int = 14,
    width: int | None = None,
    height: int | None = None,
    sinks: Mapping[str, np.ndarray] | None = None,
) -> go.Figure:
    """The overview from what ``head_tiles`` keeps: ``pooled [n_layers, n_heads, C, C]`` maps of
    ``n_tokens`` positions and ``strongest [n_layers, n_heads, 3]``; as ``overview_grid``, whose
    figure it draws. Tiles smaller than ``C`` × 2.5 px are pooled further (a mean of block means)."""
    from attention.runs.pooling import pool_map  # here: `import viz` imports no torch

    pooled, strongest = np.asarray(pooled), np.asarray(strongest)
    if pooled.ndim != 4 or pooled.shape[2] != pooled.shape[3] or strongest.shape != (*pooled.shape[:2], 3):
        raise ValueError(
            f"expected pooled [n_layers, n_heads, C, C] and strongest [n_layers, n_heads, 3], "
            f"got {pooled.shape} and {strongest.shape}"
        )
    n_layers, n_heads = pooled.shape[:2]
    if tokens is not None and len(tokens) != n_tokens:
        raise ValueError(f"{len(tokens)} tokens given for maps over {n_tokens} positions")
    _check_heads(labels or {}, highlight, n_layers, n_heads)
    sinks = _checked_sinks(sinks or {}, n_layers, n_heads)
    tile_px = tile_px_for(n_layers, n_heads, title, width, height, bool(sinks))
    across = layers_across(n_layers, n_heads, width, height)
    pooled = pool_map(pooled, min(max_cells, _cells_for(tile_px))).astype(np.float32)  # (layers, heads, C, C)
    cells = pooled.shape[-1]
    step = cells + 1  # one tile plus its NaN gap, in data units
    centre = (cells - 1) / 2

    heatmap = go.Heatmap(
        z=tile_maps(pooled.transpose(1, 0, 2, 3) if across else pooled),  # each map still queries down, keys across
        colorscale=SEQUENTIAL,
        zmin=0.0,
        zmax=float(pooled.max()) if zmax is None else zmax,
        hoverinfo="skip",
        colorbar=dict(title=dict(text="weight"), thickness=12),
    )
    hovers = _tile_hovers(strongest, tokens, n_tokens, labels or {}, sinks)
    markers = _tile_markers(n_layers, n_heads, cells, tile_px, hovers, across)
    layout = _grid_layout(n_layers, n_heads, cells, tile_px, title, font_size, across)
    if sinks:
        sink_outlines(markers, sinks, tile_px, _place(n_layers, n_heads, across)[0])
        layout["width"] += SINK_BAR_PX
    written = labels if tile_px >= LABEL_MIN_TILE_PX else {}  # too small to write on: the hover says it
    layout.update(
        annotations=_label_annotations(written or {}, step, centre, font_size, tile_px, across),
        shapes=[_outline(highlight, step, cells, across)] if highlight is not None else [],
    )
    return go.Figure([heatmap, markers], layout)


def tile_px_for(
    n_layers: int, n_heads: int, title: str | None, width: int | None, height: int | None, sinks: bool = False
) -> float:
    """A tile's side: GRID_PX across the heads within [MIN_TILE_PX, MAX_TILE_PX], less to fit a budget (less
    SINK_BAR_PX for the first-token share's colour bar with `sinks`); the larger of the two layouts where the
    grid is laid out with layers across (`layers_across`)."""
    return _tile_px(n_layers, n_heads, title, width, height, sinks, layers_across(n_layers, n_heads, width, height))


def layers_across(n_layers: int, n_heads: int, width: int | None, height: int | None) -> bool:
    """Whether the grid goes with layers across and heads down: where a budget of both sides is given (presenting)
    and its tiles come out ACROSS_GAIN times larger so. A 30-layer × 9-head model presenting at 1280 × 720 had tiles
    of 14 px, the grid 130 px wide with two thirds of the screen empty; across, they are 35 px."""
    if width is None or height is None or n_layers <= n_heads:
        return False
    down = _tile_px(n_layers, n_heads, None, width, height, False, False)
    return _tile_px(n_layers, n_heads, None, width, height, False, True) >= ACROSS_GAIN * down


def _tile_px(
    n_layers: int, n_heads: int, title: str | None, width: int | None, height: int | None, sinks: bool, across: bool
) -> float:
    rows, cols = (n_heads, n_layers) if across else (n_layers, n_heads)
    tile_px = float(np.clip(GRID_PX / cols, MIN_TILE_PX, MAX_TILE_PX))
    if width is not None:  # a size budget (the page's column, presentation mode): the tiles shrink to fit it
        tile_px = min(tile_px, (width - 140 - (SINK_BAR_PX if sinks else 0)) / cols)
    if height is not None:
        tile_px = min(tile_px, (height - (110 if title else 70)) / rows)
    return max(tile_px, 4.0)


def _cells_for(tile_px: float) -> int:
    """Cells a side for a tile of ``tile_px``: about CELL_PX each, at least MIN_CELLS (a smaller pooled map
    is a lighter figure, and a cell narrower than a pixel or two shows nothing more)."""
    return max(MIN_CELLS, int(tile_px / CELL_PX))


def _thin(n: int, spacing_px: float, label_px: float) -> list[int]:
    """Every k-th of n positions ``spacing_px`` apart, k the least that keeps labels ``label_px`` wide apart."""
    k = max(1, int(np.ceil(label_px / max(spacing_px, 1e-9))))
    return list(range(0, n, k))


def _place(layer, head, across: bool):
    """(column, row) of a head's tile: heads across and layers down, or the other way round (`across`)."""
    return (layer, head) if across else (head, layer)


def _tile_markers(
    n_layers: int, n_heads: int, cells: int, tile_px: float, hovers: list[str], across: bool = False
) -> go.Scatter:
    """Invisible square markers at tile centres carrying ``[layer, head]``, in layer-major order."""
    step, centre = cells + 1, (cells - 1) / 2
    places = [_place(layer, head, across) for layer in range(n_layers) for head in range(n_heads)]
    return go.Scatter(
        x=[col * step + centre for col, _ in places],
        y=[row * step + centre for _, row in places],
        customdata=[[layer, head] for layer in range(n_layers) for head in range(n_heads)],  # lists for clicks
        hovertext=hovers,
        hovertemplate="%{hovertext}<extra></extra>",
        mode="markers",
        marker=dict(symbol="square", size=tile_px * 0.8, color="rgba(0,0,0,0)"),
        showlegend=False,
    )


def _grid_layout(
    n_layers: int, n_heads: int, cells: int, tile_px: float, title: str | None, font_size: int, across: bool = False
) -> dict:
    """Square tiles, heads labelled on top and layers down the side (or layers on top and heads down the side,
    `across`), layer 0 and head 0 first."""
    step, centre = cells + 1, (cells - 1) / 2
    n_cols, n_rows = _place(n_layers, n_heads, across)
    col_word, row_word = ("L", "H") if across else ("H", "L")
    cols = _thin(n_cols, tile_px, len(f"{col_word}{n_cols - 1}") * font_size * CHAR_WIDTH + 6)
    rows = _thin(n_rows, tile_px, font_size * 1.3)
    layout = base_layout(font_size, title)
    layout.update(
        width=int(n_cols * tile_px + 140),
        height=int(n_rows * tile_px + (110 if title else 70)),
        clickmode="event+select",
        xaxis=clean_axis(
            tickmode="array",
            tickvals=[c * step + centre for c in cols],
            ticktext=[f"{col_word}{c}" for c in cols],
            side="top",
            range=[-1.5, n_cols * step - 0.5],
            constrain="domain",
        ),
        yaxis=clean_axis(
            tickmode="array",
            tickvals=[r * step + centre for r in rows],
            ticktext=[f"{row_word}{r}" for r in rows],
            range=[n_rows * step - 0.5, -1.5],  # reversed: the first on top
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
        ),
    )
    return layout


def _check_heads(labels, highlight, n_layers: int, n_heads: int) -> None:
    for layer, head in [*labels, *([highlight] if highlight is not None else [])]:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head ({layer}, {head}) is outside {n_layers} layers × {n_heads} heads")


def _tile_hovers(strongest: np.ndarray, tokens, n_tokens: int, labels, sinks) -> list[str]:
    """One hover text per head, in layer-major order, from each head's [query, key, weight]."""
    n_layers, n_heads, _ = strongest.shape
    names = escape_all(tokens) if tokens is not None else [str(i) for i in range(n_tokens)]
    hovers = []
    for index, (query, key, weight) in enumerate(strongest.reshape(n_layers * n_heads, 3)):
        layer, head = divmod(index, n_heads)
        text = f"{head_label(layer, head)}<br>max {names[int(query)]} → {names[int(key)]}: {weight:.3f}"
        if (layer, head) in labels:
            text += f"<br>{escape(labels[layer, head])}"
        if sinks:
            text += "<br>to the first token: " + ", ".join(f"{v[layer, head]:.3f} {k}" for k, v in sinks.items())
        hovers.append(text)
    return hovers


def _label_annotations(
    labels, step: int, centre: float, font_size: int, tile_px: float, across: bool = False
) -> list[dict]:
    """Each label written at the top of its tile, within the tile's width: "heterogeneous" as "hetero." (the hover
    names it whole), and the text smaller where the longest would still run into the next tile."""
    shown = {head: SHORT_LABELS.get(text, text) for head, text in labels.items()}
    longest = max((len(text) for text in shown.values()), default=1)
    size = max(LABEL_MIN_PX, min(round(font_size * 0.7), int((tile_px - 6) / (longest * CHAR_WIDTH))))
    return [
        dict(
            x=_place(layer, head, across)[0] * step + centre,
            y=_place(layer, head, across)[1] * step - 0.5,  # top edge of the tile
            xref="x",
            yref="y",
            yanchor="top",
            text=escape(text),
            showarrow=False,
            font=dict(size=size),
            bgcolor="rgba(255,255,255,0.75)",
            borderpad=0,
        )
        for (layer, head), text in shown.items()
    ]


def _outline(highlight: tuple[int, int], step: int, cells: int, across: bool = False) -> dict:
    """Rectangle around one tile, drawn in the middle of the NaN gaps."""
    col, row = _place(*highlight, across)
    return dict(
        type="rect",
        xref="x",
        yref="y",
        x0=col * step - 1,
        x1=col * step + cells,
        y0=row * step - 1,
        y1=row * step + cells,
        line=dict(color=HIGHLIGHT, width=3),
    )


def _checked_sinks(sinks: Mapping[str, np.ndarray], n_layers: int, n_heads: int) -> dict[str, np.ndarray]:
    checked = {str(name): np.asarray(shares, dtype=np.float64) for name, shares in sinks.items()}
    for name, shares in checked.items():
        if shares.shape != (n_layers, n_heads):
            raise ValueError(f"sink shares {name!r} must be ({n_layers}, {n_heads}), one a head; got {shares.shape}")
    return checked


def sink_outlines(markers: go.Scatter, sinks: Mapping[str, np.ndarray], tile_px: float, n_cols: int) -> None:
    """Outline each tile in the colour of its head's share of attention to the first token: the first of `sinks`
    ({name: (n_layers, H)}, e.g. "value-weighted" before "raw"), on a 0 to 1 scale (SINK_SCALE) with its colour
    bar beside the grid's `n_cols` tiles; the tiles' markers (_tile_markers, layer-major) become open squares just
    inside each tile."""
    name, shares = next(iter(sinks.items()))
    markers.marker = dict(
        symbol="square-open",
        size=tile_px * 0.9,
        color=np.asarray(shares, dtype=np.float64).reshape(-1).tolist(),
        colorscale=SINK_SCALE,
        cmin=0.0,
        cmax=1.0,
        line=dict(width=max(1.5, tile_px * 0.08)),
        colorbar=dict(  # beside the maps' own colour bar, SINK_BAR_PX to its right
            title=dict(text=f"to the first<br>token, {escape(name)}"),
            thickness=12,
            x=1.02 + SINK_BAR_PX / (n_cols * tile_px),
            xanchor="left",
        ),
    )
