"""Long texts on the page (ui/compute/longruns.py, ui/views/head_long.py): past the bound on one layer's maps (made
small here, so a tiny model's sentence is "long"), the run keeps no map; the Head view draws the head's block map,
the exact tile and a found word's row, equal to the explicit maps; the server's caps refuse before any work; a
stopped run is not started again; every other view says what it needs, with no error."""

from __future__ import annotations

import numpy as np
import pytest
from families import make_family
from test_app import decode, figures, no_errors, start

import attention.runs.longrun as longrun
import ui.compute.longruns as longruns
from attention import load_model
from attention.runs.run import run_sentence
from viz.long import block_edges

TEXT = "the cat sat on the mat because it was tired and she read the book . " * 3


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = make_family(tmp_path_factory.mktemp("long") / "llama", "llama")
    model, tokenizer = load_model(str(folder))
    return folder, run_sentence(model, tokenizer, TEXT)


@pytest.fixture
def small_bound(monkeypatch):
    """One layer's maps of more than 4 KB are "long": the tiny model's 4 heads at 33 tokens or more."""
    monkeypatch.setattr(longrun, "BIG_RUN_BYTES", 4096)
    longruns.long_store().items.clear()


def by_title(at, words: str) -> dict:
    found = [f for f in figures(at) if words in str((f["layout"].get("title") or {}).get("text"))]
    assert len(found) == 1, [(f["layout"].get("title") or {}).get("text") for f in figures(at)]
    return found[0]


def test_the_head_view_draws_blocks_the_exact_tile_and_a_found_words_row(llama, small_bound):
    folder, full = llama
    explicit = np.asarray(full.attentions)  # (layers, H, L, L)
    L = explicit.shape[-1]
    at = start(model=str(folder), s=TEXT, layer="1", head="2")
    no_errors(at)
    assert isinstance(longruns.long_store().get((str(folder), TEXT, "")), longrun.LongRun)
    n = min(128, L)  # the block map's cells a side: one a token up to 128 tokens
    blocks = decode(by_title(at, "block means")["data"][0]["z"]).reshape(n, n)
    edges = block_edges(L, n)
    sums = np.add.reduceat(np.add.reduceat(explicit[1, 2].astype(np.float64), edges[:-1], 1), edges[:-1], 0)
    np.testing.assert_allclose(blocks, sums / np.outer(np.diff(edges), np.diff(edges)), atol=1e-6, rtol=0)
    tile = decode(by_title(at, "Queries 0–15 × keys 0–15")["data"][0]["z"]).reshape(16, 16)
    np.testing.assert_allclose(tile, explicit[1, 2, :16, :16], atol=1e-6, rtol=0)
    at.session_state["long_row0"], at.session_state["long_col0"] = 20, 3  # as a click on the block map sets them
    at.run()
    tile = decode(by_title(at, "Queries 20–35 × keys 3–18")["data"][0]["z"]).reshape(16, 16)
    np.testing.assert_allclose(tile, explicit[1, 2, 20:36, 3:19], atol=1e-6, rtol=0)
    at.text_input(key="long_find").input("SHE ").run()  # the text's words, whatever the pieces and the case
    no_errors(at)
    query = at.selectbox(key="long_query").value
    assert "she" in "".join(full.tokens[query : query + 3]).lower().replace("ġ", "")
    row_fig = by_title(at, f"Row of query {query}")  # a causal model's: over the keys the query sees, marked
    assert f"over the {query + 1} keys it sees" in row_fig["layout"]["title"]["text"]
    np.testing.assert_allclose(decode(row_fig["data"][0]["y"]), explicit[1, 2, query, : query + 1], atol=1e-6, rtol=0)
    assert not explicit[1, 2, query, query + 1 :].any()  # the keys left out: none it sees
    assert [shape["x0"] for shape in row_fig["layout"]["shapes"]] == [query]
    assert (at.session_state["long_row0"], at.session_state["long_col0"]) == (max(query - 8, 0), max(query - 15, 0))
    tile = by_title(at, f"Queries {max(query - 8, 0)}–")  # the tile moved to the query found
    assert len(tile["layout"]["yaxis"]["ticktext"]) == 16  # every token of a 16-token tile labelled


def test_the_servers_caps_refuse_before_any_work_and_keep_the_text(llama, small_bound, monkeypatch):
    folder, _ = llama
    made = []
    monkeypatch.setattr(longruns, "long_run", lambda *a, **k: made.append(1))
    monkeypatch.setattr(longruns, "LONG_MAX_TOKENS", 20)
    at = start(model=str(folder), s=TEXT)
    no_errors(at)
    assert any("ATTENTION_LONG_MAX_TOKENS" in w.value and "at most 20 tokens" in w.value for w in at.warning)
    monkeypatch.setattr(longruns, "LONG_MAX_TOKENS", 8192)
    monkeypatch.setattr(longruns, "LONG_MAX_BYTES", 1024)
    at = start(model=str(folder), s=TEXT)
    assert any("ATTENTION_LONG_MAX_MB" in w.value for w in at.warning)
    assert made == [] and at.text_area(key="text").value == TEXT and not at.get("plotly_chart")


def test_a_refusal_offers_the_first_tokens_that_fit_and_keeps_the_text(llama, small_bound, monkeypatch):
    """Past the server's caps: the text's length and the most that fits, a button that runs that many first
    tokens, the box keeping the whole text."""
    folder, full = llama
    monkeypatch.setattr(longruns, "LONG_MAX_TOKENS", 40)
    at = start(model=str(folder), s=TEXT)
    no_errors(at)
    assert any(f"This text has {len(full.tokens)} tokens" in w.value and "at most 40 tokens" in w.value
               for w in at.warning)  # fmt: skip
    next(b for b in at.button if b.label == "Run the first 40 tokens").click().run()
    no_errors(at)
    assert at.text_area(key="text").value == TEXT and not at.warning
    assert any("Running the first 40 tokens of your text" in i.value for i in at.info)
    blocks = by_title(at, "block means")["data"][0]
    assert decode(blocks["z"]).shape == (40, 40)  # one block a token: the first 40 tokens' run
    explicit = np.asarray(run_sentence(*load_model(str(folder)), at.session_state["submitted"][0]).attentions)
    assert explicit.shape[-1] == 40
    np.testing.assert_allclose(decode(blocks["z"]), explicit[0, 0], atol=1e-6, rtol=0)


def test_a_run_past_its_bound_makes_a_layer_again_and_draws_the_same_maps(llama, small_bound, monkeypatch):
    """A run that keeps layer inputs (`keeping`, made to keep every layer's here): the Head view of a layer made
    again draws the explicit maps."""
    folder, full = llama
    monkeypatch.setattr(longrun, "keeping", lambda *args: 1)
    explicit = np.asarray(full.attentions)
    at = start(model=str(folder), s=TEXT, layer="1", head="3")
    no_errors(at)
    run = longruns.long_store().get((str(folder), TEXT, ""))
    assert run.maps.keep.every == 1 and run.maps.layers == [None, None]
    tile = decode(by_title(at, "Queries 0–15 × keys 0–15")["data"][0]["z"]).reshape(16, 16)
    np.testing.assert_allclose(tile, explicit[1, 3, :16, :16], atol=1e-6, rtol=0)


def test_a_stopped_run_is_not_started_again_until_asked(llama, small_bound):
    folder, _ = llama
    at = start(model=str(folder), s="a short one")  # not long: the page as usual
    at.text_area(key="text").input(TEXT)
    at.session_state[longruns.STOPPED] = (str(folder), TEXT, "")  # what the Stop button sets
    next(b for b in at.button if b.label == "Run").click().run()
    no_errors(at)
    assert any("You stopped this text's run" in i.value for i in at.info) and not at.get("plotly_chart")
    assert longruns.long_store().get((str(folder), TEXT, "")) is None
    next(b for b in at.button if b.label == "Run it again").click().run()
    no_errors(at)
    assert any("block means" in str(f["layout"]["title"]["text"]) for f in figures(at))


def test_every_view_of_a_long_text_draws_or_says_what_it_needs(llama, small_bound):
    folder, _ = llama
    at = start(model=str(folder), s=TEXT)
    no_errors(at)
    for view in at.segmented_control(key="view").options:
        at.segmented_control(key="view").set_value(view).run()
        no_errors(at)
        said = [m.value for m in (*at.info, *at.warning)]
        assert at.get("plotly_chart") or said, view


class Attrs(dict):
    """Stands for st.session_state outside a page."""

    def __getattr__(self, name):
        return self.get(name)

    def __setattr__(self, name, value):
        self[name] = value


class Upload:
    def __init__(self, name: str, data: bytes):
        self.name, self.data, self.size = name, data, len(data)

    def getvalue(self) -> bytes:
        return self.data


@pytest.mark.parametrize(
    "data, text, said",
    [
        ("\ufeffline one\r\nline two".encode(), "line one\nline two", "“a.txt”: 17 characters, run as the sentence."),
        (b"caf\xe9", None, "“a.txt” is not UTF-8 text (byte 3); the sentence is as it was."),
        (b"  \n ", None, "“a.txt” holds no text; the sentence is as it was."),
        (("é" * 50_001).encode(), "é" * 50_000, "its first 50,000 characters (the most a sentence runs)"),
    ],
    ids=["crlf-bom", "latin-1", "blank", "past-the-box"],
)
def test_a_text_file_becomes_the_sentence_or_says_why_not(monkeypatch, data, text, said):
    from ui.state import actions

    session = Attrs(text_file=Upload("a.txt", data), text="mine", text_b="", submitted=("mine", ""), url_notices=[])
    monkeypatch.setattr(actions.st, "session_state", session)
    actions.take_text_file()
    assert any(said in n for n in session.url_notices), session.url_notices
    assert session.submitted == ((text, "") if text is not None else ("mine", ""))
    assert session.text == (text if text is not None else "mine")


def test_in_presentation_mode_the_tile_labels_each_of_its_16_rows_and_keys(llama, small_bound):
    """Presentation mode's large type: the tile takes three fifths of the row, so no label is left out."""
    folder, _ = llama
    at = start(model=str(folder), s=TEXT, layer="1", head="2", present="1")
    no_errors(at)
    layout = by_title(at, "Queries 0–15")["layout"]
    assert len(layout["xaxis"]["tickvals"]) == len(layout["yaxis"]["tickvals"]) == 16
