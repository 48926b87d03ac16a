"""Where the shape-flow diagram's boxes go: lanes Q, K and V side by side, the attention itself under Q
and K, one row per step, and the rows cut into stages that each fit a screen.

Coordinates are pixels at the figure's width, y down.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTER, GAP = 0.6, 1.8  # the figure's side margin and the gap between lanes, in font sizes
ROW_GAP = 2.0  # between two rows of boxes, in font sizes: room for an arrow and its label
IO = ("embedding", "embed_proj", "block_input", "input", "memory", "qkv_proj", "merged", "output")


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


def lane_centres(width: float, fs: int) -> list[float]:
    """The x of the Q, K and V lanes' centres."""
    cw = lane_width(width, fs)
    return [OUTER * fs + cw / 2 + i * (cw + GAP * fs) for i in range(3)]


def lane_width(width: float, fs: int) -> float:
    return (width - 2 * OUTER * fs - 2 * GAP * fs) / 3


def rows_of(names: list[str], width: float, fs: int) -> list[list[Box]]:
    """The boxes of the steps ``names``, row by row, in the order the data flows (top to bottom)."""
    cw = lane_width(width, fs)
    c = lane_centres(width, fs)
    left, right = c[0] - cw / 2, c[2] - 1.5 * GAP * fs  # the attention boxes stop short of V's line
    mid, wide, full = (left + right) / 2, right - left, 3 * cw + 2 * GAP * fs
    pair = (c[1] - cw / 2 + right) / 2, right - (c[1] - cw / 2)  # masked scores, beside the mask
    kv = (c[1] + c[2]) / 2, 2 * cw + GAP * fs  # the encoder's output, over the K and V lanes
    parts = ["proj", "view", "heads"]  # RMSNorm on queries and keys where the forward took it (OLMo2, Qwen3)
    parts.insert(parts.index("heads") + 1 if norm_per_head(names) else 1, "norm")
    plan = [
        *[[(name, c[1], full)] for name in ("embedding", "embed_proj", "block_input")],  # ELECTRA, pre-norm
        [("input", c[0], cw), ("memory", *kv)] if "memory" in names else [("input", c[1], full)],  # cross-attention
        [("qkv_proj", c[1], full)],  # a fused projection (GPT-2's c_attn), cut into Q, K and V below
        *[[(f"{x}_{part}", c[i], cw) for i, x in enumerate("qkv")] for part in parts],
        [("q_rot", c[0], cw), ("k_rot", c[1], cw)],  # rotary positions (Llama)
        [("k_shared", c[1], cw), ("v_shared", c[2], cw)],
        *[[(name, mid, wide)] for name in ("scores", "c2p", "p2c", "softcap")],  # DeBERTa's terms, Gemma2's cap
        [("mask", c[0], cw), ("masked_scores", *pair)],
        *[[(name, mid, wide)] for name in ("probs", "heads", "merged", "output")],
    ]
    placed = {name for row in plan for name, _, _ in row}
    plan += [[(name, mid, wide)] for name in names if name not in placed]  # steps added later
    rows = [[Box(name, x, 0.0, w) for name, x, w in row if name in names] for row in plan]
    return [row for row in rows if row]


def norm_per_head(names: list[str]) -> bool:
    """Whether Q is normalised after its split into heads (Qwen3), not before (OLMo2); ``names`` in order."""
    return "q_norm" in names and names.index("q_norm") > names.index("q_heads")


def lane(name: str) -> str:
    """The lane a step belongs to, for its colours: io, q, k, v, attn or mask."""
    if name in IO:
        return "io"
    if name == "mask":
        return "mask"
    return name[0] if name[:2] in ("q_", "k_", "v_") else "attn"


def place(rows: list[list[Box]], heights: dict[str, float], top: float, fs: int) -> float:
    """Set each box's top and height, row under row from ``top``; returns the bottom of the last row."""
    y = top
    for row in rows:
        h = max(heights[b.name] for b in row)
        for b in row:
            b.top, b.h = y, h
        y += h + ROW_GAP * fs
    return y - ROW_GAP * fs


def stages(rows: list[list[Box]], heights: dict[str, float], room: float | None, fs: int) -> list[list[list[Box]]]:
    """The rows cut into stages, each at most ``room`` px of rows tall (every row in one stage without it).

    A row never splits; a row taller than ``room`` is a stage of its own. As few stages as a greedy cut
    makes, with the rows spread evenly over them: the tallest stage as short as it can be (so the last is
    not left with a single box), then the stages' heights as even as they can be."""
    if room is None:
        return [rows]
    tall = [max(heights[b.name] for b in row) for row in rows]
    count = len(greedy_cut(tall, room, fs))
    return [rows[a:b] for a, b in balanced_cut(tall, room, fs, count)]


def greedy_cut(tall: list[float], room: float, fs: int) -> list[tuple[int, int]]:
    """Rows of heights ``tall`` as (first, end) index ranges, each stage filled before the next starts."""
    cut: list[tuple[int, int]] = []
    start, used = 0, 0.0
    for i, h in enumerate(tall):
        if i > start and used + h > room:
            cut.append((start, i))
            start, used = i, 0.0
        used += h + ROW_GAP * fs
    return cut + [(start, len(tall))] if tall else [(0, 0)]


def balanced_cut(tall: list[float], room: float, fs: int, count: int) -> list[tuple[int, int]]:
    """The rows in ``count`` stages of consecutive rows, each fitting ``room`` (or a single row), with the
    tallest stage as short as it can be and then the sum of the stages' squared heights the least."""
    n, gap = len(tall), ROW_GAP * fs
    if n <= 1 or count <= 1:
        return [(0, n)]

    def cost(a: int, b: int) -> float:
        h = sum(tall[a:b]) + gap * (b - a - 1)
        return h if h <= room or b - a == 1 else float("inf")

    inf = (float("inf"), float("inf"))
    # best[j][i]: (tallest, sum of squares) of the first i rows in j stages, and where its last stage starts
    best = [[(inf, 0)] * (n + 1) for _ in range(count + 1)]
    best[0][0] = ((0.0, 0.0), 0)
    for j in range(1, count + 1):
        for i in range(j, n + 1):
            for a in range(j - 1, i):
                (tallest, squares), _ = best[j - 1][a]
                c = cost(a, i)
                option = (max(tallest, c), squares + c * c)
                if option < best[j][i][0]:
                    best[j][i] = (option, a)
    if best[count][n][0] == inf:  # cannot happen for a greedy count; kept safe
        return greedy_cut(tall, room, fs)
    cut, i = [], n
    for j in range(count, 0, -1):
        a = best[j][i][1]
        cut.append((a, i))
        i = a
    return cut[::-1]
