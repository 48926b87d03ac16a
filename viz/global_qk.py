"""The global view of a head: every corpus token's query and key in one plane (AttentionViz), drawn with
WebGL (Scattergl) so that 20,000 tokens' 40,000 points stay quick to draw, pan and hover.

A figure takes the point tables of attention/analysis/qk_global.py (columns x, y, kind, text, position,
token, token_kind, context, layer, head) and colours them by query or key, by position, or by token kind.
Every point carries [text, position, layer, head] as customdata, for a click to open its sentence in its head.
A few far points do not squeeze the cloud into a corner: the axes leave them out (view_range), and the title
says how many are outside the view (a double-click shows them).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ._style import base_layout
from ._text import escape, head_label

COLOUR_BY = ("kind", "position", "token_kind")  # query or key, position in the text, token kind
KIND_COLOURS = {"query": "#1b9e77", "key": "#d9468f"}  # AttentionViz's green queries and pink keys
TOKEN_KIND_COLOURS = {"word": "#2f6fad", "piece": "#8fb8de", "punctuation": "#c8610c", "special": "#555555"}
KIND_SYMBOLS = {"query": "circle", "key": "diamond"}
POSITION_SCALE = "Viridis"
QUANTILES = (0.01, 0.99)  # the bulk of a cloud along each axis
FENCE = 0.5  # points further than this share of the bulk's span beyond it are outliers, left out of the axes' range
PAD = 0.04  # room on each side of the points kept in range, as a share of their span


def marker_style(n_points: int) -> dict:
    """Smaller and fainter markers the more points there are: 20,000 tokens still show their clusters."""
    if n_points <= 2_000:
        return dict(size=6, opacity=0.8)
    if n_points <= 10_000:
        return dict(size=4, opacity=0.6)
    return dict(size=3, opacity=0.45)


def hover_texts(frame: pd.DataFrame) -> list[str]:
    """'query «it» · text 3, position 10' over the token in its words, every part of the text escaped."""
    return [
        f"<b>{kind}</b> {escape(token)} · text {text}, position {position}<br>{escape(context)}"
        for kind, token, text, position, context in zip(
            frame["kind"], frame["token"], frame["text"], frame["position"], frame["context"]
        )
    ]


def _traces(frame: pd.DataFrame, colour_by: str, marker: dict, legend: bool, coloraxis: str) -> list[go.Scattergl]:
    """The frame's points as Scattergl traces: one per query/key or per token kind (a legend entry each),
    or per query/key coloured by position on a shared colour axis."""
    if colour_by not in COLOUR_BY:
        raise ValueError(f"colour_by must be one of {', '.join(COLOUR_BY)}, got {colour_by!r}")
    groups = {"kind": KIND_COLOURS, "position": KIND_COLOURS, "token_kind": TOKEN_KIND_COLOURS}[colour_by]
    column = "token_kind" if colour_by == "token_kind" else "kind"
    traces = []
    for name, colour in groups.items():
        part = frame[frame[column] == name]
        if part.empty:
            continue
        style = dict(marker, color=colour, symbol=[KIND_SYMBOLS[k] for k in part["kind"]], line=dict(width=0))
        if colour_by == "position":
            style.update(color=part["position"].to_numpy(), coloraxis=coloraxis)
        traces.append(
            go.Scattergl(
                x=part["x"].to_numpy(),
                y=part["y"].to_numpy(),
                mode="markers",
                name={"query": "queries", "key": "keys"}.get(name, name),
                legendgroup=name,
                showlegend=legend,
                marker=style,
                text=hover_texts(part),
                hovertemplate="%{text}<extra></extra>",
                customdata=part[["text", "position", "layer", "head"]].to_numpy(),
            )
        )
    return traces


def global_qk_figure(
    frame: pd.DataFrame,
    colour_by: str = "kind",
    title: str | None = None,
    font_size: int = 14,
    width: int | None = None,
    height: int = 640,
) -> go.Figure:
    """One head's queries and keys, every point of `frame`, in one WebGL scatter."""
    if frame.empty:
        raise ValueError("no points to draw")
    if title is None:
        layer, head = int(frame["layer"].iloc[0]), int(frame["head"].iloc[0])
        n = int((frame["kind"] == "query").sum())
        title = f"{head_label(layer, head)}: the queries and keys of {n:,} tokens ({len(frame):,} points)"
    fig = go.Figure(_traces(frame, colour_by, marker_style(len(frame)), True, "coloraxis"))
    fit = axes_fit(frame)
    _set_ranges(fig, fit)
    if fit[2]:
        far = f"{fit[2]:,} far point{'s' if fit[2] > 1 else ''}"
        title += f"<br><sup>{far} outside the view: double-click the plot to see all</sup>"
    fig.update_layout(**base_layout(font_size, title), width=width, height=height)
    if fit[2]:  # room for the note's line under the title
        fig.update_layout(margin_t=fig.layout.margin.t + font_size * 2)
    fig.update_layout(legend=dict(itemsizing="constant", orientation="h", y=-0.02, yanchor="top"))
    _plain_axes(fig)
    if colour_by == "position":
        fig.update_layout(coloraxis=dict(colorscale=POSITION_SCALE, colorbar=dict(title="position")))
    return fig


def small_multiples(
    frames: dict[int, pd.DataFrame],
    colour_by: str = "kind",
    per_head: int = 4_000,
    font_size: int = 12,
    width: int | None = None,
    columns: int = 4,
    seed: int = 0,
) -> go.Figure:
    """Every head of a layer, one small WebGL scatter each, `per_head` tokens' queries and keys of each
    (the same tokens in every panel)."""
    if not frames:
        raise ValueError("no heads to draw")
    heads = sorted(frames)
    rows, columns = math.ceil(len(heads) / columns), min(columns, len(heads))
    first = frames[heads[0]]
    kept = _thinned(first, per_head, seed)
    parts = [frames[h][frames[h].set_index(["kind", "text", "position"]).index.isin(kept)] for h in heads]
    fits = [axes_fit(part) for part in parts]
    titles = [
        head_label(int(frames[h]["layer"].iloc[0]), h) + (f" · {fit[2]:,} outside" if fit[2] else "")
        for h, fit in zip(heads, fits)
    ]
    fig = make_subplots(rows, columns, subplot_titles=titles, horizontal_spacing=0.02, vertical_spacing=0.06)
    for i, (part, fit) in enumerate(zip(parts, fits)):
        for trace in _traces(part, colour_by, marker_style(len(part) * 3), i == 0, "coloraxis"):
            fig.add_trace(trace, row=i // columns + 1, col=i % columns + 1)
        _set_ranges(fig, fit, "" if i == 0 else str(i + 1))
    panel = (width or 1000) / columns
    fig.update_layout(**base_layout(font_size), width=width, height=round(rows * panel * 0.95 + 80))
    fig.update_layout(legend=dict(itemsizing="constant", orientation="h", y=1.02, yanchor="bottom"))
    _plain_axes(fig)
    if colour_by == "position":
        fig.update_layout(coloraxis=dict(colorscale=POSITION_SCALE, colorbar=dict(title="position")))
    return fig


def _thinned(frame: pd.DataFrame, per_head: int, seed: int) -> pd.MultiIndex:
    """(kind, text, position) of `per_head` tokens' query and key, chosen at random once for every panel."""
    tokens = frame.loc[frame["kind"] == "query", ["text", "position"]].drop_duplicates()
    if len(tokens) > per_head:
        tokens = tokens.iloc[np.sort(np.random.default_rng(seed).choice(len(tokens), per_head, replace=False))]
    both = pd.concat([tokens.assign(kind="query"), tokens.assign(kind="key")])
    return pd.MultiIndex.from_frame(both[["kind", "text", "position"]])


def view_range(values: np.ndarray) -> tuple[tuple[float, float] | None, np.ndarray]:
    """The axis range that leaves out far points, and which values lie outside it: the points within FENCE
    of the QUANTILES' span beyond them, padded by PAD; None (and none outside) when no point is that far."""
    low, high = np.quantile(values, QUANTILES)
    span = high - low
    far = (values < low - FENCE * span) | (values > high + FENCE * span)
    if span <= 0 or not far.any():
        return None, np.zeros(len(values), dtype=bool)
    kept = values[~far]
    pad = PAD * (kept.max() - kept.min())
    return (float(kept.min() - pad), float(kept.max() + pad)), far


def axes_fit(frame: pd.DataFrame) -> tuple[tuple | None, tuple | None, int]:
    """The x and y ranges that leave out a frame's far points (view_range; None: the points' own) and how
    many points they leave outside (double-clicking the plot shows them again)."""
    x_range, x_far = view_range(frame["x"].to_numpy())
    y_range, y_far = view_range(frame["y"].to_numpy())
    return x_range, y_range, int((x_far | y_far).sum())


def _set_ranges(fig: go.Figure, fit: tuple, suffix: str = "") -> None:
    """Panel `suffix`'s axes set to `fit`'s ranges, so that a few far points do not squeeze the cloud."""
    for axis, bounds in zip(("xaxis", "yaxis"), fit[:2]):
        if bounds is not None:
            fig.layout[axis + suffix].range = bounds


def _plain_axes(fig: go.Figure) -> None:
    """No ticks or grid (a projection's coordinates mean nothing alone), one unit the same on both axes."""
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False)
    for axis in fig.layout:
        if axis.startswith("yaxis"):
            fig.layout[axis].scaleanchor = "x" + axis.removeprefix("yaxis")
