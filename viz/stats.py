"""The statistics view's figures: every head on a 2-D map, and a sortable table of per-head statistics."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from viz._style import KEEP_OPACITY, base_layout, clean_axis
from viz._text import escape, head_label

if TYPE_CHECKING:  # for the annotation only: pandas is imported when a table is made
    import pandas as pd

LAYER_SCALE = "Viridis"
LAYER_SCALE_END = 0.85  # Viridis' last yellows hardly show on white
STAT_DECIMALS = 3


def head_scatter(
    coords: np.ndarray,
    layers: np.ndarray,
    heads: np.ndarray,
    labels: Sequence[str] | None = None,
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
) -> go.Figure:
    """A 2-D map of the heads (Clark et al. 2019, fig. 6): close points attend alike; ``width`` and
    ``height`` (px) cap its size (a presentation's first screen).

    coords is (n, 2) (further columns are ignored); layers and heads give each point's layer and
    head. One trace, coloured by layer from early (dark) to late (light) on one colour bar: a model of 30
    layers gets a bar, not 30 legend rows. Hover reads "L{layer} H{head}" and the pattern label when given
    (escaped); every point carries customdata [layer, head] for click selection.
    """
    coords = np.asarray(coords, dtype=float)
    layers, heads = np.asarray(layers, dtype=int), np.asarray(heads, dtype=int)
    n = len(coords)
    if coords.ndim != 2 or coords.shape[1] < 2 or layers.shape != (n,) or heads.shape != (n,):
        raise ValueError(
            f"expected coords (n, 2) with n layers and heads, got {coords.shape}, {layers.shape}, {heads.shape}"
        )
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels)} labels given for {n} heads")
    hovers = [
        head_label(layer, head) + (f"<br>{escape(labels[i])}" if labels is not None else "")
        for i, (layer, head) in enumerate(zip(layers, heads))
    ]
    top = max(int(layers.max(initial=0)), 1)
    trace = go.Scatter(
        x=coords[:, 0],
        y=coords[:, 1],
        mode="markers",
        name="heads",
        marker=dict(
            color=layers,
            cmin=0,
            cmax=top,
            colorscale=layer_colours(),
            colorbar=dict(title=dict(text="layer", side="right"), tickformat="d", thickness=14),
            size=max(8, round(font_size * 0.9)),
            line=dict(color="white", width=1),
        ),
        customdata=[[int(layer), int(head)] for layer, head in zip(layers, heads)],
        hovertext=hovers,
        hovertemplate="%{hovertext}<extra></extra>",
        showlegend=False,
        **KEEP_OPACITY,
    )
    scale = max(1.0, font_size / 12)
    layout = base_layout(font_size)
    layout.update(
        width=min(int(680 * scale), width or 10**6),
        height=min(int(560 * scale), height or 10**6),
        clickmode="event+select",
        xaxis=clean_axis(title=dict(text="MDS 1"), showticklabels=False, showgrid=True),
        yaxis=clean_axis(title=dict(text="MDS 2"), showticklabels=False, showgrid=True, scaleanchor="x", scaleratio=1),
    )
    return go.Figure([trace], layout)


def layer_colours(steps: int = 9) -> list[list]:
    """Viridis from its start to LAYER_SCALE_END (its last yellows hardly show on white), as a plotly colour
    scale: layer 0 dark, the last layer light."""
    stops = np.linspace(0, 1, steps)
    return [[float(s), c] for s, c in zip(stops, sample_colorscale(LAYER_SCALE, list(stops * LAYER_SCALE_END)))]


def stats_frame(stats: dict[str, np.ndarray], labels: np.ndarray | None = None) -> "pd.DataFrame":
    """One row per head (layer-major) with its layer, head, pattern (when labels are given) and
    each statistic of attention.analysis.head_stats, in the dict's order, rounded to
    STAT_DECIMALS places. Every statistic, and labels, is (n_layers, H)."""
    if not stats:
        raise ValueError("stats_frame needs at least one statistic")
    shape = np.shape(next(iter(stats.values())))
    arrays = {name: np.asarray(values, dtype=float) for name, values in stats.items()}
    if len(shape) != 2 or any(a.shape != shape for a in arrays.values()):
        raise ValueError(f"every statistic must be (n_layers, H); got {[a.shape for a in arrays.values()]}")
    if labels is not None and np.shape(labels) != shape:
        raise ValueError(f"labels have shape {np.shape(labels)}, statistics {shape}")
    n_layers, n_heads = shape
    columns = {"layer": np.repeat(np.arange(n_layers), n_heads), "head": np.tile(np.arange(n_heads), n_layers)}
    if labels is not None:
        columns["pattern"] = np.asarray(labels, dtype=str).ravel()
    columns.update({name: values.ravel().round(STAT_DECIMALS) for name, values in arrays.items()})
    import pandas as pd  # here, not at the top: it adds about 0.4 s to the app's cold start

    return pd.DataFrame(columns)
