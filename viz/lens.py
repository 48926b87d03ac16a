"""The Logit lens view's figure: what each layer would write next at each position, were it the last
(attention/analysis/lens.py), as a grid of layers × positions coloured by the top token's probability."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import SEQUENTIAL, TITLED_COLORBAR_PX, base_layout, clean_axis
from viz._text import SHOWN_BYTES, escape, escape_all, position_labels, readable, shown_escaped
from viz.heatmap import CHAR_WIDTH, FIGURE_PX, column_ticks, row_ticks

CELL_CHARS = 7  # a cell shows at most the top token's first 7 characters, fewer where its width holds fewer
MARK = "where the model commits"  # the first layer from which a position's final top token stays on top
HEIGHT_PX = 500  # the figure's height where none is given: the first screen of a laptop
MOST_SKIPPED = 10  # every k-th layer drawn, k at most this
ROW_EMS = 1.6  # a readable row: at least 1.6 × the type's size tall (its cell text at 70 % of the row, the mark)


def readable_every(n_layers: int, height: int, font_size: int) -> int:
    """The fewest layers skipped (every k-th drawn) so that each row of a `height` px lens is readable (ROW_EMS):
    1 where every layer fits. SmolLM2's 30 layers in the page's 500 px: every 2nd; presenting (22 px type), 3rd."""
    fits = max(1, int((height - 160) / (ROW_EMS * font_size)))
    return max(1, -(-n_layers // fits))


def drawn_layers(n_layers: int, every: int = 1, first: int = 0, last: int | None = None) -> list[int]:
    """The layers a lens draws: from `first` to `last` (the last layer by default), every `every`-th counted back
    from `last`, so that `last` (the model's own output where it is the last layer) is always drawn."""
    last = n_layers - 1 if last is None else last
    if not 0 <= first <= last < n_layers or every < 1:
        raise ValueError(f"layers {first} to {last}, every {every}: the model has {n_layers}")
    return list(range(last, first - 1, -every))[::-1]


def commit_layers(top_ids: np.ndarray) -> np.ndarray:
    """(L,) for each position, the first layer from which the top token is the last layer's at every later
    layer: where the model commits to what it writes. top_ids (n_layers, L)."""
    same = top_ids == top_ids[-1]  # (n_layers, L)
    # the last layer where it differs, plus one (0 where no layer differs)
    differs = ~same
    last_differs = np.where(differs.any(axis=0), top_ids.shape[0] - 1 - np.argmax(differs[::-1], axis=0), -1)
    return last_differs + 1


def lens_view(
    top_tokens: Sequence[Sequence[Sequence[str]]],
    top_ids: np.ndarray,
    probs: np.ndarray,
    tokens: Sequence[str],
    title: str = "Logit lens",
    *,
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
    byte_level: bool = False,
    layers: Sequence[int] | None = None,
) -> go.Figure:
    """Layers (rows, the last on top) × positions (columns, the input's tokens): each cell the top next token at
    that layer, its probability the colour; the hover lists the top ones with their probabilities. An open square
    marks each position's commit layer (`commit_layers`).

    top_tokens[layer][position][k] the raw pieces of the k-th candidate, top_ids and probs (n_layers, L, top).
    Pieces are shown as text (readable: half a character of a ``byte_level`` tokenizer's as its bytes) and escaped,
    the raw piece of each position named in the hover; ``title`` is plotly markup and is not escaped. At most
    ``width`` × ``height`` px (by default FIGURE_PX wide, 500 tall: the first screen of a laptop); axis labels of
    at least ``min_label`` px where given (fewer of them on small cells). ``layers`` (ascending; `drawn_layers`)
    draws those rows only, every layer's by default; a position's commit layer is found over every layer and
    marked on the first row drawn from it on, the hover naming it."""
    commit = commit_layers(top_ids[:, :, 0])  # over every layer, whichever are drawn
    picked = list(range(probs.shape[0])) if layers is None else list(layers)
    probs, top_tokens = probs[picked], [top_tokens[i] for i in picked]
    n_layers, L, top = probs.shape
    columns = position_labels(escape_all(tokens))  # the raw pieces, named in the hover
    shown = shown_escaped(escape_all(tokens), byte_level)
    rows = [f"layer {i}" for i in picked]
    width, height = width or FIGURE_PX, height or HEIGHT_PX
    row_px = int((height - 160) / max(n_layers, 1))  # about a row's height: the mark and the text fit its cell
    text_px = max(7, min(font_size - 3, int(row_px * 0.7)))
    chars = min(CELL_CHARS, int((width - 160) / max(L, 1) / (text_px * CHAR_WIDTH)))  # what a cell's width holds
    # cut as text, then escaped (never half an entity); the hover has each token whole, and the next ones
    cells = [[escape(cut(readable(top_tokens[i][j][0], byte_level), chars)) for j in range(L)] for i in range(n_layers)]
    hover = [
        [
            f"layer {picked[i]}, after {columns[j]}<br>"
            + "<br>".join(
                f"{k + 1}. {escape(readable(top_tokens[i][j][k], byte_level))!s}  {probs[i, j, k]:.3f}"
                for k in range(top)
            )
            for j in range(L)
        ]
        for i in range(n_layers)
    ]
    fig = go.Figure(
        go.Heatmap(
            z=probs[:, :, 0].astype(np.float32),
            x=columns,
            y=rows,
            text=cells,
            texttemplate="%{text}",
            textfont=dict(size=text_px),
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
            zmin=0.0,
            zmax=1.0,
            colorscale=SEQUENTIAL,
            colorbar=dict(title="top p", thickness=12, x=1.0 + TITLED_COLORBAR_PX / width),
        )
    )
    marked = [bisect_left(picked, c) for c in commit]  # the first row drawn at or past each commit layer
    fig.add_trace(
        go.Scatter(
            x=columns,
            y=[rows[i] if i < n_layers else None for i in marked],  # none where the range ends before it
            customdata=commit.tolist(),
            mode="markers",
            name=MARK,
            marker=dict(
                symbol="square-open", size=max(6, min(font_size + 4, row_px)), color="#d62728", line=dict(width=2)
            ),
            hovertemplate=f"{MARK}: layer %{{customdata}}<extra></extra>",
            showlegend=False,
        )
    )
    ticks = column_ticks(shown, (width - 160) / max(L, 1), font_size, min_label)
    side = row_ticks(rows, (height - 160) / max(n_layers, 1), font_size, min_label)
    fig.update_layout(
        **base_layout(font_size, title),
        width=width,
        height=height,
        xaxis=clean_axis(
            title="position (the token read; each cell: what comes next)",
            tickmode="array",
            tickvals=columns[:: ticks.stride],
            ticktext=shown[:: ticks.stride],
            tickfont=dict(size=ticks.size),
            tickangle=ticks.angle,
        ),
        yaxis=clean_axis(tickmode="array", tickvals=rows[:: side.stride], tickfont=dict(size=side.size)),
    )
    return fig


def cut(text: str, chars: int) -> str:
    """`text`'s first `chars` characters; a group of bytes cut short ends in "…", so it still reads as bytes
    (" <0xF0…")."""
    within = [group for group in SHOWN_BYTES.finditer(text) if group.start() < chars < group.end()]
    return text[:chars].rstrip() + "…" if within else text[:chars]
