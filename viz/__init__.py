"""Plotly figures of attention maps: arrays and tokens in, Figure out."""

from viz.ablation import ablation_figure
from viz.coref import flip_grid, head_grid
from viz.coref_ranking import ranked_heads
from viz.fused import fused_panel
from viz.gqa import gqa_change_grid
from viz.heatmap import head_heatmap
from viz.lens import lens_view
from viz.lines import lines_view
from viz.masks import causal_mask_figure, padding_mask_figure
from viz.mixing import mixing_view
from viz.model_view import model_view
from viz.notebook import head_view
from viz.overview import overview_grid
from viz.query_key import query_key_figure
from viz.report import html_report
from viz.rollout import attention_pair
from viz.shapeflow import shape_flow, tensor_heatmap
from viz.stats import head_scatter, stats_frame
from viz.tokens import token_strip

__all__ = [
    "lens_view",
    "ablation_figure",
    "attention_pair",
    "causal_mask_figure",
    "flip_grid",
    "fused_panel",
    "gqa_change_grid",
    "head_grid",
    "head_heatmap",
    "head_scatter",
    "head_view",
    "html_report",
    "lines_view",
    "mixing_view",
    "model_view",
    "overview_grid",
    "padding_mask_figure",
    "query_key_figure",
    "ranked_heads",
    "shape_flow",
    "stats_frame",
    "tensor_heatmap",
    "token_strip",
]
