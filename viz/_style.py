"""Shared look of every figure: fonts, colours, plain background."""

import html

import plotly.graph_objects as go
import plotly.io as pio

SEQUENTIAL = "Blues"
HIGHLIGHT = "crimson"

# Colours of token kinds, shared by the token strip and the mask figures:
# (fill, outline). Blue and orange stay apart for colour-blind readers.
SEGMENT_A = ("#d6e6f5", "#2f6fad")
SEGMENT_B = ("#fde3c8", "#c8610c")
SPECIAL = ("#e4e4e4", "#555555")
KEEP, PADDING = "#2f6fad", "#d9d9d9"  # mask cells: attended to / masked out
ACCENT = "#2f6fad"  # the one measure a chart of bars or a line shows: probabilities, cosines
TITLED_COLORBAR_PX = 100  # right margin for a colour bar with its title beside it
TITLE_GLYPH = 0.58  # average width of a title glyph, in font sizes (sans serif, mixed case)
MODEBAR_PX = 36  # the top right corner a figure keeps free of its title: plotly's camera button, shown on hover
MODEBAR_BUTTONS = [["toImage"]]  # the one button of the modebar (drag zooms and a double click resets without it)

# a clicked point leaves every point as it was (plotly dims the others)
KEEP_OPACITY = dict(selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=1)))

_KEPT_LAYOUT = (
    "autotypenumbers",
    "colorway",
    "font",
    "hovermode",
    "hoverlabel",
    "paper_bgcolor",
    "plot_bgcolor",
    "xaxis",
    "yaxis",
    "shapedefaults",
    "annotationdefaults",
    "title",
)


def _light_template() -> go.layout.Template:
    """plotly_white without the 3-D, polar, map and colour-scale defaults.

    Figures here are all 2-D with explicit colour scales; the full template
    would add about 7 kB of JSON to every figure for nothing.
    """
    white = pio.templates["plotly_white"].layout.to_plotly_json()
    layout = {key: white[key] for key in _KEPT_LAYOUT if key in white}
    colorbar = dict(outlinewidth=0, ticks="")
    return go.layout.Template(layout=layout, data=dict(heatmap=[go.Heatmap(colorbar=colorbar)]))


TEMPLATE = _light_template()


def base_layout(font_size: int, title: str | None = None) -> dict:
    """Layout settings shared by all figures; ``font_size`` scales the text."""
    return dict(
        template=TEMPLATE,
        font=dict(size=font_size),
        title=title_layout(title, font_size) if title else None,
        hoverlabel=dict(font=dict(size=font_size)),
        margin=dict(l=10, r=10, t=60 if title else 30, b=10),
    )


def title_layout(text: str, font_size: int) -> dict:
    """Title at the top left, with room made for it above top-side axis labels."""
    return dict(
        text=text,
        font=dict(size=round(font_size * 1.2)),
        x=0,
        xref="paper",
        y=1,
        yref="container",
        yanchor="top",
        pad=dict(t=8),
        automargin=True,
    )


def one_line_title(prefix: str, text: str, width: float, size: int) -> str:
    """``prefix`` and ``text`` as one title line of ``size`` px text within ``width`` px: the text cut at a
    word and ended with "…" where it is too long. Escaped plotly markup (``text`` is as typed)."""
    room = max(1, int(title_room(width) / (size * TITLE_GLYPH)) - len(prefix))
    return html.escape(prefix + cut_at_word(" ".join(text.split()), room), quote=False)


def title_room(width: float) -> float:
    """The px a title line may take in a figure ``width`` px wide: its padding and the modebar's corner kept."""
    return width - 24 - MODEBAR_PX


def cut_at_word(text: str, room: int) -> str:
    """``text`` within ``room`` characters: whole where it fits, else cut after its last whole word that fits
    and ended with "…" (a first word longer than the room is cut, as nothing shorter says anything)."""
    if len(text) <= room:
        return text
    cut = text[: max(room - 1, 1)]
    if " " in cut.strip() and not (cut[-1].isspace() or text[len(cut)].isspace()):  # cut inside a word
        cut = cut.rstrip().rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:·") + "…"


def legend_swatch(name: str, fill: str, outline: str, size: int) -> go.Scatter:
    """A legend entry only: a filled square, for traces whose own legend icon is unclear."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        marker=dict(symbol="square", size=size, color=fill, line=dict(color=outline, width=1.5)),
        name=name,
        hoverinfo="skip",
    )


def clean_axis(**overrides) -> dict:
    """An axis with no grid or zero line that makes room for its labels."""
    axis = dict(showgrid=False, zeroline=False, ticks="", automargin=True)
    axis.update(overrides)
    return axis


def layer_head_axes(n_layers: int, n_heads: int, x: dict | None = None, y: dict | None = None) -> dict:
    """The axes of a grid with one square cell per (layer, head): heads labelled on top, layers down the side,
    layer 0 first; ``x`` and ``y`` add to (or override) each axis's settings."""
    xaxis = dict(
        tickmode="array",
        tickvals=list(range(n_heads)),
        ticktext=[f"H{h}" for h in range(n_heads)],
        side="top",
        range=[-0.5, n_heads - 0.5],
        constrain="domain",
    )
    yaxis = dict(
        tickmode="array",
        tickvals=list(range(n_layers)),
        ticktext=[f"L{layer}" for layer in range(n_layers)],
        range=[n_layers - 0.5, -0.5],  # reversed: layer 0 on top
        scaleanchor="x",
        scaleratio=1,
        constrain="domain",
    )
    return dict(xaxis=clean_axis(**(xaxis | (x or {}))), yaxis=clean_axis(**(yaxis | (y or {}))))


def message_figure(text: str, font_size: int = 14, height: int = 90) -> go.Figure:
    """A small figure holding one line of text and nothing else (no axes, no data)."""
    layout = base_layout(font_size)
    layout.update(
        height=height,
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        annotations=[
            dict(
                text=text,
                x=0,
                xref="paper",
                xanchor="left",
                y=0.5,
                yref="paper",
                showarrow=False,
                font=dict(color="#6b6b6b"),
            )
        ],
    )
    return go.Figure(layout=layout)
