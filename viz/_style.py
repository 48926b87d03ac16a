"""Shared look of every figure: fonts, colours, plain background."""

SEQUENTIAL = "Blues"
HIGHLIGHT = "crimson"


def base_layout(font_size: int, title: str | None = None) -> dict:
    """Layout settings shared by all figures; ``font_size`` scales the text."""
    return dict(
        template="plotly_white",
        font=dict(size=font_size),
        title=dict(text=title, font=dict(size=round(font_size * 1.2))) if title else None,
        hoverlabel=dict(font=dict(size=font_size)),
        margin=dict(l=10, r=10, t=60 if title else 30, b=10),
    )


def clean_axis(**overrides) -> dict:
    """An axis with no grid or zero line that makes room for its labels."""
    axis = dict(showgrid=False, zeroline=False, ticks="", automargin=True)
    axis.update(overrides)
    return axis

