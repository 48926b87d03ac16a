"""Make user text safe to show in plotly labels and hover text."""

import html
from collections.abc import Iterable


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so plotly shows tags as typed, not rendered."""
    return html.escape(str(text), quote=False)


def escape_all(texts: Iterable[str]) -> list[str]:
    """Escape every string of ``texts``."""
    return [escape(t) for t in texts]
