"""A suite's scores split by a field of its examples (gender, occupation, cue …): a table of the groups with
their counts, baselines and exact intervals, a grid per group (each head's count and interval in its hover),
the difference between two groups, the paired test of the best head where the groups' examples pair up, and
every group's heads as CSV."""

from __future__ import annotations

import re

import numpy as np
import streamlit as st

from attention.analysis.coref import CorefResult, group
from attention.analysis.coref.groups_csv import groups_csv_text
from attention.analysis.coref.metrics import best_head, paired_groups
from attention.analysis.coref.result_csv import file_name
from attention.analysis.coref.stats import clopper_pearson
from viz.coref import head_grid

from ..page.layout import column_px, main_px, slots
from ..page.page import font_size, plain, show, show_table
from ..state.actions import open_clicked_head
from ..state.state import NO_GROUPING
from .coref_data import chosen_suite

SKIP = {"id", "url", "source", "text", "split"}  # identifiers and provenance, not groups
MAX_GROUPS = 60  # Winogender's occupations
MAX_GRIDS = 4  # more groups: a table, and grids for the two compared
MAX_FIELDS = 16  # fields offered to group by, the first found (Winogender and GAP have 2 to 4)


def label(value) -> str:
    return "(missing)" if value is None else str(value)


def group_fields(examples) -> list[str]:
    """Fields worth grouping by: `cue` and the lines' own fields of words, flags or whole numbers, with
    2 to MAX_GROUPS values; at most MAX_FIELDS of them. A look at every example per field: see suite_fields."""
    names = ["cue"] + list(dict.fromkeys(k for e in examples for k in e.fields if k not in SKIP))
    fields = []
    for name in names:
        values = {e.value(name) for e in examples if isinstance(e.value(name), (str, bool, int, type(None)))}
        if 2 <= len(values) <= MAX_GROUPS and all(
            isinstance(e.value(name), (str, bool, int, type(None))) for e in examples
        ):
            fields.append(name)
            if len(fields) == MAX_FIELDS:
                break
    return fields


@st.cache_resource(max_entries=16, show_spinner=False)
def _fields_of(cache_key: str, _examples) -> tuple[str, ...]:
    return tuple(group_fields(_examples))


def suite_fields(examples) -> list[str]:
    """group_fields of the suite in use, computed once per suite (by its cache key: an upload's digest)."""
    suite = chosen_suite()
    if suite is None or suite.examples is not examples:
        return group_fields(examples)
    return list(_fields_of(suite.cache_key, examples))


def pairing(result: CorefResult, by: str, a, b, fields: list[str]) -> tuple[str, ...] | None:
    """The other grouping fields, when they name each example of groups `a` and `b` once and some name
    one of each (Winogender's male and female sentence of one template); else None."""
    pair_on = tuple(f for f in fields if f != by)
    if not pair_on:
        return None
    keys = {
        v: [tuple(d.example.value(f) for f in pair_on) for d in result.details if d.example.value(by) == v]
        for v in (a, b)
    }
    if any(len(k) != len(set(k)) for k in keys.values()) or not set(keys[a]) & set(keys[b]):
        return None
    return pair_on


def counts(result: CorefResult) -> np.ndarray:
    """(n_layers, H) str: each head's "6 of 9, [0.35, 0.88]": right on how many of the counted examples, and
    the exact (Clopper-Pearson) 95% interval of that accuracy."""
    right = result.correct.sum(axis=0)
    low, high = clopper_pearson(right, result.n)
    return np.array(
        [[f"{k} of {result.n}, [{lo:.2f}, {hi:.2f}]" for k, lo, hi in zip(*row)] for row in zip(right, low, high)]
    )


def draw_grids(
    items: list[tuple[np.ndarray, str, str, str]],
    present: bool,
    static: tuple[str, ...] = (),
    notes: dict[str, np.ndarray] | None = None,
) -> None:
    """(values, title, kind, name) grids, two side by side where they fit, else one under the other. A
    click on a head opens it, except on the grids named in `static` (another model's heads); `notes` (by
    grid name) follow each head's value in its hover. Sized for presentation mode where `present`."""
    notes = notes or {}
    half, size = column_px(present, 2), font_size(present)
    for start in range(0, len(items), 2):
        row = items[start : start + 2]
        figs = [head_grid(v, t, kind=k, font_size=size, width=half, notes=notes.get(n)) for v, t, k, n in row]
        beside = len(row) == 2 and all(f.layout.width <= half for f in figs)
        if not beside:
            figs = [
                head_grid(v, t, kind=k, font_size=size, width=main_px(present), notes=notes.get(n))
                for v, t, k, n in row
            ]
        for col, fig, (_, _, _, name) in zip(slots(beside, len(row)), figs, row):
            with col:
                if name in static:
                    show(fig, name, key=name)
                else:
                    show(fig, name, key=name, on_select=lambda n=name: open_clicked_head(n), selection_mode="points")


def grouped(result: CorefResult, examples, model: str, suite: str, present: bool) -> None:
    """The group-by selector and what it shows; the CSV's file name names the field, `model` and `suite`. Sized
    for presentation mode where `present`."""
    fields = suite_fields(examples)
    options = [NO_GROUPING] + fields
    if st.session_state.get("coref_by") not in options:  # from a link, or another suite's field
        st.session_state.coref_by = NO_GROUPING
    left, mid, right = st.columns(3)
    by = left.selectbox(
        "Group by",
        options,
        key="coref_by",
        persist_state="session",
        help="A field of the examples; each value's examples are scored on their own.",
    )
    if by == NO_GROUPING:
        if not fields:
            st.caption("These examples have no field to group them by (a line's extra fields, e.g. gender).")
        return
    groups = group(result, by)
    names = {label(v): v for v in groups}
    counted = [n for n, v in names.items() if groups[v].n]
    if len(counted) < 2:
        st.info(f"Fewer than two values of {plain(by)} have examples that count: nothing to compare.")
        return
    for key, default in (("coref_group_a", counted[0]), ("coref_group_b", counted[1])):
        if st.session_state.get(key) not in counted:
            st.session_state[key] = default
    a = mid.selectbox("Group A", counted, key="coref_group_a", persist_state="session")
    b = right.selectbox("Group B", counted, key="coref_group_b", persist_state="session")
    rows = [(n, groups[names[n]]) for n in counted]
    notes = {n: counts(g) for n, g in rows}
    show_table(
        group_table(by, rows, notes, best_head(result)),
        "Groups: counts, baselines and intervals",
        hide_index=True,
        width="stretch",
    )
    st.download_button(
        "Download every head's accuracy per group (CSV)",
        data=lambda: groups_csv_text(by, rows),
        file_name=file_name(f"heads-by-{re.sub(r'[^A-Za-z0-9-]+', '-', by).strip('-')[:40]}", model, suite),
        mime="text/csv",
        on_click="ignore",
    )
    shown = counted if len(counted) <= MAX_GRIDS else [a, b]
    draw_grids(
        [
            (
                groups[names[n]].accuracy,
                f"accuracy, {by} = {n} ({groups[names[n]].n} examples)",
                "accuracy",
                f"coref-group-{i}",
            )
            for i, n in enumerate(shown)
        ],
        present,
        notes={f"coref-group-{i}": notes[n] for i, n in enumerate(shown)},
    )
    if a == b:
        st.info("Pick two different groups to see their difference.")
        return
    ga, gb = groups[names[a]], groups[names[b]]
    draw_grids([(ga.accuracy - gb.accuracy, f"accuracy {a} − {b}", "difference", "coref-group-difference")], present)
    st.caption(plain(difference_note(result, by, names[a], names[b], fields, a, b, (notes[a], notes[b]))))


def group_table(
    by: str, rows: list[tuple[str, CorefResult]], notes: dict[str, np.ndarray], overall: tuple[int, int]
) -> dict[str, list]:
    """One row per group: its counts, baselines, its own best head with the exact 95% interval, and the best
    head overall's count and interval on it (notes: counts() of each group)."""
    layer, head = overall
    best = {n: g.ranked(1)[0] for n, g in rows}  # each group's own best head: (layer, head, accuracy)
    return {
        by: [n for n, _ in rows],
        "examples counted": [g.n for _, g in rows],
        "left out": [len(g.excluded) for _, g in rows],
        "baseline nearest": [round(g.baselines["nearest"], 3) for _, g in rows],
        "baseline first": [round(g.baselines["first"], 3) for _, g in rows],
        "best head": [f"L{best[n][0]} H{best[n][1]}" for n, _ in rows],
        "best accuracy": [round(best[n][2], 3) for n, _ in rows],
        "right, 95% interval": [notes[n][best[n][0], best[n][1]] for n, _ in rows],
        f"L{layer} H{head} (best overall)": [notes[n][layer, head] for n, _ in rows],
    }


def difference_note(
    result: CorefResult,
    by: str,
    a,
    b,
    fields: list[str],
    name_a: str,
    name_b: str,
    counted: tuple[np.ndarray, np.ndarray],
) -> str:
    """`counted`: counts() of groups a and b."""
    pair_on = pairing(result, by, a, b, fields)
    layer, head = best_head(result)
    if pair_on is None:
        return (
            f"Blue: heads more often right on {name_a} than on {name_b}. The examples of the two groups do "
            "not pair up one to one, so no paired test is made; compare the groups' intervals instead: the "
            f"best head overall, layer {layer}, head {head}, is right on {counted[0][layer, head]} on "
            f"{name_a} and on {counted[1][layer, head]} on {name_b} (exact 95% intervals; the grids' hover "
            "gives every head's)."
        )
    test = paired_groups(result, by, a, b, pair_on, layer, head)
    return (
        f"Blue: heads more often right on {name_a} than on {name_b}. Paired by {', '.join(pair_on)}: "
        f"{test.n} pairs. The best head overall, layer {layer}, head {head}, is right only on the {name_a} "
        f"example of {test.only_a} pairs and only on the {name_b} one of {test.only_b}; exact McNemar "
        f"p = {test.p:.3g}."
    )
