"""Coreference's best heads as bars, best first, against the baselines' accuracies as dashed lines."""

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import KEEP_OPACITY, base_layout, clean_axis
from viz._text import escape, head_label

BASELINE_COLOURS = ("#d95f02", "#54278f", "#1b7837", "#333333")
BASELINE_DASHES = ("dash", "dot", "dashdot", "longdash")  # two equal baselines both show
_RANK_PLOT_PX = 560  # width of the bars' plot area
MIN_RANK_PLOT_PX = 160  # in a narrower column the figure is drawn wider than it and scaled down
BAR_COLOUR = "#9ecae1"
ERROR_COLOUR = "#3f3f3f"  # light, so the dashed baselines show across the bars


def ranked_heads(
    ranked: Sequence[tuple[int, int, float]],
    baselines: Mapping[str, float],
    top: int = 15,
    font_size: int = 14,
    title: str | None = None,
    intervals: np.ndarray | None = None,
    width: int | None = None,
) -> go.Figure:
    """The ``top`` heads of ``ranked`` ((layer, head, accuracy), best first) as bars.

    ``width`` (px) is the figure's width, the column it is drawn in (default: a
    plot area of ``_RANK_PLOT_PX``); the baseline labels are placed for it.

    ``intervals`` (low, high), each ``[n_layers, n_heads]`` (e.g. a 95%
    Clopper-Pearson interval), draws each bar's interval as an error bar
    and names it in the hover.

    The best head is the top bar, labelled "L3 H1", its accuracy written at
    the bar end. Each baseline ({name: accuracy}) is a dashed vertical line
    labelled "name 0.47" above the bars; close labels go on separate rows.
    Bars carry ``customdata=[layer, head]`` for click selection.
    """
    shown = list(ranked)[:top]
    names = [head_label(layer, head) for layer, head, _ in shown]
    accuracies = [float(acc) for _, _, acc in shown]
    extra: dict[str, object] = {"hovertemplate": "%{y}: accuracy %{x:.2f}<extra></extra>"}
    highs = None
    if intervals is not None:
        low, high = (np.asarray(a, dtype=float) for a in intervals)
        lows = [float(low[layer, head]) for layer, head, _ in shown]
        highs = [float(high[layer, head]) for layer, head, _ in shown]
        extra = dict(
            error_x=dict(
                type="data",
                symmetric=False,
                array=[h - a for h, a in zip(highs, accuracies)],
                arrayminus=[a - lo for a, lo in zip(accuracies, lows)],
                color=ERROR_COLOUR,
                thickness=1.5,
                width=max(3, font_size // 3),
            ),
            hovertext=[f"95% interval {lo:.2f}–{h:.2f}" for lo, h in zip(lows, highs)],
            hovertemplate="%{y}: accuracy %{x:.2f}, %{hovertext}<extra></extra>",
        )
    bars = go.Bar(
        x=accuracies,
        y=names,
        orientation="h",
        marker=dict(color=BAR_COLOUR),
        customdata=[[int(layer), int(head)] for layer, head, _ in shown],
        showlegend=False,
        **KEEP_OPACITY,  # a clicked bar leaves the others as they are
        **extra,
    )
    top_px = round(font_size * 1.6) + 24 if title else 16
    left = round(font_size * 0.6 * max((len(n) for n in names), default=5) + font_size / 2) + 16
    right, bottom = round(font_size * 3), round(font_size * 3.5)  # room for "1.00", the axis title
    plot_px = _RANK_PLOT_PX if width is None else max(MIN_RANK_PLOT_PX, width - left - right)
    lines, notes, rows = _baselines(baselines, font_size, plot_px, left, right)
    top_px += rows * round(font_size * 1.5)
    layout = base_layout(font_size, escape(title) if title else None)
    layout.update(
        width=plot_px + left + right,
        height=len(shown) * max(26, round(font_size * 2)) + top_px + bottom,
        margin=dict(l=left, r=right, t=top_px, b=bottom),
        bargap=0.25,
        clickmode="event+select",
        dragmode=False,
        shapes=lines,
        annotations=notes + _bar_values(names, accuracies, font_size, highs),
        xaxis=clean_axis(range=[0, 1], dtick=0.2, showgrid=True, title=dict(text="accuracy")),
        yaxis=clean_axis(type="category", autorange="reversed", ticklabelstandoff=round(font_size / 2)),
    )
    return go.Figure([bars], layout)


def _bar_values(
    names: list[str], accuracies: list[float], font_size: int, ends: list[float] | None = None
) -> list[dict]:
    """Each value just past its bar end (or its interval's end), on white so a baseline crossing it
    leaves it legible."""
    return [
        dict(
            x=end,
            xref="x",
            y=name,
            yref="y",
            xanchor="left",
            xshift=2 if end == acc else 5,
            text=f"{acc:.2f}",
            showarrow=False,
            font=dict(size=font_size),
            bgcolor="rgba(255,255,255,0.85)",
            borderpad=1,
        )
        for name, acc, end in zip(names, accuracies, ends or accuracies)
    ]


def _baselines(
    baselines: Mapping[str, float], font_size: int, plot_px: int, left: int, right: int
) -> tuple[list[dict], list[dict], int]:
    """Dashed lines with labels above the plot, and the number of label rows.

    A label is centred on its line, slid sideways to stay inside the figure,
    and moved up a row when it would come within half a character of a label
    already placed (its width estimated generously: a label drawn over
    another is unreadable, an extra row costs little).
    """
    lines: list[dict] = []
    notes: list[dict] = []
    row_ends: list[float] = []  # right edge (px) of the last label of each row
    order = sorted(baselines.items(), key=lambda item: item[1])
    styles = {name: i for i, name in enumerate(baselines)}
    for name, value in order:
        value, style = float(value), styles[name]
        colour = BASELINE_COLOURS[style % len(BASELINE_COLOURS)]
        shown = f"{name} {value:.2f}"  # as drawn: measure before escaping
        half = len(shown) * 0.65 * font_size / 2 + font_size / 4  # half-width of the label and a gap, px
        centre = value * plot_px
        shift = max(half - left - centre, min(0.0, plot_px + right - half - centre))  # px, keeps it in the figure
        row = next((i for i, end in enumerate(row_ends) if centre + shift - half > end), len(row_ends))
        if row == len(row_ends):
            row_ends.append(-np.inf)
        row_ends[row] = centre + shift + half
        lines.append(
            dict(
                type="line",
                xref="x",
                yref="paper",
                x0=value,
                x1=value,
                y0=0,
                y1=1,
                layer="above",
                line=dict(color=colour, width=3, dash=BASELINE_DASHES[style % len(BASELINE_DASHES)]),
            )
        )
        notes.append(
            dict(
                x=value,
                xref="x",
                y=1,
                yref="paper",
                yanchor="bottom",
                xshift=shift,
                yshift=4 + row * round(font_size * 1.5),
                text=escape(shown),
                showarrow=False,
                font=dict(color=colour, size=font_size),
            )
        )
    return lines, notes, max(1, len(row_ends))
