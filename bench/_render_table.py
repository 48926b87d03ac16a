"""bench/render.py's table: our app's times and bytes per size beside bertviz's, and their ratios."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _bertviz_assets.draw import Case

    from bench.render import AppResult


def cell(value: float | None, fmt: str, missing: str = "—") -> str:
    return missing if value is None else format(value, fmt)


def table(sizes, app: AppResult, cases: dict[int, Case] | None) -> list[str]:
    columns = [
        "tokens",
        "head s",
        "head MB",
        "overview s",
        "overview MB",
        "bertviz s",
        "bertviz MB",
        "bertviz build s",
        "head / bertviz s",
        "overview / bertviz s",
        "bytes ratio",
    ]
    rows = []
    for n in sizes:
        h_s, h_b, _ = app.head.get(n, (None,) * 3)
        o_s, o_b, _ = app.overview.get(n, (None,) * 3)
        row = [
            str(n),
            cell(h_s, ".2f"),
            cell(h_b and h_b / 1e6, ".2f"),
            cell(o_s, ".2f"),
            cell(o_b and o_b / 1e6, ".2f"),
        ]
        case = (cases or {}).get(n)
        if case is None:
            row += ["—"] * 6
        else:
            row += [
                case.short,
                f"{case.page_bytes / 1e6:.1f}",
                f"{case.build_s:.2f}",
                time_ratio(h_s, case),
                time_ratio(o_s, case),
                cell(o_b and o_b / case.page_bytes, ".4f"),
            ]
        rows.append(row)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    header = " | ".join(c.rjust(w) for c, w in zip(columns, widths))
    return [header, "-" * len(header)] + [" | ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]


def time_ratio(ours: float | None, case: Case) -> str:
    if ours is None:
        return "—"
    if case.draw_s is not None:
        return f"{ours / case.draw_s:.4f}"
    return f"< {ours / case.at_least_s:.4f}" if case.at_least_s else "—"
