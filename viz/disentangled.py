"""DeBERTa's disentangled attention drawn term by term: one head's content-to-content, content-to-position and
position-to-content score maps beside their total, on one shared diverging colour scale, so a term's share of
the total reads from its colour. Pure: numbers and tokens in, a plotly figure out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz._style import base_layout
from viz._text import escape_all, readable_all

PANELS = (
    ("c2c", "content → content"),  # q·k; the formulas are in the hover (a panel's title has ~18 characters' room)
    ("c2p", "content → position"),  # q·K_r[δ]
    ("p2c", "position → content"),  # k·Q_r[δ]
    ("total", "total score"),
)
FORMULAS = {"c2c": "q·k", "c2p": "q·K_r[δ]", "p2c": "k·Q_r[δ]", "total": "c2c + c2p + p2c"}
PANEL_PX = 300  # each map's width and height at most


def disentangled_figure(
    maps: dict[str, np.ndarray],
    tokens: Sequence[str],
    font_size: int = 14,
    *,
    title: str | None = None,
    width: int | None = None,
) -> go.Figure:
    """`maps` holds "c2c", "c2p", "p2c" and "total", each (L, L) scores of one head (query rows, key columns,
    before the mask); drawn side by side on one colour scale centred on 0. Tokens are escaped; `title` is plotly
    markup."""
    missing = [name for name, _ in PANELS if name not in maps]
    if missing:
        raise ValueError(f"the maps lack {', '.join(missing)}")
    grids = [np.asarray(maps[name], dtype=float) for name, _ in PANELS]
    L = len(tokens)
    if any(grid.shape != (L, L) for grid in grids):
        raise ValueError(f"every map must be ({L}, {L}) for {L} tokens, got {[g.shape for g in grids]}")
    finite = np.concatenate([g[np.isfinite(g)] for g in grids]) if L else np.zeros(1)
    reach = float(np.abs(finite).max()) if finite.size else 1.0
    labels = [f"{i}: {t}" for i, t in enumerate(escape_all(readable_all(tokens)))]
    figure = make_subplots(rows=1, cols=len(PANELS), subplot_titles=[words for _, words in PANELS])
    for col, ((name, _), grid) in enumerate(zip(PANELS, grids), start=1):
        figure.add_trace(
            go.Heatmap(
                z=grid,
                x=labels,
                y=labels,
                zmin=-reach,
                zmax=reach,
                zmid=0,
                colorscale="RdBu_r",
                showscale=col == len(PANELS),
                name=name,
                hovertemplate=f"{name}: {FORMULAS[name]}<br>query %{{y}}<br>key %{{x}}<br>score %{{z:.3f}}"
                "<extra></extra>",
            ),
            row=1,
            col=col,
        )
        figure.update_yaxes(autorange="reversed", showticklabels=col == 1, row=1, col=col)
        figure.update_xaxes(showticklabels=L <= 24, tickangle=-60, row=1, col=col)
    panel = min(PANEL_PX, (width or PANEL_PX * len(PANELS)) // len(PANELS))
    layout = base_layout(font_size, title)
    layout["margin"] = dict(layout["margin"], b=120 if L <= 24 else 10)  # room for the keys' names
    figure.update_layout(**layout, width=width or panel * len(PANELS), height=panel + 200)
    return figure
