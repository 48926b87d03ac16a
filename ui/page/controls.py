"""The page's inputs: the sidebar (the title, presentation mode, the examples and the model) and the
sentence form, a compact row above the view so that the view's figure starts on the first screen."""

from __future__ import annotations

import re

import streamlit as st

from attention.load.sources import WRITER_NAME
from attention.models import FAMILIES

from ..compute.models import get_model, get_seq2seq, precision_caption
from ..serve.sources import policy
from ..state.actions import (
    ask_for_bundled,
    ask_for_model,
    choose_model,
    continue_text,
    go_back,
    submit,
    take_text_file,
    use_preset,
    write_one,
)
from ..state.state import PRESETS
from ..state.url_values import (
    MAX_NEW_TOKENS,
    MAX_PASTE_CHARS,
    MAX_PATH,
    MAX_SEED,
    MAX_TARGET_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOP_K,
    TEMPERATURES,
)
from ..state.view_context import RunKey
from .page import plain

# the bundled models by the name the model box takes: "" the default encoder, WRITER_NAME the writer
BUNDLED = {"": "all-MiniLM-L6-v2 · reads", WRITER_NAME: "SmolLM2-135M · writes"}


def sidebar():
    """The sidebar; returns its place for the token strip (filled once the sentence has run)."""
    with st.sidebar:
        st.title("Attention visualizer")
        st.toggle("Presentation mode", key="present", persist_state="session")
        examples()
        st.file_uploader(
            "A long text from a file",
            type=["txt"],
            key="text_file",
            on_change=take_text_file,
            help=f"A UTF-8 .txt file (at most 2 MB; its first {MAX_TEXT_CHARS:,} characters) run as the sentence. "
            "A text past what one layer's maps can hold is drawn a tile at a time.",
        )
        strip = st.container()
        model, _ = get_model(st.session_state.source)
        if model.config.attention.causal:
            continue_settings()
        st.header("Model")
        c = model.config
        part = " encoder-decoder, its encoder's" if get_seq2seq(st.session_state.source) else ""
        st.caption(
            f"In use: {plain(model.load_report.source)} — {c.model_type}{part}"
            f"{' (causal)' if c.attention.causal else ''}, {c.num_hidden_layers} layers × "
            f"{c.num_attention_heads} heads, width {c.hidden_size}{precision_caption(model.load_report)}"
        )
        rules = policy()
        bundled_models(st.session_state.source)
        if rules.locked:  # a public server: only the operator's list, nothing typed reaches the disk
            choices = ["", *rules.allowed]  # the bundled writer has its button above
            if st.session_state.get("model_choice") not in choices:
                st.session_state.model_choice = st.session_state.source if st.session_state.source in choices else ""
            st.selectbox(
                "Model",
                choices,
                key="model_choice",
                on_change=choose_model,
                format_func=lambda s: s or "all-MiniLM-L6-v2 (bundled)",
            )
        else:
            with st.form("model_form"):
                st.text_input(
                    "Checkpoint folder or hub id",
                    key="model_input",
                    max_chars=MAX_PATH,
                    placeholder="empty: the bundled all-MiniLM-L6-v2",
                    help="Families: "
                    + ", ".join(f.title for f in FAMILIES.values())
                    + " (encoder-decoders: their encoder in every view, the decoder in Cross-attention)",
                )
                st.form_submit_button("Load model", on_click=ask_for_model)
        if st.session_state.get("model_error"):
            st.error(plain(st.session_state.model_error) + "  \nThe previous model stays in use.")
        if model.load_report.ignored_keys:  # a short line, which and why in its tooltip
            line, why = unused_tensors(model.load_report.ignored_keys)
            st.caption(line, help=why)
    return strip


def writer_offer() -> None:
    """Where a view for models that write was asked of a model that reads (fit_view): one click opens it on the
    bundled writer."""
    label = st.session_state.get("offer_writer")
    if label:
        st.button(
            f"Open {label} on {BUNDLED[WRITER_NAME]}", key="offer_writer_button", on_click=open_on_writer, args=(label,)
        )


def open_on_writer(label: str) -> None:
    ask_for_bundled(WRITER_NAME)
    st.session_state.view = label


def bundled_models(source: str) -> None:
    """The two bundled models by name, one click each: the one in use is shown pressed."""
    for column, (name, label) in zip(st.columns(2), BUNDLED.items()):
        in_use = source.strip().lower() == name
        column.button(
            label,
            key=f"bundled_{name or 'default'}",
            disabled=in_use,
            on_click=ask_for_bundled,
            args=(name,),
            width="stretch",
        )


# what a checkpoint's tensor is, by its name, when the model does not load it: (pattern, kind, why it is fine)
UNUSED_KINDS = (
    (
        r"position_ids|token_type_ids",
        "position ids",
        "the numbers 0, 1, 2, … (or segment ids) that older checkpoints saved; the model counts them itself",
    ),
    (
        r"attn\.(bias|masked_bias)|inv_freq",
        "saved buffers",
        "a causal mask or rotary frequencies that older checkpoints saved; the model makes them from its settings",
    ),
    (r"pooler", "pooler", "a layer a sentence classifier puts on the first token's final vector"),
    (
        r"lm_head|cls\.|embed_out|predictions|final_logits_bias|^head\.|^decoder\.",
        "word-prediction head",
        "turns the last layer's vectors into word guesses; the Next token view and Ablation's masked-word "
        "guesses read it themselves",
    ),
)
OTHER_HEAD = ("task head", "a classifier or question-answering head on the last layer's vectors")


def unused_tensors(keys) -> tuple[str, str]:
    """The sidebar's line for a checkpoint's tensors the model does not load, and its tooltip: which they are
    (a weight and its bias counted once) and, in words, why none matters to the attention shown."""
    kinds: dict[str, tuple[str, list[str]]] = {}
    for key in keys:
        kind, why = next(((k, w) for p, k, w in UNUSED_KINDS if re.search(p, key)), OTHER_HEAD)
        name = key if kind in ("position ids", "saved buffers") else re.sub(r"\.(weight|bias)$", "", key)
        names = kinds.setdefault(kind, (why, []))[1]
        if name not in names:
            names.append(name)
    n = sum(len(names) for _, names in kinds.values())
    lines = [
        f"**{kind}**: {why}. {plain(', '.join(names[:6]))}" + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        for kind, (why, names) in kinds.items()
    ]
    why = (
        "Tensors in the checkpoint that this model does not load. The attention maps are made inside the "
        "layers, before any of these, so none of them changes what the views show.\n\n" + "\n\n".join(lines)
    )
    return f"Unused tensors: {n} ({', '.join(kinds)}), none read by attention", why


def input_form() -> None:
    """The sentence form. Presentation mode: folded with the examples, under the figure. Otherwise one
    row: the sentence, the optional second sentence and Run."""
    if st.session_state.present:  # the figure is the point; the form folds away
        writes = causal()
        with st.expander("Sentence, examples and writing" if writes else "Sentence and examples"):
            examples()
            _sentence_form()
            if writes:  # no sidebar here: how Continue writes, beside it
                continue_settings(beside=True)
    else:
        _sentence_form(compact=True)


def causal() -> bool:
    """Whether the model in use writes (a causal decoder; an encoder-decoder has its own Target box)."""
    source = st.session_state.source
    return get_seq2seq(source) is None and get_model(source)[0].config.attention.causal


def continue_settings(beside: bool = False) -> None:
    """How Continue writes: how many tokens, greedily or sampled (temperature, top-k, top-p, seed); in the
    sidebar's expander, or `beside` the sentence form in one row (presentation mode, which has no sidebar)."""
    box = st.container() if beside else st.expander("Continue: how the model writes")
    with box:
        n, on, temperature, top_k, top_p, seed = st.columns([1.2, 1.4, 1.6, 1.3, 1.6, 1.2]) if beside else [box] * 6
        n.number_input("New tokens", 1, MAX_NEW_TOKENS, key="gen_n", persist_state="session")
        sample = on.toggle(
            "Sample",
            key="gen_sample",
            persist_state="session",
            help="Off: greedy, the most probable token at each step",
        )
        temperature.slider(
            "Temperature", *TEMPERATURES, step=0.05, key="gen_temperature", persist_state="session", disabled=not sample
        )
        top_k.number_input(
            "Top-k (0: off)", 0, MAX_TOP_K, key="gen_top_k", persist_state="session", disabled=not sample
        )
        top_p.slider("Top-p", 0.01, 1.0, step=0.01, key="gen_top_p", persist_state="session", disabled=not sample)
        seed.number_input("Seed", 0, MAX_SEED, key="gen_seed", persist_state="session", disabled=not sample)


def examples() -> None:
    st.selectbox(
        "Examples", list(PRESETS), index=None, placeholder="Pick an example…", key="preset", on_change=use_preset
    )


def _sentence_form(compact: bool = False) -> None:
    """``compact``: the boxes and Run side by side, the sentence box as low as it goes. An encoder-decoder
    has a Target box in place of the second sentence: what its decoder is given to read (empty: it writes its
    own); a causal model has Continue beside Run."""
    writes = get_seq2seq(st.session_state.source) is not None
    continues = causal()
    with st.form("sentence_form", border=not compact):
        spec = [4.5, 2.5, 1, 1.6, 2.4] if continues else [6, 3, 1]  # Continue's and Write one token's labels whole
        boxes = places(spec, compact)
        first, second, run = boxes[:3]
        # a box takes a paste far past what runs, so that Run can say where it cut it (a browser drops a paste
        # longer than a box's max_chars without a word)
        first.text_area("Sentence", key="text", height=68 if compact else 90, max_chars=MAX_PASTE_CHARS)
        if not writes:
            second.text_input(
                "Second sentence (optional)",
                key="text_b",
                max_chars=MAX_PASTE_CHARS,
                help="Segment B: the model reads the two sentences as a pair",
            )
        else:  # an encoder-decoder reads one sentence: the box goes, what it holds stays for an encoder
            st.session_state.text_b = st.session_state.get("text_b", "")
            second.text_input(
                "Target (optional)",
                key="target",
                persist_state="session",
                max_chars=MAX_TARGET_CHARS,
                placeholder="empty: the model writes it",
                help="The decoder's text, forced as its input (teacher forcing); empty: written greedily",
            )
        run.form_submit_button("Run", type="primary", on_click=submit)
        if continues:  # a decoder writes: Continue runs the sentence and the model's continuation of it
            boxes[3].form_submit_button(
                "Continue", on_click=continue_text, help="Run, then let the model write after the sentence"
            )
            boxes[4].form_submit_button(
                "Write one token",
                key="write_one",
                on_click=write_one,
                help="The model writes one more token after the text: the Next token view shows its choice",
            )


def places(spec: list[float] | list[int], compact: bool) -> list:
    """The form's places: its boxes and buttons side by side (`compact`, at `spec`'s widths), else each box across
    the form and the buttons in one row under them."""
    if compact:
        return list(st.columns(spec, vertical_alignment="bottom"))
    first, second = st.container(), st.container()
    widths = [1, 1.5, 2.2][: len(spec) - 2]  # Run, Continue, Write one token: their labels whole
    return [first, second, *st.columns([*widths, 8 - sum(widths)])[: len(widths)]]


BACK_CHARS = 60  # of the sentence named on the way back's button


def way_back(key: RunKey) -> None:
    """Where a sentence opened from elsewhere (an example of a coreference suite) came from, and a button back
    to the person's own sentence; shown while the opened sentence is the one run (`key`: not a continuation)."""
    opened = st.session_state.get("opened_from")
    if not opened or (key.text, key.text_b) != (opened["text"], ""):
        st.session_state.pop("opened_from", None)  # another sentence was run: nothing to go back from
        return
    mine = opened["before"]["submitted"][0]
    short = mine if len(mine) <= BACK_CHARS else mine[: BACK_CHARS - 1] + "…"
    left, right = st.columns([3, 2], vertical_alignment="center")
    left.caption(f"This sentence is {plain(opened['came_from'])}, opened from the Coreference view.")
    right.button(f"Back to “{plain(short)}”" if mine.strip() else "Back to your sentence", on_click=go_back)
