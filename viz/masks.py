"""Attention masks as two-colour grids: a padded batch, and the causal what-if.

Each colour is its own heatmap trace with its own hover wording and a
legend entry, so the figure reads without a colour scale.
"""

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._style import KEEP, PADDING, base_layout, clean_axis, legend_swatch
from viz._text import escape, escape_all, position_labels, shown_escaped
from viz.heatmap import FIGURE_PX, token_grid_layout

PAD = "[PAD]"
MIN_CELL_PX, MAX_CELL_PX, ROW_PX = 6, 28, 900
TEXT_CELLS = 32  # up to this many positions, cells are wide enough to show their token
CHAR_WIDTH = 0.62
TEXT_SCALE = 0.9  # tokens written in cells, relative to the font size
LEGEND = dict(x=1, xanchor="left", y=1, yanchor="top", itemclick=False, itemdoubleclick=False)
GAP_CELLS = 64  # up to this many positions, causal cells are drawn with a 1 px gap


def padding_mask_figure(
    mask: np.ndarray,
    row_labels: Sequence[str],
    tokens_per_row: Sequence[Sequence[str]],
    font_size: int = 14,
    *,
    title: str | None = None,
    width: int | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """A key padding mask ``[B, S]`` (1 keep, 0 padding), one row per batch item, at most ``width``
    px wide (default ``FIGURE_PX``).

    Rows are named by ``row_labels``, columns by position. Kept cells are
    blue, padding grey; hover reads "name · position j: piece" (the raw piece), with
    "[PAD]" on padding. A row's tokens may stop short of S (the rest is
    padding). Short batches show each token in its cell, as text (``readable``, half a character of a
    ``byte_level`` tokenizer's as its bytes), when the cells fit
    ``width``; otherwise cells are thin and the hover names them. Text is escaped;
    ``title`` is plotly markup.
    """
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"expected a mask [batch, seq], got shape {mask.shape}")
    n_rows, n_pos = mask.shape
    if len(row_labels) != n_rows or len(tokens_per_row) != n_rows:
        raise ValueError(f"{n_rows} mask rows but {len(row_labels)} labels and {len(tokens_per_row)} token rows")
    if any(len(tokens) > n_pos for tokens in tokens_per_row):
        raise ValueError(f"a row has more tokens than the mask's {n_pos} positions")
    kept = mask.astype(bool)
    raw = np.full((n_rows, n_pos), PAD, dtype=object)  # (B, S) each cell's piece, named in its hover
    shown = np.full((n_rows, n_pos), PAD, dtype=object)  # (B, S) the piece as text, written in its cell
    for b, tokens in enumerate(tokens_per_row):
        raw[b, : len(tokens)] = escape_all(tokens)
        shown[b, : len(tokens)] = shown_escaped(raw[b, : len(tokens)], byte_level)
    raw[~kept] = shown[~kept] = PAD
    names = escape_all(row_labels)
    hovers = np.array(
        [[f"{name} · position {j}: {token}" for j, token in enumerate(row)] for name, row in zip(names, raw)],
        dtype=object,
    )
    room = (FIGURE_PX if width is None else width) - _row_label_px(names, font_size) - _legend_px(font_size)
    with_text = n_pos <= TEXT_CELLS and _cell_width(shown, font_size) * n_pos <= room
    cell_w = _cell_width(shown, font_size) if with_text else max(1.0, min(_thin_cell(n_pos), room / n_pos))
    traces = [
        _mask_cells(kept, KEEP, hovers, shown if with_text else None, font_size, "white"),
        _mask_cells(~kept, PADDING, hovers, shown if with_text else None, font_size, "#555555"),
        legend_swatch("token", KEEP, KEEP, font_size),
        legend_swatch("padding", PADDING, PADDING, font_size),
    ]
    return go.Figure(traces, _padding_layout(names, n_pos, cell_w, with_text, title, font_size))


def _mask_cells(where: np.ndarray, colour: str, hovers, text, font_size: int, text_colour: str):
    """One colour of a mask: the cells ``where`` is true; the others are gaps."""
    cells = (
        dict(
            text=np.where(where, text, ""),  # heatmaps write text on gaps too
            texttemplate="%{text}",
            textfont=dict(size=round(font_size * TEXT_SCALE), color=text_colour),
        )
        if text is not None
        else {}
    )
    return go.Heatmap(
        z=np.where(where, 1.0, np.nan).astype(np.float32),
        colorscale=[[0, colour], [1, colour]],
        showscale=False,
        hovertext=np.where(where, hovers, ""),  # each cell's hover lives in one trace
        hovertemplate="%{hovertext}<extra></extra>",
        hoverongaps=False,
        xgap=1,
        ygap=1,
        **cells,
    )


def _cell_width(shown: np.ndarray, font_size: int) -> float:
    longest = max(len(html.unescape(str(t))) for t in shown.ravel())
    return max(MAX_CELL_PX, longest * font_size * TEXT_SCALE * CHAR_WIDTH + 12)


def _thin_cell(n_pos: int) -> float:
    return float(np.clip(ROW_PX / n_pos, MIN_CELL_PX, MAX_CELL_PX))


def _row_label_px(names: list[str], font_size: int) -> int:
    return int(max(len(html.unescape(n)) for n in names) * font_size * CHAR_WIDTH) + 14


def _legend_px(font_size: int) -> int:
    return 90 + int(len("padding") * font_size * CHAR_WIDTH)


def _padding_layout(names, n_pos, cell_w: float, with_text: bool, title, font_size: int) -> dict:
    n_rows = len(names)
    cell_h = max(font_size * 2.2, cell_w) if not with_text else font_size * 2.2
    stride = max(1, int(np.ceil(font_size * 2.2 / cell_w)))  # position labels that fit
    label_px, legend_px = _row_label_px(names, font_size), _legend_px(font_size)
    top = (int(font_size * 1.2 * 1.5) + 12 if title else 0) + font_size * 4
    layout = base_layout(font_size, title)
    layout.update(
        width=int(cell_w * n_pos) + label_px + legend_px,
        height=int(cell_h * n_rows) + top + 10,
        margin=dict(l=label_px, r=legend_px, t=top, b=10),
        legend=LEGEND,
        xaxis=clean_axis(
            tickmode="array",
            tickvals=list(range(0, n_pos, stride)),
            ticktext=[str(j) for j in range(0, n_pos, stride)],
            side="top",
            title=dict(text="position"),
            range=[-0.5, n_pos - 0.5],
        ),
        yaxis=clean_axis(
            tickmode="array",
            tickvals=list(range(n_rows)),
            ticktext=names,
            ticklabelstandoff=6,
            range=[n_rows - 0.5, -0.5],  # first batch item on top
        ),
    )
    return layout


def causal_mask_figure(
    L: int,
    tokens: Sequence[str],
    font_size: int = 14,
    *,
    title: str | None = None,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """The causal what-if mask ``[L, L]``: query i may attend to keys j <= i.

    Laid out like ``head_heatmap`` (queries down, keys along the top, one
    "token·i" category per position). Allowed cells are blue, masked
    (future) cells grey; hover reads "query·i → key·j: may attend" or
    "...: masked (future)". Each trace holds only its own triangle, as a
    ragged list, so the figure stays light at 512 tokens. At most ``width``
    px wide and ``height`` px tall, labels of at least ``min_label`` px, as ``head_heatmap`` (half a character of a
    ``byte_level`` tokenizer's as its bytes).
    """
    if len(tokens) != L:
        raise ValueError(f"{len(tokens)} tokens given for a causal mask over {L} positions")
    names = escape_all(tokens)
    labels = position_labels(names)
    gap = 1 if L <= GAP_CELLS else 0  # thin cells would be all gap
    allowed = go.Heatmap(  # row i: keys 0..i
        z=_ragged([i + 1 for i in range(L)], 1),
        x=labels,
        y=labels,
        **_one_colour(KEEP, "may attend", gap),
    )
    masked = go.Heatmap(  # transposed, column j: queries 0..j-1
        z=_ragged(list(range(L)), 0),
        transpose=True,
        x=labels,
        y=labels,
        **_one_colour(PADDING, "masked (future)", gap),
    )
    swatches = [
        legend_swatch("may attend", KEEP, KEEP, font_size),
        legend_swatch("masked (future)", PADDING, PADDING, font_size),
    ]
    layout = token_grid_layout(
        names,
        names,
        title,
        font_size,
        width,
        right=causal_legend_px(font_size),
        height=height,
        min_label=min_label,
        byte_level=byte_level,
    )
    layout.update(legend=LEGEND)  # a legend where head_heatmap has its colour bar
    return go.Figure([allowed, masked, *swatches], layout)


def causal_legend_px(font_size: int) -> int:
    """Right margin of the causal mask: its legend, where head_heatmap has its colour bar."""
    return 60 + int(len("masked (future)") * font_size * CHAR_WIDTH)


def _ragged(lengths: list[int], value: int) -> np.ndarray:
    """Rows of the given lengths filled with ``value``, as an object array of arrays.

    plotly takes such an array as it is, where a list of lists would be
    checked element by element (about 0.4 s at 512 tokens).
    """
    rows = np.empty(len(lengths), dtype=object)
    for i, n in enumerate(lengths):
        rows[i] = np.full(n, value, dtype=np.uint8)
    return rows


def _one_colour(colour: str, wording: str, gap: int) -> dict:
    return dict(
        colorscale=[[0, colour], [1, colour]],
        showscale=False,
        hovertemplate=f"%{{y}} → %{{x}}: {escape(wording)}<extra></extra>",
        hoverongaps=False,
        xgap=gap,
        ygap=gap,
    )
