"""The widgets' callbacks and the actions that change what the page shows: a sentence run, continued or opened
from an example, a head opened from a click, a model asked for. Each writes session state before the next run
reads it (ui/state/state.py keeps the choices and the URL)."""

from __future__ import annotations

import streamlit as st

from attention import ModelLoadError

from ..compute.models import get_model
from ..page import registry
from .state import PRESETS
from .url_values import MAX_MARKED_TOKEN, MAX_NEW_TOKENS, MAX_TEXT_CHARS

TO_WRITE = "Load “SmolLM2-135M · writes” (the Model box, or ?model=smollm2) to see a model write."


def use_preset() -> None:
    st.session_state.head_mark = None  # marked in another sentence
    text, text_b = PRESETS[st.session_state.preset]
    st.session_state.text, st.session_state.text_b = text, text_b
    st.session_state.submitted, st.session_state.gen_picks = (text, text_b), []


def take_text_file() -> None:
    """A .txt file chosen in the sidebar: its text (its first MAX_TEXT_CHARS characters) becomes the sentence and
    runs, as an example does; a file that is not UTF-8 text, or holds none, is said and changes nothing. Its size
    is bounded before it is read (the server's maxUploadSize, .streamlit/config.toml)."""
    upload = st.session_state.get("text_file")
    if upload is None:
        return
    try:
        text = upload.getvalue().decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as err:
        notice(f"“{upload.name}” is not UTF-8 text (byte {err.start:,}); the sentence is as it was.")
        return
    if not text.strip():
        notice(f"“{upload.name}” holds no text; the sentence is as it was.")
        return
    cut = len(text) > MAX_TEXT_CHARS
    text = text[:MAX_TEXT_CHARS]
    st.session_state.text, st.session_state.text_b = text, ""
    st.session_state.submitted, st.session_state.gen_picks, st.session_state.head_mark = (text, ""), [], None
    whole = (
        f"its first {MAX_TEXT_CHARS:,} characters (the most a sentence runs)" if cut else f"{len(text):,} characters"
    )
    notice(f"“{upload.name}”: {whole}, run as the sentence.")


def cut_to_run() -> None:
    """A box holding more than MAX_TEXT_CHARS characters (a long paste) keeps its first MAX_TEXT_CHARS, and the
    page says so: the box shows what runs."""
    for key, name in (("text", "The sentence"), ("text_b", "The second sentence")):
        text = st.session_state.get(key) or ""
        if len(text) > MAX_TEXT_CHARS:
            st.session_state[key] = text[:MAX_TEXT_CHARS]
            notice(
                f"{name} was {len(text):,} characters; its first {MAX_TEXT_CHARS:,} (the most a sentence runs) "
                "are in the box and run, the rest were left out."
            )


def submit() -> None:
    """Run: the sentence as typed (cut to the most that runs), without a continuation (tokens picked in another
    text's are dropped)."""
    cut_to_run()
    typed = (st.session_state.text, st.session_state.text_b.strip())
    if typed != st.session_state.get("submitted"):
        st.session_state.gen_picks = []
    st.session_state.submitted = typed
    st.session_state.gen_on = False
    st.session_state.head_mark = None  # marked in another sentence
    st.session_state.to_figure = True  # the page opens on the figure, not on the form pressed


def notice(text: str) -> None:
    """Said above the view (under it in presentation mode) on the next run."""
    st.session_state.setdefault("url_notices", []).append(text)


def continue_text() -> None:
    """Continue: the sentence as typed, continued by the model (ui/compute/generation.py)."""
    submit()
    st.session_state.gen_on = True


def write_one() -> None:
    """Write one token: the continuation one token longer (the first token, where the sentence as typed was not
    continued), shown in the Next token view at the position whose bars chose it. What cannot be written is
    said, and the text stays as it was: an encoder, the most tokens Continue writes, the model's positions, an
    end-of-text token already written."""
    s = st.session_state
    model = get_model(s.source)[0]
    if not model.config.attention.causal:
        notice(f"Write one token needs a causal decoder (GPT-2, Llama …); this model reads text only. {TO_WRITE}")
        return
    same = bool(s.get("gen_on")) and s.submitted == (s.text, s.text_b.strip())
    written = s.get("continuation") if same else None
    n = int(s.get("gen_n", 1)) + 1 if written is not None else 1
    if written is not None and written.ended:
        notice("The model ended the text (it wrote its end-of-text token): there is nothing more to write.")
    elif n > MAX_NEW_TOKENS:
        notice(f"Continue writes at most {MAX_NEW_TOKENS} tokens; the text has them all.")
    elif written is not None and len(written.ids) >= model.config.max_position_embeddings:
        notice(f"The text fills the model's {model.config.max_position_embeddings:,} positions: no token fits after.")
    else:
        submit()
        s.gen_on, s.gen_n, s.next_follow = True, n, True  # the Next token view follows the writing
        s.view = registry.named("next").label


def branch(number: int, token: int) -> None:
    """The model's text rewritten from its written token `number` (0: the first it wrote): `token` there in place
    of the one written, then written on from it as before; tokens picked earlier in the text are kept, later ones
    (of the text rewritten) dropped. The page goes back to its top (outline.to_figure): the bars of the text
    rewritten on the first screen, where the candidate was picked in the box under them."""
    kept = [(k, t) for k, t in st.session_state.get("gen_picks") or () if k < number]
    st.session_state.gen_picks = [*kept, (int(number), int(token))]
    st.session_state.to_figure = True


def open_written(prompt_len: int) -> None:
    """A written token clicked (the `written_token` pills: its number among those written): the Next token view
    at the position whose bars chose it, where another can be picked in its place."""
    number, st.session_state.written_token = st.session_state.get("written_token"), None
    if number is not None:
        st.session_state.next_position = prompt_len + int(number) - 1
        st.session_state.view = registry.named("next").label


def select(layer: int | None = None, head: int | None = None) -> None:
    """Select `layer` and `head` (either kept where None) for the next run, as the Layer and Head boxes do: a
    view's own control or click moves the page's selection through here, never by writing it itself."""
    if layer is not None:
        st.session_state.layer = int(layer)
    if head is not None:
        st.session_state.head = int(head)


def open_head(layer: int, head: int, mark: int | None = None) -> None:
    """The head view at `layer` and `head`, with the token at position `mark` outlined in its map."""
    select(layer, head)
    st.session_state.view = registry.named("head").label
    st.session_state.head_mark = None if mark is None else min(max(int(mark), 0), MAX_MARKED_TOKEN)


def clicked_data(data) -> list:
    """A clicked point's customdata as a list. Numeric customdata reaches the browser as a typed array,
    which comes back as {"0": text, "1": position, ...}; a list comes back as a list."""
    if isinstance(data, dict):
        return [data.get(str(i)) for i in range(len(data))] if all(str(i) in data for i in range(len(data))) else []
    return list(data) if isinstance(data, (list, tuple)) else []


def open_clicked_head(chart_key: str, text: str | None = None) -> None:
    """Open the head clicked in a chart in the head view (on `text` when given)."""
    for point in st.session_state[chart_key].selection.get("points", []):
        data = clicked_data(point.get("customdata"))
        if len(data) >= 2:
            if text is None:
                open_head(data[0], data[1])
            else:
                open_sentence(text, data[0], data[1])
            return


def open_sentence(text: str, layer: int, head: int, came_from: str | None = None, mark: int | None = None) -> None:
    """Open `text` in the head view at `layer`, `head` (its token at position `mark` outlined), as if typed and
    run. `came_from` (e.g. "example 12 of
    the built-in suite") is said above the view with a button back to the sentence the person had before
    (controls.way_back); that sentence is kept until they go back or run another."""
    opened = st.session_state.get("opened_from")
    if came_from is not None:
        still = opened and st.session_state.submitted == (opened["text"], "")  # from one example to another
        boxes = (st.session_state.text, st.session_state.text_b)
        before = opened["before"] if opened and still else {"boxes": boxes, "submitted": st.session_state.submitted}
        st.session_state.opened_from = {"text": text, "came_from": came_from, "before": before}
    open_head(layer, head, mark)
    st.session_state.text, st.session_state.text_b = text, ""
    st.session_state.submitted, st.session_state.gen_picks = (text, ""), []


def go_back() -> None:
    """The way back from an opened example: the sentence the person had, run again."""
    opened = st.session_state.pop("opened_from", None)
    if opened:
        st.session_state.text, st.session_state.text_b = opened["before"]["boxes"]
        st.session_state.submitted = opened["before"]["submitted"]


def ask_for_model() -> None:
    switch_to(st.session_state.model_input.strip())


def ask_for_bundled(source: str) -> None:
    """One of the bundled models: "" the default (all-MiniLM-L6-v2), or the bundled writer's name."""
    switch_to(source)


def choose_model() -> None:
    switch_to(st.session_state.model_choice)


def switch_to(source: str) -> None:
    """Another model asked for on the page (a link's is ui/state/state.py's): a layer or head of the last model
    that this one lacks was not asked of it, so the page opens its strongest head in place (clamp_selection)."""
    st.session_state.pending_source, st.session_state.model_switched = source, True


def load_pending_model() -> None:
    """Load the model asked for, with a spinner; on failure keep the one in use and say why."""
    source = st.session_state.pop("pending_source", None)
    if source is None:
        return
    try:
        with st.spinner(f"Loading {source or 'the bundled model'}…"):
            get_model(source)
    except ModelLoadError as err:
        st.session_state.model_error = str(err)
        return
    st.session_state.source, st.session_state.model_error = source, None
