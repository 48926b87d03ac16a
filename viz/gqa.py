"""Grouped-query attention figures: how sharing key/value heads moves each head's map, and a checkpoint's
own groups (its query heads by the key/value head they read, and how far apart the heads' maps are)."""

import textwrap

import numpy as np
import plotly.graph_objects as go

from viz._style import SEQUENTIAL, base_layout, clean_axis, layer_head_axes
from viz._text import head_label

CHANGE_HOVER = "%{hovertext}<extra></extra>"
GROUP_LINE = "#333333"  # borders between groups of query heads that share a key/value head
CHAR_WIDTH = 0.6  # average glyph width as a fraction of the font size
MIN_CHANGE_CELL_PX = 30  # narrower cells cannot show their number legibly


def gqa_change_grid(change: np.ndarray, num_kv_heads: int, font_size: int = 12, width: int | None = None) -> go.Figure:
    """Mean |Δ| per head ``change [n_layers, n_heads]`` (attention.analysis.gqa.map_change) as a heatmap.

    Rows are layers ("L0" on top), columns query heads ("H0", ...), each cell shows its value and
    hover reads "L3 H1: mean |Δ| = …". Vertical lines mark the groups of query heads that
    share one of the ``num_kv_heads`` key/value heads (none when every head keeps its own). The
    colour scale starts at 0. With ``width`` (px) the cells shrink, down to ``MIN_CHANGE_CELL_PX``,
    for the figure to fit it, and their numbers with them.
    """
    change = np.asarray(change, dtype=float)
    if change.ndim != 2:
        raise ValueError(f"expected change [n_layers, n_heads], got shape {change.shape}")
    n_layers, n_heads = change.shape
    if (
        isinstance(num_kv_heads, bool)
        or not isinstance(num_kv_heads, (int, np.integer))
        or num_kv_heads < 1
        or n_heads % num_kv_heads
    ):
        raise ValueError(f"num_kv_heads must divide the {n_heads} heads, got {num_kv_heads!r}")
    hovers = [
        [f"{head_label(layer, head)}: mean |Δ| = {change[layer, head]:.4f}" for head in range(n_heads)]
        for layer in range(n_layers)
    ]
    top = float(np.nanmax(change)) if np.isfinite(change).any() else 0.0
    cell_px = _change_cell_px(n_heads, font_size, width)
    heatmap = go.Heatmap(
        z=change,
        x=list(range(n_heads)),
        y=list(range(n_layers)),
        hovertext=hovers,
        hovertemplate=CHANGE_HOVER,
        texttemplate="%{z:.3f}",
        textfont=dict(size=_cell_text_size(cell_px, font_size)),
        colorscale=SEQUENTIAL,
        zmin=0.0,
        zmax=top if top > 0 else 1.0,  # an unchanged model is all white, not a scale error
        xgap=1,
        ygap=1,
        colorbar=dict(title=dict(text="mean |Δ|", side="right"), thickness=max(12, font_size)),
    )
    layout = _change_layout(n_layers, n_heads, _change_title(n_heads, num_kv_heads), font_size, cell_px, width)
    layout["shapes"] = _group_lines(n_layers, n_heads, num_kv_heads)
    return go.Figure(heatmap, layout)


def _change_title(n_heads: int, num_kv_heads: int) -> str:
    group = n_heads // num_kv_heads
    if num_kv_heads == n_heads:
        kind = "the original multi-head attention"
    elif num_kv_heads == 1:
        kind = "multi-query attention"
    else:
        kind = "grouped-query attention"
    return (
        f"{num_kv_heads} key/value head{'s' * (num_kv_heads > 1)}, {kind}: "
        f"{group} query head{'s' * (group > 1)} per key/value head"
    )


def _group_lines(n_layers: int, n_heads: int, num_kv_heads: int) -> list[dict]:
    group = n_heads // num_kv_heads
    return [
        dict(
            type="line",
            xref="x",
            yref="y",
            x0=g * group - 0.5,
            x1=g * group - 0.5,
            y0=-0.5,
            y1=n_layers - 0.5,
            line=dict(color=GROUP_LINE, width=2),
        )
        for g in range(1, num_kv_heads)
        if group > 1  # one query head per key/value head: nothing is shared, no borders
    ]


def _change_margins(font_size: int) -> tuple[int, int, int]:
    """Left (layer labels), right (colour bar) and top (title, subtitle, head labels), in px."""
    return round(font_size * 2.5) + 10, round(font_size * 6) + 20, round(font_size * 6) + 20


def _change_cell_px(n_heads: int, font_size: int, width: int | None) -> int:
    """A cell wide enough for its number, or narrower (not below MIN_CHANGE_CELL_PX) to fit ``width``."""
    cell_px = max(40, round(font_size * 3.6))
    if width:
        left, right, _ = _change_margins(font_size)
        cell_px = max(MIN_CHANGE_CELL_PX, min(cell_px, (width - left - right - 10) // n_heads))
    return cell_px


def _cell_text_size(cell_px: int, font_size: int) -> int:
    """The font of a cell's number ("0.123", five glyphs) so that it fits inside the cell."""
    return max(8, min(round(font_size * 0.75), int(cell_px * 0.85 / (5 * CHAR_WIDTH))))


def _change_layout(
    n_layers: int, n_heads: int, subtitle: str, font_size: int, cell_px: int, width: int | None = None
) -> dict:
    """Square cells, heads labelled on top, layer 0 on top; what was shared in the subtitle, on two
    lines when one would be wider than ``width``."""
    left, right, top = _change_margins(font_size)
    grid = n_heads * cell_px + left + right + 10
    lines = [subtitle]
    if width and len(subtitle) * font_size * CHAR_WIDTH + 20 > max(width, grid):
        head, rest = subtitle.split(": ", 1)
        lines = [head + ":", rest]
        top += round(font_size * 1.3)
    layout = base_layout(font_size, "Change of each head's attention map")
    layout["title"]["subtitle"] = dict(text="<br>".join(lines), font=dict(size=font_size))
    layout.update(
        width=max(grid, round(max(map(len, lines)) * font_size * CHAR_WIDTH) + 20),
        height=n_layers * cell_px + top + 10,
        margin=dict(l=left, r=right, t=top, b=10),
        **layer_head_axes(n_layers, n_heads, x=dict(constraintoward="left"), y=dict(constraintoward="top")),
    )
    return layout


def kv_groups(kv_head_of) -> list[list[int]]:
    """The query heads of each key/value head, in order: ``kv_head_of[h]`` is head h's key/value head."""
    kv_head_of = [int(g) for g in kv_head_of]
    if not kv_head_of or sorted(set(kv_head_of)) != list(range(max(kv_head_of) + 1)):
        raise ValueError(f"expected a key/value head 0 … G-1 per query head, got {kv_head_of}")
    return [[h for h, g in enumerate(kv_head_of) if g == kv] for kv in range(max(kv_head_of) + 1)]


def _room_for_titles(layout: dict, width: int | None, widest: int = 800) -> dict:
    """Make a narrow figure wide enough for its title and subtitle, which start at the plot's left edge,
    so neither is cut; past ``width`` (or ``widest``) px they wrap instead, and the top grows for the
    extra lines."""
    fs, left = layout["font"]["size"], layout["margin"]["l"]
    most = width or widest
    title, subtitle = layout["title"], layout["title"]["subtitle"]
    needed, extra = layout["width"], 0.0
    for part, size in ((title, round(fs * 1.2)), (subtitle, subtitle["font"]["size"])):
        chars = max(10, int((most - left - 10) / (size * CHAR_WIDTH)))
        lines = textwrap.wrap(part["text"], chars) or [""]
        part["text"] = "<br>".join(lines)
        extra += (len(lines) - 1) * size * 1.3
        needed = max(needed, round(left + max(map(len, lines)) * size * CHAR_WIDTH + 10))
    layout["width"] = int(min(max(layout["width"], needed), max(layout["width"], most)))
    layout["margin"]["t"] = int(layout["margin"]["t"] + extra)
    layout["height"] = int(layout["height"] + extra)
    return layout


def gqa_groups_figure(
    pooled: np.ndarray, kv_head_of, layer: int, tokens=None, font_size: int = 12, width: int | None = None
) -> go.Figure:
    """One layer's heads laid out by the key/value head they read: a row per key/value head ("K/V 0", ...),
    its query heads across, each tile a head's map ``pooled [H, C, C]`` (pool it first: attention.runs.pooling.pool_map)
    named "H5" on top. A transparent marker per tile carries ``customdata=[layer, head]`` for clicks.
    With ``width`` (px) the tiles shrink to fit it."""
    pooled = np.asarray(pooled, dtype=np.float32)
    groups = kv_groups(kv_head_of)
    if pooled.ndim != 3 or pooled.shape[1] != pooled.shape[2] or pooled.shape[0] != len(kv_head_of):
        raise ValueError(f"expected pooled [H, C, C] for {len(kv_head_of)} heads, got shape {pooled.shape}")
    per_row = max(map(len, groups))
    cells = pooled.shape[-1]
    left, top = round(font_size * 4.5) + 10, round(font_size * 5) + 20
    tile_px = float(np.clip(480 / per_row, 40, 90))
    if width:
        tile_px = max(20.0, min(tile_px, (width - left - 90) / per_row))
    label_px = max(9, round(font_size * 0.8))
    gap = max(1, int(np.ceil(label_px * 1.4 / (tile_px / cells))))  # rows of NaN above each tile, for its name
    step_x, step_y = cells + 1, cells + gap
    grid = np.full((len(groups) * step_y, per_row * step_x - 1), np.nan, dtype=np.float32)
    xs, ys, heads = [], [], []
    for row, members in enumerate(groups):
        for col, head in enumerate(members):
            y0 = row * step_y + gap
            grid[y0 : y0 + cells, col * step_x : col * step_x + cells] = pooled[head]
            xs.append(col * step_x + (cells - 1) / 2)
            ys.append(y0 + (cells - 1) / 2)
            heads.append(head)
    hovers = [
        f"{head_label(layer, h)}, reads key/value head {kv_head_of[h]} with "
        + (", ".join(f"H{o}" for o in groups[kv_head_of[h]] if o != h) or "no other head")
        for h in heads
    ]
    markers = go.Scatter(
        x=xs,
        y=ys,
        customdata=[[layer, h] for h in heads],
        hovertext=hovers,
        hovertemplate="%{hovertext}<extra></extra>",
        mode="markers",
        marker=dict(symbol="square", size=tile_px * 0.8, color="rgba(0,0,0,0)"),
        showlegend=False,
    )
    names = [
        dict(
            x=x,
            y=y - (cells - 1) / 2 - 0.5,
            xref="x",
            yref="y",
            yanchor="bottom",
            text=f"H{h}",
            showarrow=False,
            font=dict(size=label_px),
        )
        for x, y, h in zip(xs, ys, heads)
    ]
    heatmap = go.Heatmap(
        z=grid,
        colorscale=SEQUENTIAL,
        zmin=0.0,
        zmax=float(np.nanmax(grid)) or 1.0,
        hoverinfo="skip",
        colorbar=dict(title=dict(text="weight"), thickness=12),
    )
    layout = base_layout(font_size, f"Layer {layer}: query heads by the key/value head they share")
    layout["title"]["subtitle"] = dict(text="the model's own grouping, from its checkpoint", font=dict(size=font_size))
    rows_px = len(groups) * tile_px * step_y / cells
    layout.update(
        width=int(per_row * tile_px * step_x / cells + left + 90),
        height=int(rows_px + top + 10),
        margin=dict(l=left, r=80, t=top, b=10),
        clickmode="event+select",
        annotations=names,
        xaxis=clean_axis(range=[-0.5, per_row * step_x - 1.5], constrain="domain", showticklabels=False),
        yaxis=clean_axis(
            tickmode="array",
            tickvals=[r * step_y + gap + (cells - 1) / 2 for r in range(len(groups))],
            ticktext=[f"K/V {g}" for g in range(len(groups))],
            range=[len(groups) * step_y - 0.5, -0.5],
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
        ),
    )
    return go.Figure([heatmap, markers], _room_for_titles(layout, width))


def head_change_matrix(
    change: np.ndarray, kv_head_of, layer: int, font_size: int = 12, width: int | None = None
) -> go.Figure:
    """Mean |Δ| between every two heads' maps of one layer, ``change [H, H]``, heads in their key/value
    groups' order, with lines between groups: a group whose heads read the same keys and values shows as
    a lighter block on the diagonal when they attend alike. Labels are thinned to stay legible."""
    change = np.asarray(change, dtype=float)
    groups = kv_groups(kv_head_of)
    order = [h for members in groups for h in members]
    n = len(order)
    if change.shape != (n, n):
        raise ValueError(f"expected change [H, H] for {n} heads, got shape {change.shape}")
    z = change[np.ix_(order, order)]
    hovers = [
        [
            f"L{layer} H{a} ↔ H{b}: mean |Δ| = {change[a, b]:.4f}"
            + (" (same key/value head)" if kv_head_of[a] == kv_head_of[b] else "")
            for b in order
        ]
        for a in order
    ]
    left, top = round(font_size * 3) + 10, round(font_size * 4) + 20
    side = min(480, max(240, 24 * n))
    if width:
        side = min(side, width - left - 110)
    label_every = max(1, int(np.ceil((len(f"H{n - 1}") * font_size * CHAR_WIDTH + 6) / (side / n))))
    shown = list(range(0, n, label_every))
    bounds = np.cumsum([len(m) for m in groups])[:-1] - 0.5
    lines = [
        dict(type="line", xref="x", yref="y", x0=b, x1=b, y0=-0.5, y1=n - 0.5, line=dict(color=GROUP_LINE, width=2))
        for b in bounds
    ] + [
        dict(type="line", xref="x", yref="y", y0=b, y1=b, x0=-0.5, x1=n - 0.5, line=dict(color=GROUP_LINE, width=2))
        for b in bounds
    ]
    layout = base_layout(font_size, f"Layer {layer}: how far apart every two heads' maps are")
    layout["title"]["subtitle"] = dict(
        text="mean |Δ|, heads ordered by key/value head; lines between groups", font=dict(size=font_size)
    )
    layout.update(
        width=int(side + left + 110),
        height=int(side + top + 10),
        margin=dict(l=left, r=100, t=top, b=10),
        shapes=lines,
        xaxis=clean_axis(
            tickmode="array",
            tickvals=shown,
            ticktext=[f"H{order[i]}" for i in shown],
            side="top",
            range=[-0.5, n - 0.5],
            constrain="domain",
        ),
        yaxis=clean_axis(
            tickmode="array",
            tickvals=shown,
            ticktext=[f"H{order[i]}" for i in shown],
            range=[n - 0.5, -0.5],
            scaleanchor="x",
            scaleratio=1,
            constrain="domain",
        ),
    )
    heatmap = go.Heatmap(
        z=z,
        hovertext=hovers,
        hovertemplate=CHANGE_HOVER,
        colorscale=SEQUENTIAL,
        zmin=0.0,
        zmax=float(z.max()) or 1.0,
        colorbar=dict(title=dict(text="mean |Δ|", side="right"), thickness=12),
    )
    return go.Figure(heatmap, _room_for_titles(layout, width))
