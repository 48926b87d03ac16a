"""The arrows of the shape-flow diagram: down each lane, Q and K into the scores, the mask into the masked
scores, and V across into probs · V. An arrow whose two ends are not both in the stage drawn is left out."""

from __future__ import annotations

from viz._text import escape
from viz.flow_boxes import ARROW, LANES
from viz.flow_layout import Box

BEFORE = ("embedding", "embed_proj", "block_input", "input")


def connections(boxes: dict[str, Box], order: list[str], key_x: float, fs: int) -> tuple[list[dict], list[dict]]:
    """The lines and arrows (annotations) between the boxes drawn; ``order``: every step, as the forward ran
    them (each lane's arrows follow it)."""
    lines: list[dict] = []
    arrows: list[dict] = []

    def down(a: str, b: str, x: float | None = None, label: str = "", lane: str = "") -> None:
        if a in boxes and b in boxes:
            x = boxes[b].cx if x is None else x
            arrows.extend(arrow(x, boxes[a].bottom, x, boxes[b].top, fs, label, lane))

    before = [n for n in BEFORE if n in boxes]
    for a, b in zip(before, before[1:]):
        down(a, b)
    drawn = set()
    for lane in "qkv":
        source = "memory" if lane in "kv" and "memory" in boxes else "input"  # cross-attention: K, V from it
        chain = [source, "qkv_proj"] + sorted((n for n in boxes if n[:2] == f"{lane}_"), key=order.index)
        chain = [n for n in chain if n in boxes]
        for a, b in zip(chain, chain[1:]):
            if (a, b) not in drawn:  # input → qkv_proj is shared by the three lanes
                down(a, b)
                drawn.add((a, b))
        if not chain:
            continue
        if lane in "qk":
            down(chain[-1], "scores", boxes[chain[-1]].cx, "Q" if lane == "q" else "Kᵀ", lane)
        elif "heads" in boxes:
            lines.append(v_line(boxes[chain[-1]], boxes["heads"], fs))
            v, target = boxes[chain[-1]], boxes["heads"]
            arrows.extend(arrow(v.cx, target.cy, target.right, target.cy, fs, "V", "v"))
    chain = [n for n in ("scores", "c2p", "p2c", "softcap", "masked_scores", "probs") if n in boxes]
    for a, b in zip(chain, chain[1:]):
        down(a, b, key_x)  # under the K lane, clear of the mask box
    if "masked_scores" in boxes and "mask" in boxes:
        m, t = boxes["mask"], boxes["masked_scores"]
        arrows.extend(arrow(m.right, t.cy, t.left, t.cy, fs))
    for a, b in zip(("probs", "heads", "merged"), ("heads", "merged", "output")):
        down(a, b)
    return lines, arrows


def v_line(v: Box, target: Box, fs: int) -> dict:
    """V's line down its lane to the height of probs · V, where its arrow turns left."""
    return dict(
        type="line",
        xref="x",
        yref="y",
        x0=v.cx,
        x1=v.cx,
        y0=v.bottom,
        y1=target.cy,
        line=dict(color=ARROW, width=max(1.5, fs / 9)),
    )


def arrow(x0: float, y0: float, x1: float, y1: float, fs: int, label: str = "", lane: str = "") -> list[dict]:
    """An arrow from (x0, y0) to (x1, y1), with an optional label beside its middle."""
    head = dict(
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
        return [head]
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
    return [head, tag]
