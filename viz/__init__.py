"""Plotly figures of attention maps: arrays and tokens in, Figure out."""

from viz.heatmap import head_heatmap, head_view
from viz.lines import lines_view
from viz.masks import causal_mask_figure, padding_mask_figure
from viz.overview import overview_grid, pool_map
from viz.report import html_report
from viz.tokens import token_strip

__all__ = [
    "causal_mask_figure",
    "head_heatmap",
    "head_view",
    "html_report",
    "lines_view",
    "overview_grid",
    "padding_mask_figure",
    "pool_map",
    "token_strip",
]
