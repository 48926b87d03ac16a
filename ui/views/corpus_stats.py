"""The Head stats view over a corpus: a finished run of python -m attention.analysis.corpus, opened from its
folder (under ATTENTION_FILE_DIRS: ui/serve/corpus_runs.py), as a layer × head grid of one pattern's share of texts
or the mean entropy, and the sortable table of every head. The folder and the choice are in the link."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st

from attention.analysis.stats import PATTERNS
from viz.coref import head_grid

from ..page.layout import main_px
from ..page.page import font_size, plain, present_size, show, show_table, show_text
from ..serve.corpus_runs import CorpusRun, RunFolderError, read_corpus_run
from ..serve.sources import FileRefused, policy
from ..state.state import STATS_MEASURES
from ..state.url_values import MAX_PATH

ENTROPY = STATS_MEASURES["entropy"]
GRID_PX = 300  # the grid's height beside the page's controls: on a 1280 × 800 screen, under the view's choices


def draw_corpus(left, right, present: bool, slot=None) -> None:
    """The corpus run named in the folder box (drawn in `left`; the measure in `right`); `slot`: where its grid
    goes (presentation, `present`: above the controls)."""
    measure = right.selectbox("Grid shows", list(STATS_MEASURES.values()), key="stats_measure", persist_state="session")
    run = opened_run(left)
    if run is None:
        return
    with slot or st.container():
        show(grid_figure(run, measure, present), "corpus-grid", key="corpus_grid")
    record = run.record
    file = Path(str(record.get("file", "?"))).name  # the file's name: where it lies on the server is not the point
    texts = file + (f" (field {record['field']})" if record.get("field") != "text" else "")
    show_text(
        plain(
            f"Model {record.get('model', '?')}, over {texts}: {int(run.heads.tokens.iloc[0]):,} tokens, "
            f"{run.n_layers} layers × {run.n_heads} heads. Click a column of the table to sort by it."
        ),
        "corpus-run",
    )
    show_table(run.heads, "Each head over the corpus", hide_index=True, key="corpus_table", height=420)


def opened_run(place) -> CorpusRun | None:
    """The finished corpus run named in the folder box (drawn in `place`; the same box in Head stats and the
    Overview), or None, with a message saying why (a locked server, no folder yet, not a finished run)."""
    if policy().locked:
        st.info("This server reads only its own corpora: corpus runs from a folder are not offered.")
        return None
    typed = place.text_input(
        "Corpus run folder",
        key="stats_run",
        persist_state="session",
        max_chars=MAX_PATH,
        placeholder="/path/to/run (its --out)",
    )
    if not typed.strip():
        st.info("Name the --out folder of a finished run of python -m attention.analysis.corpus.")
        return None
    try:
        return read_corpus_run(typed)
    except (FileRefused, RunFolderError, OSError) as err:
        st.error(plain(" ".join(f"{err}".split())))
        return None


def corpus_patterns(corpus: CorpusRun, n_layers: int, n_heads: int) -> dict[tuple[int, int], str] | None:
    """Each head's pattern over the corpus: the one it takes in the most texts (the first of equal shares, in
    PATTERNS' order); None, with a message, when the run is of a model of another shape."""
    if (corpus.n_layers, corpus.n_heads) != (n_layers, n_heads):
        st.info(
            plain(
                f"This corpus run is of {corpus.record.get('model', 'a model')} with {corpus.n_layers} layers × "
                f"{corpus.n_heads} heads; the model in use has {n_layers} × {n_heads}."
            )
        )
        return None
    shares = np.stack([corpus.grid(f"share_{p}") for p in PATTERNS])  # (patterns, n_layers, H)
    most = shares.argmax(0)
    return {(layer, head): PATTERNS[most[layer, head]] for layer in range(n_layers) for head in range(n_heads)}


def grid_figure(run: CorpusRun, measure: str, present: bool):
    """The layer × head grid of `measure` (a label of STATS_MEASURES), sized to the page's width and to
    GRID_PX high (presenting, `present`: the first screen's height), its cells no smaller than viz.coref's
    least."""
    if measure == ENTROPY:
        values, kind = run.grid("entropy"), "entropy"
        title = "Mean entropy of each head's rows over the corpus (nats)"
    else:
        label = next(word for word, shown in STATS_MEASURES.items() if shown == measure)
        values, kind = run.grid(f"share_{label}"), "share"
        title = f"Share of the corpus's texts in which each head is {label}"
    height = present_size(present).get("height", GRID_PX)
    return head_grid(values, title, kind=kind, font_size=font_size(present), width=main_px(present), height=height)
