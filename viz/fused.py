"""What the fused attention kernel saves against explicit attention: time and peak memory per sequence
length, from bench/fused.py's results."""

from collections.abc import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz._style import base_layout
from viz._text import escape

SERIES = (("explicit", "explicit (probabilities kept)", "#c8610c"), ("fused", "fused (PyTorch SDPA)", "#2f6fad"))
BUFFER_COLOUR = "#888888"


def fused_panel(bench: Mapping) -> go.Figure:
    """Time per call (left) and peak memory (right) against tokens, explicit vs fused attention.

    ``bench`` is what bench/fused.py writes: ``rows`` of {tokens, explicit_ms, fused_ms,
    explicit_peak_mb, fused_peak_mb}, ``machine`` and, optionally, ``shape``. All axes are
    logarithmic, so a value of 0 (a peak too small to register) is left out of its line. With a
    ``shape``, a dotted line gives the size of one float32 (B, H, L, L) probability buffer.
    """
    rows = sorted(bench["rows"], key=lambda r: r["tokens"])
    if not rows:
        raise ValueError("the benchmark has no rows")
    tokens = [int(r["tokens"]) for r in rows]
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=("median time per call", "peak memory above inputs")
    )
    for key, name, colour in SERIES:
        for col, (field, unit) in enumerate(((f"{key}_ms", "ms"), (f"{key}_peak_mb", "MB")), start=1):
            values = [_positive(r[field]) for r in rows]
            fig.add_trace(_series(tokens, values, escape(name), colour, unit, show_legend=col == 1), row=1, col=col)
    shape = bench.get("shape")
    if shape:
        buffer_mb = [shape["batch"] * shape["heads"] * n * n * 4 / 2**20 for n in tokens]
        label = "one (B, H, L, L) float32 buffer"
        fig.add_trace(
            go.Scatter(
                x=tokens,
                y=buffer_mb,
                mode="lines",
                name=label,
                line=dict(color=BUFFER_COLOUR, dash="dot"),
                hovertemplate=f"{label}, %{{x}} tokens: %{{y:.1f}} MB<extra></extra>",
            ),
            row=1,
            col=2,
        )
    _panel_layout(fig, tokens, _machine_label(bench.get("machine", {}), shape))
    return fig


def _positive(value) -> float | None:
    return float(value) if value is not None and value > 0 else None


def _series(tokens: list[int], values: list, name: str, colour: str, unit: str, show_legend: bool) -> go.Scatter:
    return go.Scatter(
        x=tokens,
        y=values,
        mode="lines+markers",
        name=name,
        legendgroup=name,
        showlegend=show_legend,
        line=dict(color=colour, width=2),
        marker=dict(size=7),
        hovertemplate=f"{name}, %{{x}} tokens: %{{y:.3g}} {unit}<extra></extra>",
    )


def _machine_label(machine: Mapping, shape: Mapping | None) -> str:
    parts = []
    if shape:
        parts.append(f"B={shape['batch']}, H={shape['heads']}, d={shape['head_dim']}")
    if machine.get("cpu"):
        threads = machine.get("torch_threads")
        parts.append(str(machine["cpu"]) + (f", {threads} threads" if threads else ""))
    if machine.get("torch"):
        parts.append(f"torch {machine['torch']}")
    if machine.get("date"):
        parts.append(str(machine["date"])[:10])
    return escape("; ".join(parts))


def _panel_layout(fig: go.Figure, tokens: list[int], machine: str, font_size: int = 12) -> None:
    layout = base_layout(font_size, "Explicit vs fused attention")
    if machine:
        layout["title"]["subtitle"] = dict(text=machine, font=dict(size=round(font_size * 0.9)))
    fig.update_layout(layout)
    fig.update_layout(
        width=980,
        height=460,
        margin=dict(l=10, r=10, t=110, b=70),
        legend=dict(orientation="h", yanchor="top", y=-0.18, x=0),
        hovermode="closest",
    )
    for col, y_title in ((1, "ms"), (2, "MB")):
        fig.update_xaxes(
            type="log",
            tickmode="array",
            tickvals=tokens,
            ticktext=[str(n) for n in tokens],
            title_text="tokens",
            showgrid=True,
            row=1,
            col=col,
        )
        fig.update_yaxes(type="log", title_text=y_title, showgrid=True, row=1, col=col)
