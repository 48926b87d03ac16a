"""The ablation view's figure: how far masking heads moves each layer's hidden states, and each head's attention."""

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz._style import ACCENT, SEQUENTIAL, TITLED_COLORBAR_PX, base_layout, clean_axis
from viz._text import head_label
from viz.heatmap import stacked_stride

MARK_COLOUR = "#111111"
MIN_ROW_PX = 12  # a grid row drawn to a height budget (a 30-layer model on the first screen): colour and a mark


def ablation_figure(
    hidden_cosine: np.ndarray,
    attention_change: np.ndarray,
    embedding_cosine: float,
    masked: np.ndarray,
    font_size: int = 12,
    height: int | None = None,
) -> go.Figure:
    """Masking heads: how far each layer's hidden states move, and how each head's attention changes.

    hidden_cosine is (n_layers + 1,): the cosine between the masked and unmasked run's hidden
    states after the embeddings (0) and after each layer. attention_change is (n_layers, H): each
    head's mean |Δ attention|. masked is a boolean (n_layers, H) array, or (k, 2) integer
    (layer, head) pairs; masked heads get an X. The title gives embedding_cosine, the cosine of
    the two runs' mean-pooled sentence embeddings. ``height`` (presentation mode: the first screen's budget) lowers
    the grid's rows, down to MIN_ROW_PX, for the figure to keep within it.
    """
    hidden_cosine = np.asarray(hidden_cosine, dtype=float)
    change = np.asarray(attention_change, dtype=float)
    if change.ndim != 2 or hidden_cosine.shape != (change.shape[0] + 1,):
        raise ValueError(
            f"expected hidden_cosine (n_layers + 1,) and attention_change (n_layers, H), "
            f"got {hidden_cosine.shape} and {change.shape}"
        )
    n_layers, n_heads = change.shape
    marked_layers, marked_heads = _masked_heads(masked, n_layers, n_heads)
    cell_px = max(28, round(font_size * 2.4))
    margin = _margin(font_size)
    room = None if height is None else height - margin["t"] - margin["b"]
    row_px = cell_px if room is None else max(MIN_ROW_PX, min(cell_px, room // n_layers))
    line_px, gap_px = max(300, font_size * 26), font_size * 5
    grid_px = n_heads * cell_px
    fig = make_subplots(
        rows=1, cols=2, column_widths=[line_px, grid_px], horizontal_spacing=gap_px / (line_px + gap_px + grid_px)
    )
    stages = ["embeddings"] + [f"after L{layer}" for layer in range(n_layers)]
    fig.add_trace(
        go.Scatter(
            x=list(range(n_layers + 1)),
            y=hidden_cosine,
            mode="lines+markers",
            text=stages,
            name="hidden-state cosine",
            marker=dict(color=ACCENT),
            hovertemplate="%{text}: cosine %{y:.4f}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    # hover from text, not "L%{y}": %{y} reads the axis's tick label, which is already "L3"
    cells = [
        [f"{head_label(layer, head)}: mean |Δ attention| {change[layer, head]:.4f}" for head in range(n_heads)]
        for layer in range(n_layers)
    ]
    fig.add_trace(
        go.Heatmap(
            z=change,
            x=list(range(n_heads)),
            y=list(range(n_layers)),
            xgap=2,
            ygap=2,
            colorscale=SEQUENTIAL,
            zmin=0.0,
            zmax=float(np.nanmax(change, initial=0.0)) or 1.0,
            name="mean |Δ attention|",
            hovertext=cells,
            hovertemplate="%{hovertext}<extra></extra>",
            colorbar=dict(title=dict(text="mean |Δ attention|", side="right"), thickness=max(10, font_size)),
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=marked_heads,
            y=marked_layers,
            mode="markers",
            name="masked",
            marker=dict(
                symbol="x", size=max(10, round(row_px * 0.45)), color=MARK_COLOUR, line=dict(color="white", width=1)
            ),
            hovertext=[f"{head_label(layer, head)}: masked" for layer, head in zip(marked_layers, marked_heads)],
            hovertemplate="%{hovertext}<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    title = (
        f"{len(marked_heads)} head{'s' if len(marked_heads) != 1 else ''} masked: "
        f"sentence embedding cosine {embedding_cosine:.4f} (mean-pooled)"
    )
    widths = (line_px, line_px + gap_px + grid_px)
    _ablation_layout(fig, (n_layers, n_heads), (cell_px, row_px), widths, title, font_size)
    return fig


def _margin(font_size: int) -> dict[str, int]:
    """Round the plots: the axes' labels and titles, the colour bar, the title's line above."""
    return dict(l=font_size * 5, r=TITLED_COLORBAR_PX + font_size, t=round(font_size * 2.2) + 16, b=font_size * 5)


def _every(n: int, room_px: float, label_px: float) -> int:
    """Every how many of ``n`` ticks one is labelled, for labels ``label_px`` apart to fit ``room_px``."""
    return max(1, -(-round(n * label_px) // max(1, round(room_px))))


def _masked_heads(masked: np.ndarray, n_layers: int, n_heads: int) -> tuple[list[int], list[int]]:
    masked = np.asarray(masked)
    if masked.dtype == bool:
        if masked.shape != (n_layers, n_heads):
            raise ValueError(f"a boolean masked must be ({n_layers}, {n_heads}), got {masked.shape}")
        pairs = np.argwhere(masked)
    else:
        pairs = masked.reshape(-1, 2).astype(int) if masked.size else np.zeros((0, 2), dtype=int)
        if masked.size and masked.shape[-1] != 2:
            raise ValueError(f"masked heads must be (k, 2) (layer, head) pairs, got {masked.shape}")
    if ((pairs < 0) | (pairs >= [n_layers, n_heads])).any():
        raise ValueError(f"a masked head is outside {n_layers} layers × {n_heads} heads")
    return pairs[:, 0].tolist(), pairs[:, 1].tolist()


def _ablation_layout(
    fig: go.Figure, shape: tuple[int, int], cell: tuple[int, int], widths: tuple[int, int], title: str, font_size: int
) -> None:
    """``shape``: layers and heads; ``cell``: a grid cell's width and height; ``widths``: the line plot's and both
    plots' with the gap between them."""
    (n_layers, n_heads), (cell_px, row_px), (line_px, plot_w) = shape, cell, widths
    margin = _margin(font_size)
    fig.update_layout(base_layout(font_size, title))
    fig.update_layout(
        margin=margin,
        width=plot_w + margin["l"] + margin["r"],
        height=max(260, n_layers * row_px) + margin["t"] + margin["b"],
    )
    stages = ["emb"] + [f"L{layer}" for layer in range(n_layers)]
    step = _every(n_layers + 1, line_px, font_size * 2)  # "L29" and a gap
    fig.update_xaxes(
        clean_axis(
            tickmode="array",
            tickvals=list(range(0, n_layers + 1, step)),
            ticktext=stages[::step],
            title=dict(text="hidden state after"),
            showgrid=True,
        ),
        row=1,
        col=1,
    )
    fig.update_yaxes(clean_axis(title=dict(text="cosine to the unmasked run"), showgrid=True), row=1, col=1)
    fig.update_xaxes(
        clean_axis(
            tickmode="array",
            tickvals=list(range(n_heads)),
            ticktext=[f"H{head}" for head in range(n_heads)],
            title=dict(text="head"),
            constrain="domain",
        ),
        row=1,
        col=2,
    )
    every = stacked_stride(row_px, font_size)
    fig.update_yaxes(
        clean_axis(
            tickmode="array",
            tickvals=list(range(0, n_layers, every)),
            ticktext=[f"L{layer}" for layer in range(0, n_layers, every)],
            autorange="reversed",
            scaleanchor="x2",
            scaleratio=row_px / cell_px,
            constrain="domain",
        ),
        row=1,
        col=2,
    )
