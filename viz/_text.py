"""Make user text safe to show in plotly labels and hover text."""

import html
from collections.abc import Iterable, Sequence

POSITION_MARK = "·"  # joins a token and its position: "it·10"


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so plotly shows tags as typed, not rendered."""
    return html.escape(str(text), quote=False)


def escape_all(texts: Iterable[str]) -> list[str]:
    """Escape every string of ``texts``."""
    return [escape(t) for t in texts]


def position_labels(escaped_tokens: Sequence[str]) -> list[str]:
    """One unique label per position, "token·i", for categorical axes.

    Repeated tokens get distinct labels, so each keeps its own row or
    column, and hover text built from the label names both the token and
    where it is. The position follows the last mark, so the labels are
    unique even when a token contains the mark itself.
    """
    return [f"{token}{POSITION_MARK}{i}" for i, token in enumerate(escaped_tokens)]


def head_label(layer: int, head: int) -> str:
    """How every figure names one head: "L3 H1"."""
    return f"L{layer} H{head}"
