"""The shape-flow diagram: one attention layer's steps for this input, drawn from its Trace.

Every box's text (title, symbolic shape, real sizes, operation, code and ``path:lineno``) is
read from the recorded forward pass. Coordinates are pixels at the design ``width``, y down.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from viz._style import HIGHLIGHT, SEQUENTIAL, TITLE_GLYPH, base_layout, clean_axis
from viz._text import escape, escape_all, position_labels
from viz.heatmap import FIGURE_PX, MIN_CELL_PX, row_ticks

WIDTH = 720  # widest layout in px at font size 14, scaled with the font; narrower when less room is given
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
LINE = 1.3  # plotly's line height, in font sizes
SANS_W, BOLD_W, MONO_W = 0.5, 0.56, 0.61  # average glyph width, in font sizes (measured 0.45, 0.5, 0.60)
FILL = 0.95  # share of a box's inner width that text may fill: slack for the glyph-width estimate
MIN_CODE_CHARS = 16  # below this many code characters a line, the lanes are too narrow to read
ARROW, MUTED, NO_MASK = "#64748b", "#64748b", "#94a3b8"
LANES = {  # outline, title colour
    "io": ("#475569", "#1e293b"),
    "q": ("#2563eb", "#1d4ed8"),
    "k": ("#d97706", "#b45309"),
    "v": ("#059669", "#047857"),
    "attn": ("#7c3aed", "#6d28d9"),
    "mask": ("#64748b", "#334155"),
}
DIVERGING = "RdBu_r"
EMPTY = "#d1d5db"  # cells of −∞ (dropped by the mask)


@dataclass
class Box:
    name: str
    cx: float
    top: float
    w: float
    h: float = 0.0

    @property
    def left(self) -> float:
        return self.cx - self.w / 2

    @property
    def right(self) -> float:
        return self.cx + self.w / 2

    @property
    def bottom(self) -> float:
        return self.top + self.h

    @property
    def cy(self) -> float:
        return self.top + self.h / 2


def shape_flow(trace, selected: str | None = None, font_size: int = 14, width: int | None = None) -> go.Figure:
    """One layer's attention as boxes from top to bottom; click a box to select its step.

    Each box has one invisible bar exactly covering it, with ``customdata=[step name]``, so a
    click anywhere in the box selects that step. ``selected`` is outlined in the highlight colour.
    ``width`` (px) is the most the figure may take; it is laid out for that, or for ``WIDTH``
    (scaled with ``font_size``) when that is less. Text wraps within its box, and a source path
    too long for it is shortened, in full in the box's hover.
    """
    fs = font_size
    width = min(design_width(fs), width or design_width(fs))
    legend, legend_lines = _legend(trace, width - fs, fs)
    rows, key_x = _rows(trace, width, fs)
    texts = {b.name: _box_text(trace.step(b.name), b.w, fs, trace.S) for row in rows for b in row}
    y = fs * (0.6 + LINE * legend_lines) + fs
    for row in rows:
        h = max(texts[b.name].height for b in row)
        for b in row:
            b.top, b.h = y, h
        y += h + 2.6 * fs
    height = y - 1.6 * fs
    boxes = {b.name: b for row in rows for b in row}

    shapes, annotations = [], [legend]
    for b in boxes.values():
        shapes.append(_box_shape(b, trace.step(b.name), b.name == selected, fs))
        annotations += texts[b.name].annotations(b, fs)
    lines, arrows = _connections(boxes, key_x, fs)
    shapes += lines
    annotations += arrows
    layout = base_layout(fs)
    layout.update(
        width=width,
        height=int(height),
        margin=dict(l=0, r=0, t=0, b=0),
        showlegend=False,
        xaxis=dict(range=[0, width], visible=False, fixedrange=True),
        yaxis=dict(range=[height, 0], visible=False, fixedrange=True),
        plot_bgcolor="white",
        paper_bgcolor="white",
        dragmode=False,
        hovermode="closest",
        barmode="overlay",
        shapes=shapes,
        annotations=annotations,
    )
    return go.Figure(_hit_areas(trace, boxes), layout)


def design_width(font_size: int) -> int:
    """The width the diagram takes when it has room: ``WIDTH`` scaled with the font."""
    return round(WIDTH * font_size / 14)


def min_width(font_size: int) -> int:
    """The narrowest width at which a lane's code still gets ``MIN_CODE_CHARS`` a line (``_rows``,
    ``_box_text`` solved for the width); a narrower column is no place for the diagram."""
    fs = font_size
    lane = MIN_CODE_CHARS * MONO_W * _code_fs(fs) / FILL + 1.3 * fs
    return int(np.ceil(3 * lane + 2 * 0.6 * fs + 2 * 1.8 * fs))


# ---- where the boxes go ----------------------------------------------------------------------


def _rows(trace, width: float, fs: int) -> tuple[list[list[Box]], float]:
    """Lanes Q, K, V side by side; the attention itself under Q and K; V joins at probs · V."""
    outer, gap = 0.6 * fs, 1.8 * fs
    cw = (width - 2 * outer - 2 * gap) / 3
    c = [outer + cw / 2 + i * (cw + gap) for i in range(3)]
    left, right = c[0] - cw / 2, c[2] - 1.5 * gap  # the attention boxes stop short of V's line
    mid, wide, full = (left + right) / 2, right - left, 3 * cw + 2 * gap
    pair = (c[1] - cw / 2 + right) / 2, right - (c[1] - cw / 2)  # masked scores, beside the mask
    plan = [
        *[[(name, c[1], full)] for name in ("embedding", "embed_proj", "block_input")],  # ELECTRA, pre-norm
        [("input", c[1], full)],
        [("qkv_proj", c[1], full)],  # a fused projection (GPT-2's c_attn), cut into Q, K and V below
        *[[(f"{x}_{part}", c[i], cw) for i, x in enumerate("qkv")] for part in ("proj", "view", "heads")],
        [("q_norm", c[0], cw), ("k_norm", c[1], cw)],  # RMSNorm on queries and keys (Qwen3, OLMo2)
        [("q_rot", c[0], cw), ("k_rot", c[1], cw)],  # rotary positions (Llama)
        [("k_shared", c[1], cw), ("v_shared", c[2], cw)],
        [("scores", mid, wide)],
        [("mask", c[0], cw), ("masked_scores", *pair)],
        *[[(name, mid, wide)] for name in ("probs", "heads", "merged", "output")],
    ]
    placed = {name for row in plan for name, _, _ in row}
    plan += [[(name, mid, wide)] for name in trace.names if name not in placed]  # steps added later
    rows = [[Box(name, x, 0.0, w) for name, x, w in row if name in trace.names] for row in plan]
    return [row for row in rows if row], c[1]


def _lane(name: str) -> str:
    if name in ("embedding", "embed_proj", "block_input", "input", "qkv_proj", "merged", "output"):
        return "io"
    if name == "mask":
        return "mask"
    return name[0] if name[:2] in ("q_", "k_", "v_") else "attn"


# ---- what each box says ----------------------------------------------------------------------


@dataclass
class BoxText:
    header: list[str]  # escaped plotly markup, one line each
    code: list[str]
    fs: int

    @property
    def code_fs(self) -> int:
        return _code_fs(self.fs)

    @property
    def header_h(self) -> float:
        return len(self.header) * LINE * self.fs

    @property
    def height(self) -> float:
        return self.fs * 1.3 + self.header_h + 0.35 * self.fs + len(self.code) * LINE * self.code_fs

    def annotations(self, b: Box, fs: int) -> list[dict]:
        pad = 0.65 * fs
        common = dict(
            xref="x",
            yref="y",
            xanchor="left",
            yanchor="top",
            align="left",
            showarrow=False,
            x=b.left + pad,
            name=b.name,
        )
        return [
            dict(common, y=b.top + 0.55 * fs, text="<br>".join(self.header), font=dict(size=fs)),
            dict(
                common,
                y=b.top + 0.55 * fs + self.header_h + 0.35 * fs,
                text="<br>".join(self.code),
                font=dict(size=self.code_fs, family=MONO, color="#1f2937"),
            ),
        ]


def _box_text(step, w: float, fs: int, S: int) -> BoxText:
    inner = (w - 1.3 * fs) * FILL
    sans, bold = _chars(inner, SANS_W * fs), _chars(inner, BOLD_W * fs)
    colour = LANES[_lane(step.name)][1]
    header = [f'<b><span style="color:{colour}">{escape(s)}</span></b>' for s in _wrap(step.title, bold)]
    if step.shape is None:
        shape = [f"None  ·  S\u00a0=\u00a0{S} keys"]
    else:
        symbolic, sizes = f"[{', '.join(step.dims)}]", " × ".join(map(str, step.shape))
        joined = f"{symbolic}  =  {sizes}"
        shape = [joined] if len(joined) <= bold else [symbolic, f"= {sizes}"]
    header += [f"<b>{escape(s)}</b>" for line in shape for s in _wrap(line, bold)]
    header += [f'<span style="color:{MUTED}">{escape(s)}</span>' for s in _wrap(step.op, sans)]
    if getattr(step, "weights", None):  # the checkpoint's own name for the weight (DistilBERT's q_lin …)
        header += [f'<span style="color:{MUTED}">{escape(s)}</span>' for s in _wrap(f"weights: {step.weights}", sans)]
    chars = _chars(inner, MONO_W * _code_fs(fs))
    code = [escape(part) for line in step.code.splitlines() for part in wrap_code(line, chars)]
    code += [f'<span style="color:{MUTED}">{escape(shorten_path(step.where, chars))}</span>']
    return BoxText(header, code, fs)


def _chars(px: float, glyph_px: float) -> int:
    """How many glyphs of ``glyph_px`` fit in ``px`` (at least 4: a box is never narrower than that)."""
    return max(4, int(px / glyph_px))


def _wrap(text: str, chars: int) -> list[str]:
    """Lines of at most ``chars`` characters, broken at spaces, or inside a word longer than that."""
    return textwrap.wrap(text, chars) or [""]


def shorten_path(where: str, chars: int) -> str:
    """``path:lineno`` in at most ``chars`` characters: the start of the path gives way to "…"."""
    return where if len(where) <= chars else "…" + where[len(where) - chars + 1 :]


def _code_fs(fs: int) -> int:
    return max(10, round(fs * 0.82))


def wrap_code(line: str, chars: int) -> list[str]:
    """Break a code line at ", ", " if "/" else " or after "(" so each piece fits ``chars``.

    Continuation lines are indented by two no-break spaces (plotly collapses plain spaces).
    """
    indent = "\u00a0\u00a0"
    pieces, rest, first = [], line, True
    chars = max(chars, len(indent) + 2)
    while len(rest) + (0 if first else len(indent)) > chars:
        limit = chars - (0 if first else len(indent))
        cut = max(
            rest.rfind(", ", 0, limit) + 2,
            rest.rfind(" if ", 0, limit) + 1,
            rest.rfind(" else ", 0, limit) + 1,
            rest.rfind("(", 0, limit) + 1,
        )
        if cut <= 2:
            cut = limit
        pieces.append(("" if first else indent) + rest[:cut].rstrip())
        rest, first = rest[cut:].lstrip(), False
    pieces.append(("" if first else indent) + rest)
    return pieces


def _legend(trace, width: float, fs: int) -> tuple[dict, int]:
    """The sizes every letter stands for, for this input."""
    from attention.steps import LETTERS  # here, not at the top: `import viz` imports no torch

    sizes = trace.sizes()
    if sizes["G"] == sizes["H"]:
        del sizes["G"]
    items = [f"<b>{k} = {v}</b> {LETTERS[k]}" for k, v in sizes.items()]
    if len(trace.segments) > 1:
        items.append(f"sentence pair: <b>{' + '.join(map(str, trace.segments))}</b> tokens")
    lines, line, used = [], [f"<b>layer {trace.layer}</b>"], _drawn_chars(f"<b>layer {trace.layer}</b>")
    for item in items:
        chars = _drawn_chars(item) + 5 * SANS_W  # the item and its separator, as drawn
        if (used + chars) * fs > width:
            lines.append(line)
            line, used = [], 0
        line.append(item)
        used += chars
    lines.append(line)
    text = "<br>".join("  ·  ".join(parts) for parts in lines)
    return dict(
        xref="x",
        yref="y",
        x=0.6 * fs,
        y=0.6 * fs,
        xanchor="left",
        yanchor="top",
        align="left",
        showarrow=False,
        text=text,
        font=dict(size=fs, color="#334155"),
        name="legend",
    ), len(lines)


def _drawn_chars(markup: str) -> float:
    """Width of a line of markup in font sizes: its bold parts at BOLD_W, the rest at SANS_W."""
    parts = re.split(r"</?b>", markup)  # odd parts are inside <b>…</b>
    return sum(len(re.sub(r"<[^>]+>", "", p)) * (BOLD_W if i % 2 else SANS_W) for i, p in enumerate(parts))


# ---- drawing ---------------------------------------------------------------------------------


def _box_shape(b: Box, step, selected: bool, fs: int) -> dict:
    outline = LANES[_lane(b.name)][0]
    absent = step.shape is None
    line = (
        dict(color=HIGHLIGHT, width=max(3, fs / 4))
        if selected
        else dict(color=NO_MASK if absent else outline, width=max(1.5, fs / 9), dash="dash" if absent else "solid")
    )
    fill = "rgba(220,20,60,0.07)" if selected else ("white" if absent else _tint(outline))
    return dict(
        type="rect",
        xref="x",
        yref="y",
        x0=b.left,
        x1=b.right,
        y0=b.top,
        y1=b.bottom,
        line=line,
        fillcolor=fill,
        layer="below",
        name=b.name,
    )


def _tint(hex_colour: str, alpha: float = 0.07) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _connections(boxes: dict[str, Box], key_x: float, fs: int) -> tuple[list[dict], list[dict]]:
    """Arrows between boxes; V's arrow turns left into probs · V, as a line and an arrow."""
    lines, arrows = [], []

    def down(a: str, b: str, x: float | None = None, label: str = "", lane: str = "") -> None:
        if a in boxes and b in boxes:
            x = boxes[b].cx if x is None else x
            arrows.extend(_arrow(x, boxes[a].bottom, x, boxes[b].top, fs, label, lane))

    before: list[str] = [n for n in ("embedding", "embed_proj", "block_input", "input") if n in boxes]
    for a, b in zip(before, before[1:]):
        down(a, b)
    drawn = set()
    for lane in "qkv":
        parts = ("proj", "view", "heads", "rot", "shared")  # rot: rotary positions (Llama), before any sharing
        chain = [n for n in ["input", "qkv_proj"] + [f"{lane}_{p}" for p in parts] if n in boxes]
        for a, b in zip(chain, chain[1:]):
            if (a, b) not in drawn:  # input → qkv_proj is shared by the three lanes
                down(a, b)
                drawn.add((a, b))
        if lane in "qk":
            down(chain[-1], "scores", boxes[chain[-1]].cx, "Q" if lane == "q" else "Kᵀ", lane)
        elif "heads" in boxes:
            v, target = boxes[chain[-1]], boxes["heads"]
            lines.append(
                dict(
                    type="line",
                    xref="x",
                    yref="y",
                    x0=v.cx,
                    x1=v.cx,
                    y0=v.bottom,
                    y1=target.cy,
                    line=dict(color=ARROW, width=max(1.5, fs / 9)),
                )
            )
            arrows.extend(_arrow(v.cx, target.cy, target.right, target.cy, fs, "V", "v"))
    chain = [n for n in ("scores", "masked_scores", "probs") if n in boxes]
    for a, b in zip(chain, chain[1:]):
        down(a, b, key_x)  # under the K lane, clear of the mask box
    if "masked_scores" in boxes and "mask" in boxes:
        m, t = boxes["mask"], boxes["masked_scores"]
        arrows.extend(_arrow(m.right, t.cy, t.left, t.cy, fs))
    for a, b in zip(("probs", "heads", "merged"), ("heads", "merged", "output")):
        down(a, b)
    return lines, arrows


def _arrow(x0: float, y0: float, x1: float, y1: float, fs: int, label: str = "", lane: str = "") -> list[dict]:
    """An arrow from (x0, y0) to (x1, y1), with an optional label beside its middle."""
    arrow = dict(
        xref="x",
        yref="y",
        axref="x",
        ayref="y",
        x=x1,
        y=y1,
        ax=x0,
        ay=y0,
        text="",
        showarrow=True,
        arrowhead=2,
        arrowsize=1.1,
        arrowwidth=max(1.5, fs / 9),
        arrowcolor=ARROW,
        standoff=1,
    )
    if not label:
        return [arrow]
    vertical = x0 == x1
    tag = dict(
        xref="x",
        yref="y",
        x=(x0 + x1) / 2 + (0.4 * fs if vertical else 0),
        y=(y0 + y1) / 2 - (0 if vertical else 0.3 * fs),
        xanchor="left" if vertical else "center",
        yanchor="middle" if vertical else "bottom",
        showarrow=False,
        text=f"<b>{escape(label)}</b>",
        font=dict(size=fs, color=LANES[lane][1]),
    )
    return [arrow, tag]


def _hit_areas(trace, boxes: dict[str, Box]) -> go.Bar:
    """One invisible bar per box, exactly covering it: clicks anywhere in the box select it."""
    names = list(boxes)
    return go.Bar(
        orientation="h",
        y=[boxes[n].cy for n in names],
        x=[boxes[n].w for n in names],
        base=[boxes[n].left for n in names],
        width=[boxes[n].h for n in names],
        customdata=[[n] for n in names],
        marker=dict(color="rgba(0,0,0,0)", line=dict(width=0)),
        hovertext=[
            f"{escape(trace.step(n).title)}: click to show its tensor<br>{escape(trace.step(n).where)}" for n in names
        ],
        hovertemplate="%{hovertext}<extra></extra>",
        selected=dict(marker=dict(opacity=0)),
        unselected=dict(marker=dict(opacity=0)),
        showlegend=False,
    )


# ---- the tensor of one box -------------------------------------------------------------------


def tensor_heatmap(
    matrix: np.ndarray,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str | None = None,
    font_size: int = 14,
    kind: str = "values",
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
) -> go.Figure:
    """One 2-D slice of a recorded tensor; rows top to bottom; ``width`` px wide (default ``FIGURE_PX``)
    and, when ``height`` is given, at most that tall (rows thin to fit it). With ``min_label`` (a
    presentation) every row is labelled whose label fits at ``min_label`` px or more, as the head
    view decides (``viz.heatmap.row_ticks``). A title too wide for ``width`` breaks after its commas,
    and a part still too wide is set smaller (never under ``min_label``, or 12 px).

    ``kind="values"``: a diverging scale centred on 0 (Q, K, V, scores, outputs);
    ``kind="probs"``: a sequential [0, 1] scale (probabilities, the mask). −∞ (masked scores)
    is drawn as an empty grey cell, named in the colour bar's title. Labels default to indexes
    "0".."n-1"; each row and column is its own category "label·i", so repeated tokens keep their own
    row or column and the hover names both. Labels are thinned for the cells' width and height, so
    no two touch. Nothing is sent per cell but the value (float32, base64 in the JSON): a 512 × 512
    map stays about 1 MB.
    """
    if kind not in ("values", "probs"):
        raise ValueError(f'kind must be "values" or "probs", got {kind!r}')
    raw = np.asarray(matrix, dtype=float)
    if raw.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {raw.shape}")
    n_rows, n_cols = raw.shape
    rows = escape_all(row_labels) if row_labels is not None else [str(i) for i in range(n_rows)]
    cols = escape_all(col_labels) if col_labels is not None else [str(i) for i in range(n_cols)]
    if (len(rows), len(cols)) != raw.shape:
        raise ValueError(f"matrix {raw.shape} does not match {len(rows)} row and {len(cols)} column labels")
    dropped = np.isneginf(raw)
    z = np.where(dropped, np.nan, raw).astype(np.float32)  # 4 bytes a cell; −∞ an empty cell
    row_cats, col_cats = position_labels(rows), position_labels(cols)
    heatmap = go.Heatmap(
        z=z,
        x=col_cats,
        y=row_cats,
        hoverongaps=False,
        hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>",
        colorbar=dict(thickness=14, title=dict(text=_legend_title(kind, bool(dropped.any())))),
        **_colour_scale(z, kind),
    )
    width = FIGURE_PX if width is None else width
    left, right = tensor_margins(rows, font_size)
    x_ticks = _ticks(cols, width - left - right, font_size, across=True, categories=col_cats)
    row_px = min(28.0, max(3.0, 700 / n_rows))
    lines, title_size = fitted_title(title, width, font_size, min_label) if title else ([], 0)
    top = (title_size * 1.35 * len(lines) + 0.6 * font_size if title else 0) + x_ticks.pop("label_px") + 10
    if height is not None:
        row_px = max(1.0, min(row_px, (height - top - 20) / n_rows))
    layout = base_layout(font_size, "<br>".join(escape(line) for line in lines) if title else None)
    if title:
        # plotly sets each line of a title of several lines at its own baseline, and puts the first on the
        # anchor (a one-line title hangs from it): lower it by a line's ascent, or its top is cut off
        layout["title"].update(
            font={"size": title_size},
            x=0,
            xref="container",
            automargin=False,
            pad={"t": 8 + (title_size if len(lines) > 1 else 0), "l": 8},
        )
    if min_label is None:
        y_ticks = _ticks(rows, n_rows * row_px, font_size, across=False, categories=row_cats)
        y_ticks.pop("label_px")
    else:
        fit = row_ticks(rows, row_px, font_size, min_label)
        y_ticks = {
            "tickmode": "array",
            "tickvals": row_cats[:: fit.stride],
            "ticktext": rows[:: fit.stride],
            "tickfont": {"size": fit.size},
            "range": [n_rows - 0.5, -0.5],
        }
    layout.update(
        width=width,
        height=int(n_rows * row_px + top + 20),
        margin=dict(l=left, r=right, t=int(top), b=10),
        plot_bgcolor=EMPTY,  # shows through the empty (−∞) cells only
        xaxis=clean_axis(side="top", type="category", **x_ticks),
        yaxis=clean_axis(type="category", **y_ticks),
    )
    return go.Figure(heatmap, layout)


def fitted_title(title: str, width: int, font_size: int, min_label: int | None = None) -> tuple[list[str], int]:
    """A title's lines (unescaped) and font size for a figure ``width`` px wide: broken after its
    commas where a line would not fit, and set smaller while its widest part does not."""
    size = round(font_size * 1.2)
    room = max(1, (width - 24) / (size * TITLE_GLYPH))
    lines: list[str] = []
    for part in title.split(", "):
        if lines and len(lines[-1]) + 2 + len(part) <= room:
            lines[-1] += ", " + part
        else:
            lines.append(part)
    if len(lines) > 1:
        lines = [line + ("," if k < len(lines) - 1 else "") for k, line in enumerate(lines)]
    widest = max(len(line) for line in lines)
    if widest > room:
        size = max(min_label or 12, int((width - 24) / (widest * TITLE_GLYPH)))
    return lines, size


def tensor_margins(row_labels: Sequence[str], font_size: int) -> tuple[int, int]:
    """Left margin (the row labels) and right margin (the colour bar and its title) in px."""
    longest = max((len(html.unescape(s)) for s in row_labels), default=1)
    return int(longest * 0.62 * font_size) + 20, int(font_size * 4.5) + 25


def tensor_fits(tokens: Sequence[str], font_size: int, width: int) -> bool:
    """Whether a token × token tensor keeps columns of at least ``MIN_CELL_PX`` in ``width`` px."""
    left, right = tensor_margins(escape_all(tokens), font_size)
    return (width - left - right) / max(len(tokens), 1) >= MIN_CELL_PX


def _colour_scale(z: np.ndarray, kind: str) -> dict:
    if kind == "probs":
        return dict(colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0)
    bound = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 0.0
    bound = bound or 1.0
    return dict(colorscale=DIVERGING, zmid=0.0, zmin=-bound, zmax=bound)


def _legend_title(kind: str, dropped: bool) -> str:
    return ("weight" if kind == "probs" else "value") + ("<br>grey: −∞" if dropped else "")


def _ticks(labels: list[str], px: float, fs: int, across: bool, categories: list[str] | None = None) -> dict:
    """Positions labelled every k-th (k = 1, 2, 5, 10, 20...) so labels do not collide; the tick
    values are the axis's `categories` when it has them, else integer positions.

    Row labels are stacked; column labels stand side by side when short (indexes) and are
    tilted when long (tokens), so each needs about one line height.
    """
    longest = max((len(html.unescape(s)) for s in labels), default=1)
    tilted = across and longest > 3
    # flat: the label's width; tilted by 45°: neighbours' gap across the text is spacing · sin 45°,
    # which must hold a line; stacked rows: one line
    per_label = (longest * 0.62 + 0.8) * fs if across and not tilted else (1.75 if tilted else 1.3) * fs
    room = max(1.0, px / per_label)
    stride = next(k for k in (m * 10**e for e in range(7) for m in (1, 2, 5)) if len(labels) / k <= room)
    positions = list(range(0, len(labels), stride))
    end = len(labels) - 0.5
    label_px = (longest * 0.62 * 0.71 + 1.2) * fs if tilted else 1.5 * fs  # height taken above the cells
    values = positions if categories is None else [categories[i] for i in positions]
    return dict(
        tickmode="array",
        tickvals=values,
        ticktext=[labels[i] for i in positions],
        tickangle=-45 if tilted else 0,
        range=[-0.5, end] if across else [end, -0.5],
        label_px=label_px,
    )
