"""A suite's examples one by one for one head: each example's sentence, pronoun, answer and the other
candidate the head prefers most, the head's attention to both, the margin and whether the head is right. A
row opens its sentence in the head view at that head; the suite stays picked for the way back."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention.analysis.coref import CorefResult, ExampleScore

from ..page.layout import ROUNDING_PX, main_px, rem_px
from ..page.page import show_table
from ..state.actions import open_sentence

SHOWN_CHARS = 200  # of an example's text in the table; the head view gets all of it (at most MAX_LINE_CHARS)
TABLE_PX = 420  # the table's height: it scrolls (a suite has at most MAX_EXAMPLES rows)
# a row's height at 16 px type: LINES lines of a sentence's text, 18 px each, within 12 px of padding (a row over
# 4 rem high wraps its text; one line more than fits is drawn cut, so the height fits whole lines)
LINES, LINE_PX, ROW_PADDING_PX = 4, 18, 12


def excerpt(score: ExampleScore, width: int = SHOWN_CHARS) -> str:
    """The example's text, or `width` characters of it around the pronoun where the line gives its place
    (GAP's passages), cut ends marked with "…"."""
    text = score.example.text
    if len(text) <= width:
        return text
    at = score.example.pronoun_start or 0
    start = min(max(at - width // 2, 0), len(text) - width)
    return ("…" if start else "") + text[start : start + width] + ("…" if start + width < len(text) else "")


# the table's columns: each one's width in px at the page's 16 px type (the sentence takes what is left of the
# main column, its text wrapped), and what its header's help says
COLUMNS = {
    "#": (36, "The example's line in the file"),
    "sentence": (0, "The example's text; a passage longer than 200 characters is cut around the pronoun"),
    "pronoun": (64, None),
    "answer": (96, None),
    "→ answer": (68, "The head's attention from the pronoun to the answer"),
    "other": (96, "The other candidate the head attends to most"),
    "→ other": (64, "The head's attention from the pronoun to that other candidate"),
    "margin": (62, "→ answer minus → other"),
    "right": (46, "Right where the margin is above 0 (a tie is wrong)"),
}
SELECT_PX = 34  # the row-selection column's width at 16 px type


def head_rows(result: CorefResult, layer: int, head: int) -> dict[str, list]:
    """One row per counted example, in file order (COLUMNS): its number in the file (1 first), its text (cut to
    SHOWN_CHARS), pronoun, answer and the head's attention to it, the other candidate the head attends to
    most and its attention, the margin (the first minus the second) and whether the head is right."""
    rows: dict[str, list] = {k: [] for k in COLUMNS}
    for d in result.details:
        e, scores = d.example, d.attention[layer, head]
        a = e.answer_index
        assert a is not None, "a counted example has its answer"
        others = np.delete(np.arange(len(scores)), a)
        other = int(others[np.argmax(scores[others])])
        rows["#"].append(d.index + 1 if d.index is not None else None)
        rows["sentence"].append(excerpt(d))
        rows["pronoun"].append(e.pronoun)
        rows["answer"].append(e.candidates[a])
        rows["→ answer"].append(float(scores[a]))
        rows["other"].append(e.candidates[other])
        rows["→ other"].append(float(scores[other]))
        rows["margin"].append(float(d.margin[layer, head]))
        rows["right"].append(bool(d.heads_right()[layer, head]))
    return rows


def column_config(present: bool) -> dict:
    """Each column's width, scaled with the type of presentation mode (`present`), the sentence's the rest of the
    main column; its help; the numbers to 3 decimals."""
    scale = rem_px(present) / rem_px(False)
    fixed = {name: round(px * scale) for name, (px, _) in COLUMNS.items() if px}
    rest = main_px(present) - round(SELECT_PX * scale) - sum(fixed.values()) - ROUNDING_PX
    config = {}
    for name, (_, help_) in COLUMNS.items():
        width = fixed.get(name, rest)
        if name.startswith("→") or name == "margin":
            config[name] = st.column_config.NumberColumn(format="%.3f", width=width, help=help_)
        else:
            config[name] = st.column_config.Column(width=width, help=help_)
    return config


# ---- which head: the best by default, or the one opened last from a grid, a bar or the head boxes ---------


def examples_head(result: CorefResult, here: tuple[int, int]) -> tuple[int, int]:
    """The head whose examples are listed: the one picked in the box, the head opened since the list was
    last drawn (`here`, the page's selected head, moved by a click on the grid or the bars or by the head
    boxes), else the best head."""
    seen = st.session_state.get("coref_examples_at")
    if seen is not None and tuple(seen) != here:  # a head opened since: the list follows it
        st.session_state.coref_examples_head = here
    st.session_state.coref_examples_at = here
    n_layers, n_heads = result.accuracy.shape
    chosen = st.session_state.get("coref_examples_head")
    if chosen is None or not (0 <= chosen[0] < n_layers and 0 <= chosen[1] < n_heads):  # another model's
        layer, head, _ = result.ranked(1)[0]
        chosen = (layer, head)
    return int(chosen[0]), int(chosen[1])


def keep_pick() -> None:
    st.session_state.coref_examples_head = st.session_state.coref_examples_pick


def head_picker(result: CorefResult, here: tuple[int, int]) -> tuple[int, int]:
    ranked = result.ranked()
    accuracy = {(layer, head): a for layer, head, a in ranked}
    st.session_state.coref_examples_pick = examples_head(result, here)
    return st.selectbox(
        "Examples for head",
        [(layer, head) for layer, head, _ in ranked],
        format_func=lambda lh: f"L{lh[0]} H{lh[1]} ({accuracy[lh]:.0%} right)",
        key="coref_examples_pick",
        on_change=keep_pick,
        help="Best first. Clicking a head in the grid or the bars opens it; back here, its examples are listed.",
    )


def open_example(result: CorefResult, layer: int, head: int, suite_name: str) -> None:
    rows = st.session_state.coref_examples_table.selection.get("rows", [])
    if rows and 0 <= rows[0] < result.n:
        d = result.details[rows[0]]
        number = "" if d.index is None else f" {d.index + 1}"
        open_sentence(d.example.text, layer, head, f"example{number} of {suite_name}")


def examples_table(result: CorefResult, suite_name: str, here: tuple[int, int], present: bool) -> None:
    """The head picker (`here`: the page's selected layer and head) and its examples, every column within the main
    column (sized for presentation mode where `present`); a row opens its sentence in the head view at that
    head."""
    st.subheader("Each example for one head")
    layer, head = head_picker(result, here)
    rows = head_rows(result, layer, head)
    right = sum(rows["right"])
    st.caption(
        f"Layer {layer}, head {head} is right on {right} of {result.n} examples: its attention from the "
        "pronoun to the answer is above its attention to every other candidate (margin > 0). Click a column "
        "to sort, a row to open that example in the head view at this head."
    )
    show_table(
        rows,
        f"Each example for layer {layer}, head {head}",
        hide_index=True,
        width="stretch",
        height=TABLE_PX,
        row_height=(ROW_PADDING_PX + LINES * LINE_PX) * rem_px(present) // rem_px(False),
        column_config=column_config(present),
        key="coref_examples_table",
        on_select=lambda: open_example(result, layer, head, suite_name),
        selection_mode="single-row",
    )
