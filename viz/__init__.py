"""Plotly figures of attention maps: arrays and tokens in, Figure out."""

from viz.heatmap import head_heatmap, head_view
from viz.lines import lines_view
from viz.overview import overview_grid, pool_map

__all__ = ["head_heatmap", "head_view", "lines_view", "overview_grid", "pool_map"]
