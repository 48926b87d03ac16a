"""The Global Q·K view: one head's queries and keys over many sentences in one plane, or every head of a
layer as small multiples (AttentionViz's global view). The points come from a folder the command line
wrote (python -m attention.analysis.qk_global) or are computed here for a corpus of up to
GQK_MAX_TOKENS tokens (UMAP and t-SNE: fewer, LAID_OUT_TOKENS), in the heavy slot, with a
progress bar and a stop button. Clicking a point opens its sentence in the head view. Every choice is
in the URL (ui/state/state.py's Params)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from attention.analysis.qk_global import FolderError, collect, head_points, read_folder
from attention.analysis.texts import CorpusError, iter_texts
from viz.global_qk import global_qk_figure, small_multiples

from ..compute.limits import heavy_guard
from ..compute.models import get_model
from ..compute.stores import MB, store
from ..page.layout import main_px
from ..page.page import font_size, plain, show, shown_as
from ..serve.sources import FileRefused, bounded_lines, open_under, policy, server_path
from ..state.actions import clicked_data, open_sentence
from ..state.state import GQK_COLOURS, GQK_CORPORA, GQK_LAYOUTS, GQK_SCOPES
from ..state.url_values import GQK_MAX_TOKENS, GQK_MIN_TOKENS, GQK_TOKEN_STEP, MAX_PATH
from ..state.view_context import ViewContext

DATA = Path(__file__).resolve().parents[2] / "data"
CORPORA = {
    GQK_CORPORA["gap"]: DATA / "gap-development.jsonl",
    GQK_CORPORA["examples"]: DATA / "coref_examples.jsonl",
}
OWN_FILE, FOLDER = GQK_CORPORA["file"], GQK_CORPORA["folder"]
SCOPES = tuple(GQK_SCOPES.values())
# the most tokens UMAP and t-SNE lay out here, over every head drawn, so that a layout ends within the
# "global" time limit (ui/serve/settings.py, 180 s): on the two-core server, busy with other work, UMAP took
# 123 s for 10,000 tokens of one head and 20 to 63 s for 4,000 to 5,000; t-SNE 137 s for 2,000, 262 s for 4,000
LAID_OUT_TOKENS = {"umap": 5_000, "tsne": 2_000}
MAX_FILE_BYTES = 50 * MB  # a corpus file named here
MAX_TEXTS = 100_000  # texts read from it at most
MAX_LINE_BYTES = 100_000  # one line of it (twice the Sentence box's 50,000 characters, for JSON's fields)


def bounded(path: Path):
    """A corpus file's lines, stopped while reading at MAX_FILE_BYTES or a line past MAX_LINE_BYTES."""
    return bounded_lines(path, MAX_FILE_BYTES, MAX_LINE_BYTES)


def token_cap(method: str, n_heads: int) -> int:
    """The most tokens of a corpus the page computes for `n_heads` heads by `method` (below GQK_MIN_TOKENS:
    not offered)."""
    if method not in LAID_OUT_TOKENS:  # PCA
        return GQK_MAX_TOKENS
    return min(GQK_MAX_TOKENS, LAID_OUT_TOKENS[method] // n_heads // GQK_TOKEN_STEP * GQK_TOKEN_STEP)


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    layer, head = ctx.layer, ctx.head
    st.caption(
        "Each token of many sentences as two points: its query and its key for the chosen head, laid out "
        "together after the keys are moved and both are scaled so that their means and mean lengths meet "
        "(neither changes any attention), so a query lies near the keys it attends to. Click a point to "
        "open its sentence in the head view."
    )
    top = st.columns([2, 2, 2])
    where = top[0].selectbox("Points from", [*CORPORA, OWN_FILE, FOLDER], key="gqk_corpus", persist_state="session")
    scope = top[1].radio("Heads", SCOPES, key="gqk_scope", persist_state="session", horizontal=True)
    colour = top[2].radio(
        "Colour by",
        list(GQK_COLOURS),
        format_func=GQK_COLOURS.get,
        key="gqk_colour",
        persist_state="session",
        horizontal=True,
    )
    shown_as("gqk_colour", GQK_COLOURS[colour])
    heads = (head,) if scope == SCOPES[0] else tuple(range(run.n_heads))
    points = folder_points(layer, heads) if where == FOLDER else computed_points(ctx.source, where, layer, heads)
    if points is None:
        return
    frames, texts = points
    if scope == SCOPES[0]:
        fig = global_qk_figure(frames[head], colour, font_size=font_size(ctx.present), width=main_px(ctx.present))
    else:
        fig = small_multiples(frames, colour, font_size=font_size(ctx.present), width=main_px(ctx.present))
        st.caption("At most 4,000 tokens of each head are drawn here, the same tokens in every panel.")
    show(fig, f"global-qk-l{layer}", key="gqk_chart", on_select=lambda: open_clicked(texts), selection_mode="points")


def open_clicked(texts: list[str]) -> None:
    """The clicked point's sentence in the head view, at the point's layer and head, its token outlined."""
    for point in st.session_state.gqk_chart.selection.get("points", []):
        data = clicked_data(point.get("customdata"))
        if len(data) >= 4 and 0 <= int(data[0]) < len(texts):
            open_sentence(texts[int(data[0])], data[2], data[3], mark=data[1])  # the clicked token outlined
            return


def folder_points(layer: int, heads: tuple[int, ...]):
    """The chosen heads' points from a folder the command line wrote; None (and why) when it has none."""
    if policy().locked:
        st.info("This server reads only its own corpora: points from a folder are not offered.")
        return None
    folder = st.text_input(
        "Folder", key="gqk_folder", persist_state="session", max_chars=MAX_PATH, placeholder="/path/to/points"
    )
    if not folder.strip():
        st.info("Name a folder written by python -m attention.analysis.qk_global.")
        return None
    try:
        where = server_path(folder, folder=True)  # refused unless under the operator's folders
        frames, texts = store("qk-folders", 2, 200 * MB).get_or_compute(
            _stamp(where), lambda: read_folder(where, open_under)
        )
    except (FileRefused, FolderError, OSError) as err:
        st.error(plain(str(err)))
        return None
    found = {h: f for (l_, h), f in frames.items() if l_ == layer and h in heads}
    if not found:
        asked = f"layer {layer}" if len(heads) > 1 else f"layer {layer} head {heads[0]}"
        have = ", ".join(f"L{l_} H{h}" for l_, h in sorted(frames))
        st.info(plain(f"The folder has no points of {asked}: it has {have}."))
        return None
    return found, texts


def _stamp(target: Path) -> tuple:
    """A folder's or file's path (allowed and resolved: server_path) with the times its files were changed:
    a rewritten one is read again."""
    files = sorted(target.glob("*.parquet")) if target.is_dir() else [target] if target.is_file() else []
    return (str(target), tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files))


def corpus_file(where: str) -> Path | None:
    """The corpus file chosen, or None (and why) for a typed path that cannot be read."""
    if where in CORPORA:
        return CORPORA[where]
    if policy().locked:
        st.info("This server reads only its own corpora: pick GAP or the coreference examples.")
        return None
    typed = st.text_input(
        "Corpus file (one text per line, or JSON Lines with a text field)",
        key="gqk_file",
        persist_state="session",
        max_chars=MAX_PATH,
    )
    if not typed.strip():
        st.info("Name a text or JSON Lines file on the server.")
        return None
    try:
        path = server_path(typed)  # refused unless a regular file under the operator's folders
    except FileRefused as err:
        st.error(plain(f"{err}."))
        return None
    if path.stat().st_size > MAX_FILE_BYTES:  # as it is now: what grows is stopped while it is read
        st.error(plain(f"{typed.strip()} is larger than {MAX_FILE_BYTES // MB} MB; name a smaller file."))
        return None
    return path


def computed_points(source: str, where: str, layer: int, heads: tuple[int, ...]):
    """The chosen heads' points computed here (kept per model, corpus and choice); None until asked for."""
    path = corpus_file(where)
    if path is None:
        return None
    left, right = st.columns(2)
    method = right.radio(
        "Layout",
        list(GQK_LAYOUTS),
        format_func=GQK_LAYOUTS.get,
        key="gqk_method",
        persist_state="session",
        horizontal=True,
    )
    shown_as("gqk_method", GQK_LAYOUTS[method])
    cap = token_cap(method, len(heads))
    st.caption(
        f"Here UMAP lays out at most {LAID_OUT_TOKENS['umap']:,} tokens and t-SNE {LAID_OUT_TOKENS['tsne']:,}, "
        f"over all the heads drawn, and PCA up to {GQK_MAX_TOKENS:,} of each head, so that each ends within the "
        "server's time limit. The command line (python -m attention.analysis.qk_global) has no cap."
    )
    if cap < GQK_MIN_TOKENS:
        st.info(
            f"{GQK_LAYOUTS[method]} of {len(heads)} heads would lay out fewer than {GQK_MIN_TOKENS:,} tokens of "
            "each: choose PCA or one head here, or use the command line."
        )
        return None
    if st.session_state.get("gqk_tokens", GQK_MIN_TOKENS) > cap:  # from a link, or chosen for PCA
        st.session_state.gqk_tokens = cap
    if cap > GQK_MIN_TOKENS:
        tokens = left.slider(
            "Tokens of the corpus", GQK_MIN_TOKENS, cap, step=GQK_TOKEN_STEP, key="gqk_tokens", persist_state="session"
        )
    else:  # a slider needs two ends
        tokens = st.session_state.gqk_tokens = cap
        left.caption(f"{cap:,} tokens of the corpus")
    key = (source, _stamp(path), layer, heads, tokens, method)
    kept = points_store().get(key)
    if kept is not None:
        return kept
    if st.session_state.get("gqk_asked") != key:
        st.button("Compute", key="gqk_compute", on_click=lambda: st.session_state.update(gqk_asked=key))
        return None
    return compute(key, path)


def points_store():
    return store("qk-global", 3, 300 * MB)


def compute(key: tuple, path: Path):
    """The points of `key`, with a progress bar and a stop button; None (and why) when stopped or refused."""
    source, _, layer, heads, tokens, method = key
    bar, button = st.empty(), st.empty()
    button.button("Stop", key="gqk_stop", on_click=lambda: st.session_state.update(gqk_asked=None))

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / total, 1.0) * 0.5, text=f"Reading the corpus: {done:,} of {total:,} tokens…")

    def work(deadline):
        model, tokenizer = get_model(source)
        texts = iter_texts(path, limit=MAX_TEXTS, open_lines=bounded)
        sample = collect(model, tokenizer, texts, layer, heads, tokens, deadline.wrap(progress))
        frames = {}
        for i, h in enumerate(heads):
            deadline.check()
            bar.progress(0.5 + 0.5 * i / len(heads), text=f"Laying out head {h} by {GQK_LAYOUTS[method]}…")
            frames[h] = head_points(sample, h, method)
        return frames, sample.texts

    try:
        with heavy_guard() as outcome:
            result = points_store().get_or_compute_heavy(key, "global", work)
    except (CorpusError, ValueError) as err:
        st.error(plain(f"{path.name}: {err}"))
        return None
    finally:
        bar.empty()
        button.empty()
    return result if outcome.ok else None
