"""What every view's page shares: figures with their download, text as typed, sizes for presentation
mode, the token strip, the view/layer/head selectors and the report of the view in use."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Collection, Iterator
from contextvars import ContextVar
from typing import Any, Literal

import streamlit as st

import viz
from attention.runs.bigrun import NeedsSmallerInput, is_big
from viz._style import MODEBAR_BUTTONS, TITLE_GLYPH, cut_at_word, one_line_title, title_layout, title_room
from viz.tokens import COMPACT_ABOVE

from ..serve import preload
from ..state.state import offered, view_key
from ..state.view_context import ViewContext, drawn
from . import registry
from .layout import expander_px, main_px, sidebar_px
from .present import MIN_PRESENT_LABEL_PX, figure_height, page_link
from .report import part_caption, report_facts

MARKDOWN_SIGNS = r"[\\`*_{}\[\]()#+\-.!|<>$~&]"  # escaped by plain()


def plain(text: str) -> str:
    """Escape markdown so text a person typed is shown exactly as typed."""
    return re.sub(f"({MARKDOWN_SIGNS})", r"\\\1", text)


def as_written(markdown: str) -> str:
    """Markdown's escapes undone (plain's inverse): the text as the page shows it."""
    return re.sub(rf"\\({MARKDOWN_SIGNS})", r"\1", markdown)


# what the figures drawn now are of, where it is not the sentence drawn (a coreference suite): `figures_of`
_OF: ContextVar[str | None] = ContextVar("figures_of", default=None)


@contextlib.contextmanager
def figures_of(what: str) -> Iterator[None]:
    """Within it, a figure's presentation title names `what` (e.g. "the built-in suite (87 examples)") where it
    would name the sentence drawn: the figures are not of that sentence."""
    token = _OF.set(what)
    try:
        yield
    finally:
        _OF.reset(token)


def show(fig, name: str, *, sentence: str | None = None, **kwargs):
    """A figure with its PNG download button (plotly's camera icon), drawn as exported: at its own
    width when it sets one (square heatmap cells), else across the column. In presentation mode its
    title says what it shows and of which sentence (``present_caption``: ``sentence``, by default what
    ``figures_of`` names, else the drawn one), so the PNG does too. What the page draws (presentation mode, the
    view, its layer and head) is the context of the page being drawn (ui/state/view_context.py's ``drawn``)."""
    ctx = drawn()
    if ctx is not None and name not in UNTITLED:
        present_caption(fig, ctx, sentence if sentence is not None else _OF.get())
    config: dict[str, Any] = {
        "displaylogo": False,
        "modeBarButtons": MODEBAR_BUTTONS,  # one button: the title keeps clear of it (viz._style.title_room)
        "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2},
    }
    width: Literal["content", "stretch"] = "content" if fig.layout.width else "stretch"
    for_report(name, fig)
    return st.plotly_chart(fig, theme=None, config=config, key=kwargs.pop("key", name), width=width, **kwargs)


def show_table(frame, name: str, **kwargs):
    """A table (st.dataframe of `frame` with `kwargs`: a DataFrame, a dict of columns or a list of rows)
    that the report holds too, with `name` as its caption. Returns what st.dataframe returns."""
    import pandas as pd  # imported by now: the views that show tables wait for it (registry's `later`)

    table = frame if isinstance(frame, pd.DataFrame) else pd.DataFrame(frame)
    if not kwargs.get("hide_index") and not isinstance(table.index, pd.RangeIndex):
        table = table.reset_index()  # an index the page shows is a column of the report's table
    for_report(name, table)
    return st.dataframe(frame, **kwargs)


def show_text(markdown: str, name: str, write=st.caption) -> None:
    """A line of text written with `write` (st.caption, st.write ...: markdown, so a person's text in it goes
    through `plain`), and in the report as the page shows it."""
    write(markdown)
    for_report(name, as_written(markdown))


def for_report(name: str, part) -> None:
    """Keep a figure, a table (DataFrame) or a line of text for the report, in the order the page shows them."""
    st.session_state.setdefault("page_figures", []).append((name, part))


def shown_as(key: str, text: str) -> None:
    """Say how the page shows the value of the Param whose session-state key is `key` ("7 of 11: Softmax" for
    the walk's step 6), for the report's header; set by the view that shows it, on every run that does."""
    st.session_state.setdefault("page_shown", {})[key] = text


def start_report() -> None:
    """A run's page starts with nothing for the report: show, show_table, show_text and shown_as fill it."""
    st.session_state.page_figures, st.session_state.page_shown = [], {}


def kept_checkbox(place, label: str, key: str, enabled: bool, why: str) -> bool:
    """A checkbox that applies only while `enabled`: drawn unticked and disabled otherwise (saying `why`),
    its value kept in session state under `key` for when it applies again. Returns what it shows."""
    if enabled:
        return place.checkbox(label, key=key, persist_state="session")
    shown_as(key, f"no ({why[0].lower()}{why[1:]})")
    return place.checkbox(label, False, key=f"{key}_off", disabled=True, help=why)


def font_size(present: bool) -> int:
    """The figures' type: larger in presentation mode (`present`)."""
    return 22 if present else 14


def axis_labels(axis: str, tokens: list[str], size: int) -> list[str]:
    return tokens if axis in ("L", "S") else [str(i) for i in range(size)]


def figure_slot(present: bool):
    """Presentation mode (`present`): a place for the view's figure above its controls (drawn after them)."""
    return st.container() if present else None


def present_size(present: bool) -> dict:
    """The figure's size budget in presentation mode (`present`: the first screen); nothing otherwise."""
    if not present:
        return {}
    return {"width": main_px(present), "height": figure_height(), "min_label": MIN_PRESENT_LABEL_PX}


def present_title(fig, ctx: ViewContext) -> None:
    """Presentation: the figure's title becomes one compact line, "L2 H3 · " (the context's layer and head) and
    the sentence cut to the figure's width, so a PNG from the camera icon says what it shows. A figure drawn
    with a title keeps the room its layout made for it (within its first-screen budget); one drawn without gets
    room above."""
    if ctx.present:
        _one_line(fig, f"L{ctx.layer} H{ctx.head} · ", ctx)


# figures that are not a view's result: the token strips
UNTITLED = ("tokens", "walk-tokens", "corpus-grid")  # not of the sentence: its title does not name it
# views that show one head (the selected layer and head), whose figures' titles name it
ONE_HEAD = ("head", "shapeflow", "qk", "ablation", "efficient", "walk")
NAMES_A_HEAD = re.compile(r"\bL\d+ H\d+\b")


def present_caption(fig, ctx: ViewContext, sentence: str | None = None) -> None:
    """Presentation (the context's): a figure's title keeps what it says, cut at a word to fit, and goes on with
    the sentence (``sentence``, else the context's), as one line; where the context's view shows one head and
    the title does not name it, "L2 H3 · " comes first. A figure without a title is named by its view. Titles
    set by ``present_title`` stay as they are."""
    if not ctx.present or fig.layout.meta == TITLED:
        return
    view = registry.by_key(ctx.view) or registry.DEFAULT
    titled = (fig.layout.title and fig.layout.title.text) or ""
    own = re.sub(r"<[^>]+>", " ", titled)
    own = html.unescape(" ".join(own.split())) or view.label
    own = re.sub(r"\blayer (\d+), head (\d+)", r"L\1 H\2", own, flags=re.IGNORECASE)  # compact, as the keys say it
    head = ""
    if view.key in ONE_HEAD and not NAMES_A_HEAD.search(own):
        head = f"L{ctx.layer} H{ctx.head} · "
        own = re.sub(rf",? head {ctx.head}\b", "", own)  # "K projection, head 3": said once
    width = title_room(
        shown_width(fig, ctx.present)
    )  # less the padding and the modebar's corner, as one_line_title counts
    if "<br>" in titled and not _fits(head + own, sentence or ctx.sentence, width):
        two_lines(fig, own, head, ctx, sentence)  # the figure made room for two lines: its own words stay whole
        return
    own = head + own
    # a narrow figure's title is set smaller (not under a label's size) to leave the sentence a few words
    size = max(MIN_PRESENT_LABEL_PX, min(title_size(fig, ctx.present), int(width / ((len(own) + 24) * TITLE_GLYPH))))
    room = int(width / (size * TITLE_GLYPH))
    # the title's own words first: 60% of the line, or all of them while the sentence keeps its first word
    first = len(((sentence or ctx.sentence).split() or [""])[0]) + 1  # "The…"
    keep = max(int(0.6 * room), min(len(own), room - 3 - first))
    if fig.layout.title and fig.layout.title.text:
        fig.layout.title.font.size = size
    else:
        fig.update_layout(title=title_layout(".", round(size / 1.2)))
    _one_line(fig, cut_at_word(own, keep) + " · ", ctx, sentence)


def _fits(own: str, sentence: str, width: float) -> bool:
    """Whether ``own`` and the sentence's first word fit one title line at the smallest size a room reads."""
    first = len((sentence.split() or [""])[0]) + 1
    return (len(own) + 3 + first) * MIN_PRESENT_LABEL_PX * TITLE_GLYPH <= width


def two_lines(fig, own: str, head: str, ctx: ViewContext, sentence: str | None) -> None:
    """A narrow figure's title in the two lines it made room for: what it shows, whole (a shape's "1 × 9 × 13" as
    "1×9×13" where that is what fits), then the head and the sentence, cut to the width."""
    width = title_room(shown_width(fig, ctx.present))
    if len(own) * MIN_PRESENT_LABEL_PX * TITLE_GLYPH > width:
        own = own.replace(" × ", "×")
    size = max(MIN_PRESENT_LABEL_PX, min(title_size(fig, ctx.present), int(width / (len(own) * TITLE_GLYPH))))
    text = ctx.sentence if sentence is None else sentence
    room = int(width / (size * TITLE_GLYPH))
    lines = [cut_at_word(own, room), cut_at_word(head + " ".join(text.split()), room)]
    fig.layout.title.update(text="<br>".join(html.escape(line, quote=False) for line in lines), font={"size": size})
    fig.layout.meta = TITLED


def shown_width(fig, present: bool) -> int:
    """The figure's width on the page: its own, within the main column (a wider one is drawn narrower)."""
    return min(fig.layout.width or main_px(present), main_px(present))


def title_size(fig, present: bool) -> int:
    return (fig.layout.title and fig.layout.title.font.size) or round(font_size(present) * 1.2)


TITLED = "one-line title"  # fig.layout.meta of a figure whose title is already the line


def _one_line(fig, prefix: str, ctx: ViewContext, sentence: str | None = None) -> None:
    if not (fig.layout.title and fig.layout.title.text):
        fig.update_layout(title=title_layout(".", font_size(ctx.present)))
    width = shown_width(fig, ctx.present)
    fig.layout.title.update(x=0, xref="container", pad={"l": 8})  # from the figure's left edge, not the plot's
    text = ctx.sentence if sentence is None else sentence
    fig.layout.title.text = one_line_title(prefix, text, width, title_size(fig, ctx.present))
    fig.layout.meta = TITLED


def progress_bar(label: str):
    """A progress bar and the callback that moves it: fraction, optional text."""
    bar = st.progress(0.0, text=label)

    def update(fraction: float, text: str | None = None) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=text or label)

    return bar, update


def too_big_for_batch(run) -> bool:
    """For a big model's run, say that the padded batch (which keeps every map of two sentences) needs a
    shorter input, and return True; False for an ordinary run."""
    if not is_big(run):
        return False
    st.info(
        str(NeedsSmallerInput(run.n_layers, run.n_heads, len(run.tokens))).replace(
            "This view needs", "The padded batch needs"
        )
        + " The rest of this view reads one layer."
    )
    return True


def tokens_strip(run, present: bool, place=None, new_from: int | None = None) -> None:
    """The strip of the input's pieces, in ``place`` when given (the sidebar's, at its width), else across
    the page. A long input's strip (more than COMPACT_ABOVE pieces: a thousand pixels of boxes at 512)
    waits in a closed expander across the page, drawn only once it is opened. Either way the view's
    figure is not pushed below it; the figure's axes and hovers name every token. Positions from `new_from` on (a
    continuation's) are marked as the model's. Sized for presentation mode where `present`."""
    enc = run.encoded
    if enc.notice:
        st.warning(enc.notice)
    n = len(enc.tokens)
    folded = n > COMPACT_ABOVE
    box: Any
    if folded:
        box = st.expander(f"Token strip: {n} pieces", key="show_strip", on_change="rerun")
        shown_as("show_strip", "open" if box.open else "closed")  # only a long input's strip is folded
        if not box.open:
            return
        width = expander_px(present)
    elif place is not None:
        box, width = place, sidebar_px()
        box.header("Tokens")
    else:
        box, width = st.container(), main_px(present)
    with box:
        show(strip_figure(enc, width, present, new_from), "tokens")


def strip_figure(enc, width: int, present: bool, new_from: int | None = None):
    """The token strip of an encoded input, its rows wrapped within `width` px (its column), its type as
    presentation mode (`present`) sets it; positions from `new_from` on marked as written by the model."""
    return viz.token_strip(
        enc.tokens,
        enc.input_ids[0].tolist(),
        enc.token_type_ids[0].tolist(),
        enc.special,
        font_size=font_size(present),
        width=width,
        new_from=new_from,
        byte_level=enc.byte_level,
    )


def selectors(run, kinds: Collection[str]) -> None:
    """The view (those for a model of these `kinds`), the layer and the head in one row (the views' buttons wrap
    within it)."""
    views, left, right = st.columns([6, 1, 1], vertical_alignment="bottom")
    views.segmented_control(
        "View",
        registry.labels(kinds),
        key="view",
        persist_state="session",
        required=True,
        label_visibility="collapsed",
        wrap=True,
    )
    if not registry.by_label(st.session_state.get("view")).picks_head:  # the boxes would change nothing here
        return
    layers, heads = offered(run.n_layers, run.n_heads)
    left.selectbox("Layer", range(layers), key="layer", persist_state="session")
    right.selectbox("Head", range(heads), key="head", persist_state="session")


def report_button(model_name: str, ctx: ViewContext) -> None:
    """Download what this run showed (the current view: figures, tables and text), with the sentence, the
    choices as the page shows them and the page's link written on it."""
    text, text_b = ctx.sentence, ctx.text_b
    parts = [(part_caption(name, part), part) for name, part in st.session_state.get("page_figures", [])]
    details = st.session_state.page_details = report_facts(ctx)  # kept beside page_figures: what the report says
    link = page_link()  # the address as written by this run (write_url comes first)

    def build() -> str:  # on a click, in a thread of the server's: it builds figures, as a page run does
        with preload.page_run():
            return viz.html_report(text, text_b, model_name, parts, details=details, link=link)

    st.session_state.page_report = build  # the page the button downloads, built on demand
    st.download_button(
        "Download this view as an offline HTML report",
        data=build,
        file_name=f"attention-{view_key()}.html",
        mime="text/html",
        on_click="ignore",
    )
