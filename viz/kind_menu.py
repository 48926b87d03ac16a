"""The Attention menu of an encoder-decoder's view: its three kinds of attention together, or one alone.

bertviz's selector (encoder self, decoder self, cross) as a menu in the figure. It relayouts the axes,
where the Layer and Head menus restyle the traces, so the three menus choose independently. An entry
shows its panels' axes, packed from the figure's start in the room each has under "All" (the top one of
grids stacked one above the other in the first grid's place: its labels are in the margin), and hides
the others' axes with ranges past their data, so that nothing of theirs is drawn or answers the mouse.
"""

from collections.abc import Sequence

from viz.panels import Panel

HIDDEN_RANGE = [-3.0, -2.0]  # a range with no cell of any map in it (cells start at -0.5)


def kind_items(views: Sequence[Panel], layout: dict, along: str) -> list[tuple[str, list[dict]]]:
    """The menu's entries ("All", then each panel by name) and their relayout arguments; none for one panel.

    ``layout`` is the view's layout under "All", its panels ``xaxis``/``yaxis``, ``xaxis2``/``yaxis2`` …
    placed one after another ``along`` "x" (side by side, left to right) or "y" (top to bottom).
    """
    if len(views) < 2:
        return []
    choices = [("All", list(range(len(views))))] + [(p.name, [i]) for i, p in enumerate(views)]
    return [(name, [_relayout(layout, len(views), shown, along)]) for name, shown in choices]


def suffix(index: int) -> str:
    """The axis suffix of the ``index``-th panel: "", "2", "3"."""
    return "" if index == 0 else str(index + 1)


def _relayout(layout: dict, n_panels: int, shown: list[int], along: str) -> dict:
    flip = along == "y"  # "y" domains run bottom to top: measure from the top instead
    spans = [_span(layout[f"{along}axis{suffix(i)}"]["domain"], flip) for i in range(n_panels)]
    args: dict = {}
    cursor, previous_end = 0.0, 0.0
    for i, (start, end) in enumerate(spans):
        s = suffix(i)
        room, length = end - previous_end, end - start  # the panel with its gutter, and its axis alone
        previous_end = end
        if i in shown:
            if flip and cursor == 0:  # the top grid's labels are in the margin: it keeps the first grid's place
                room = spans[0][0] + length
            cursor += room
            args[f"{along}axis{s}.domain"] = _span([cursor - length, cursor], flip)
        for axis in ("x", "y"):
            args[f"{axis}axis{s}.visible"] = i in shown
            args[f"{axis}axis{s}.range"] = layout[f"{axis}axis{s}"]["range"] if i in shown else HIDDEN_RANGE
    return args


def _span(domain: Sequence[float], flip: bool) -> list[float]:
    """A domain as [start, end] measured from the figure's start (its top when ``flip``), and back."""
    start, end = domain
    return [1 - end, 1 - start] if flip else [start, end]
