"""What the shape-flow diagram draws: each box's words (its operation and its shape), its outline, the
arrows between boxes, the legend of letters, and the invisible bars that make each box clickable.

A box holds the step's title (the operation), its symbolic shape and the real sizes; the operation in
words, the line of code and its whole ``path:lineno`` are in the box's hover (and the page's side panel),
never wrapped into the box.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

import plotly.graph_objects as go

from viz._style import HIGHLIGHT
from viz._text import escape
from viz.flow_layout import Box, lane

MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
LINE = 1.3  # plotly's line height, in font sizes
PAD = 0.65  # a box's inner padding, in font sizes
SANS_W, BOLD_W = 0.5, 0.56  # average glyph width, in font sizes (measured 0.45, 0.5)
FILL = 0.95  # share of a box's inner width that text may fill: slack for the glyph-width estimate
ARROW, MUTED, NO_MASK = "#64748b", "#64748b", "#94a3b8"
LANES = {  # outline, title colour
    "io": ("#475569", "#1e293b"),
    "q": ("#2563eb", "#1d4ed8"),
    "k": ("#d97706", "#b45309"),
    "v": ("#059669", "#047857"),
    "attn": ("#7c3aed", "#6d28d9"),
    "mask": ("#64748b", "#334155"),
}


@dataclass
class BoxText:
    lines: list[str]  # escaped plotly markup, one line each
    fs: int

    @property
    def height(self) -> float:
        return (len(self.lines) * LINE + 2 * PAD) * self.fs

    def annotation(self, b: Box) -> dict:
        return dict(
            xref="x",
            yref="y",
            xanchor="left",
            yanchor="top",
            align="left",
            showarrow=False,
            x=b.left + PAD * self.fs,
            y=b.top + PAD * self.fs,
            name=b.name,
            text="<br>".join(self.lines),
            font=dict(size=self.fs),
        )


def box_text(step, w: float, fs: int, S: int) -> BoxText:
    """The title (the operation), the symbolic shape and the real sizes, wrapped to the box's width."""
    inner = (w - 2 * PAD * fs) * FILL
    bold, sans = chars(inner, BOLD_W * fs), chars(inner, SANS_W * fs)
    colour = LANES[lane(step.name)][1]
    lines = [f'<b><span style="color:{colour}">{escape(s)}</span></b>' for s in wrap(step.title, bold)]
    if step.shape is None:
        shape = [f"None  ·  S\u00a0=\u00a0{S} keys"]
    else:
        symbolic, sizes = f"[{', '.join(step.dims)}]", " × ".join(map(str, step.shape))
        joined = f"{symbolic}  =  {sizes}"
        shape = [joined] if len(joined) <= bold else [symbolic, f"= {sizes}"]
    lines += [f"<b>{escape(s)}</b>" for line in shape for s in wrap(line, bold)]
    if step.shape is None:  # no tensor: the words say why (no mask, nothing dropped)
        lines += [f'<span style="color:{MUTED}">{escape(s)}</span>' for s in wrap(step.op, sans)]
    return BoxText(lines, fs)


def hover_text(step, head: int | None) -> str:
    """The box's hover: its operation in words, the checkpoint's weight, its code and its whole path."""
    whose = "" if head is None else f" of head {head}"
    parts = [f"<b>{escape(step.title)}</b>: click to show its tensor{whose}", escape(step.op)]
    if getattr(step, "weights", None):  # the checkpoint's own name for the weight (DistilBERT's q_lin …)
        parts.append(f"weights: {escape(step.weights)}")
    parts += [escape(line) for line in step.code.splitlines()]
    parts.append(escape(step.where))
    return "<br>".join(parts)


def chars(px: float, glyph_px: float) -> int:
    """How many glyphs of ``glyph_px`` fit in ``px`` (at least 4: a box is never narrower than that)."""
    return max(4, int(px / glyph_px))


def wrap(text: str, n: int) -> list[str]:
    """Lines of at most ``n`` characters, broken at spaces, or inside a word longer than that."""
    return textwrap.wrap(text, n) or [""]


def legend(trace, width: float, fs: int, head: int | None, stage: str) -> tuple[dict, int]:
    """The layer, the head, the stage and the sizes every letter stands for, for this input."""
    from attention.tracing.steps import LETTERS  # here, not at the top: `import viz` imports no torch

    sizes = trace.sizes()
    if sizes["G"] == sizes["H"]:
        del sizes["G"]
    first = f"<b>layer {trace.layer}</b>" + (f"  ·  <b>head {head}</b>" if head is not None else "")
    items = [stage] if stage else []
    items += [f"<b>{k} = {v}</b> {LETTERS[k]}" for k, v in sizes.items()]
    if len(trace.segments) > 1:
        items.append(f"sentence pair: <b>{' + '.join(map(str, trace.segments))}</b> tokens")
    lines, line, used = [], [first], drawn_chars(first)
    for item in items:
        size = drawn_chars(item) + 5 * SANS_W  # the item and its separator, as drawn
        if (used + size) * fs > width:
            lines.append(line)
            line, used = [], 0
        line.append(item)
        used += size
    lines.append(line)
    text = "<br>".join("  ·  ".join(parts) for parts in lines)
    note = dict(xref="x", yref="y", x=0.6 * fs, y=0.6 * fs, xanchor="left", yanchor="top", align="left")
    return dict(note, showarrow=False, text=text, font=dict(size=fs, color="#334155"), name="legend"), len(lines)


def drawn_chars(markup: str) -> float:
    """Width of a line of markup in font sizes: its bold parts at BOLD_W, the rest at SANS_W."""
    parts = re.split(r"</?b>", markup)  # odd parts are inside <b>…</b>
    return sum(len(re.sub(r"<[^>]+>", "", p)) * (BOLD_W if i % 2 else SANS_W) for i, p in enumerate(parts))


def box_shape(b: Box, step, selected: bool, fs: int) -> dict:
    outline = LANES[lane(b.name)][0]
    absent = step.shape is None
    line = (
        dict(color=HIGHLIGHT, width=max(3, fs / 4))
        if selected
        else dict(color=NO_MASK if absent else outline, width=max(1.5, fs / 9), dash="dash" if absent else "solid")
    )
    fill = "rgba(220,20,60,0.07)" if selected else ("white" if absent else tint(outline))
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


def tint(hex_colour: str, alpha: float = 0.07) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def hit_areas(trace, boxes: dict[str, Box], head: int | None, fs: int) -> go.Bar:
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
        hovertext=[hover_text(trace.step(n), head) for n in names],
        hovertemplate="%{hovertext}<extra></extra>",
        hoverlabel=dict(font=dict(family=MONO, size=max(13, round(fs * 0.8))), bgcolor="white", align="left"),
        selected=dict(marker=dict(opacity=0)),
        unselected=dict(marker=dict(opacity=0)),
        showlegend=False,
    )
