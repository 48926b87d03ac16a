"""Session state: examples, the URL in and out, the selection kept within the model (the widgets' callbacks are
in ui/state/actions.py).

Every choice a person can make on the page is a `Param`: its session-state key (the widget's key),
its name in the URL, its default and how it is written there (ui/state/url_values.py: each kind of value and
its bounds). `init_from_url` reads them on a session's first run, `keep_choices` keeps them across runs
where their widget is not drawn (an empty sentence draws no view, a view draws only its own options),
and `write_url` writes them back.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import streamlit as st

from attention.analysis.coref.heads import CRITERIA, DEFAULT_CRITERION
from attention.analysis.stats import PATTERNS
from viz.lens import MOST_SKIPPED

from ..compute.models import get_seq2seq
from ..page import registry
from .url_values import (
    _FLAG,
    _LIST,
    _PAIRS,
    _PICKS,
    _SPAN,
    GQK_MIN_TOKENS,
    MAX_FLOW_STAGES,
    MAX_LIST_ITEMS,
    MAX_MARKED_TOKEN,
    MAX_NEW_TOKENS,
    MAX_SEED,
    MAX_TOP_K,
    MAX_URL_TEXT,
    TEMPERATURES,
    Param,
    _choice,
    _decimal,
    _name,
    _number,
    _param,
    _path,
    _short,
    _target,
    _text,
    _tokens,
    _whole,
    _words,
    distinct,
)

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."
PRESETS = {
    "Coreference: it → animal (tired)": (DEFAULT_SENTENCE, ""),
    "Coreference: it → street (wide)": ("The animal didn't cross the street because it was too wide.", ""),
    "Coreference: it → trophy (big)": ("The trophy doesn't fit in the suitcase because it is too big.", ""),
    "Coreference: it → suitcase (small)": ("The trophy doesn't fit in the suitcase because it is too small.", ""),
    "Sentence pair": ("The cat sat on the mat.", "It was warm and soft."),
    "Sub-word pieces": ("Tokenization splits unbelievably uncommon words into pieces.", ""),
}
# pronoun, candidates, answer for the examples the app offers
PRESET_COREF = {
    DEFAULT_SENTENCE: ("it", ["animal", "street"], "animal"),
    "The animal didn't cross the street because it was too wide.": ("it", ["animal", "street"], "street"),
    "The trophy doesn't fit in the suitcase because it is too big.": ("it", ["trophy", "suitcase"], "trophy"),
    "The trophy doesn't fit in the suitcase because it is too small.": ("it", ["trophy", "suitcase"], "suitcase"),
}
SHORT_SECOND = "It was tired."  # the padded partner in the masks view when there is no segment B
COREF_MODES = {"sentence": "This sentence", "suite": "Suite", "pairs": "Minimal pairs"}
COREF_TWINS = {"suite": "The suite's twins", "sentence": "This sentence and a twin"}
COREF_RANKS = {name: name for name in CRITERIA}  # how the sentence's heads are ranked (coref.heads.CRITERIA)
COREF_SETS = {
    "builtin": "Built-in",
    "winogender": "Winogender",
    "gapdev": "GAP development",
    "gapval": "GAP validation",
    "upload": "Upload",
}
NO_GROUPING = "none"
DRAW_MODES = {"heatmap": "Heatmap", "lines": "Lines"}
DERIVED = {"rollout": "Rollout", "flow": "Flow"}
ABLATION_MODES = {"zero": "Zero the head's output", "uniform": "Uniform attention"}
SHAPEFLOW_DEFAULT_STEP = "probs"
# the global Q·K view's choices: where its points come from, which heads, the colours and the layout
GQK_CORPORA = {
    "gap": "GAP (development)",
    "examples": "Coreference examples",
    "file": "A file on the server",
    "folder": "A folder of computed points",
}
GQK_SCOPES = {"head": "This head", "layer": "Every head of the layer"}
GQK_COLOURS = {"kind": "Query or key", "position": "Position", "token_kind": "Token kind"}
GQK_LAYOUTS = {"pca": "PCA", "umap": "UMAP", "tsne": "t-SNE"}  # PCA first: seconds where UMAP takes a minute
# the Head stats view: this sentence's heads or a corpus run's (a folder), and what its grid shows
# the Overview's outlines: each head's share of attention to the first token (an attention sink's mark)
SINK_COLOURS = {"none": "No outline", "raw": "Raw", "weighted": "Value-weighted"}
# the Mixing view: what goes beside the raw attention (ui/views/mixing.py)
MIXING_KINDS = {
    "head": "Value-weighted, this head",
    "layer": "Value-weighted, the layer",
    "zeroing": "Value zeroing, the layer",
}
STATS_OVER = {"sentence": "This sentence", "corpus": "A corpus run (folder)"}
STATS_MEASURES = {"entropy": "Entropy (nats)", **{p: f"Share of texts: {p}" for p in PATTERNS}}
CROSS_PARTS = {"cross": "Cross-attention", "decoder": "Decoder self-attention", "encoder": "Encoder self-attention"}

PARAMS = [
    _param("view", "view", "view", registry.DEFAULT.label, registry.url_codec(), always=True),
    _param("layer", "layer", "layer", 0, _number, always=True),
    _param("head", "head", "head", 0, _number, always=True),
    _param("present", "present", "presentation mode", False, _FLAG),
    _param("show_strip", "strip", "token strip of a long input", False, _FLAG),
    _param("draw", "draw", "draw as", DRAW_MODES["heatmap"], _choice(DRAW_MODES)),
    _param("line_heads", "heads", "heads drawn as lines", [], _LIST),
    _param("hide_special", "hide", "hide [CLS]/[SEP]", False, _FLAG),
    _param("renormalize", "renorm", "renormalise rows", True, _FLAG),
    _param("merge_words", "merge", "merge word pieces", False, _FLAG),
    _param("head_mark", "mark", "marked token", None, _number, bounds=(0, MAX_MARKED_TOKEN)),
    _param("overview_patterns", "patterns", "pattern labels", False, _FLAG),
    _param(
        "overview_sinks",
        "sink",
        "heads outlined by the first token's share",
        SINK_COLOURS["none"],
        _choice(SINK_COLOURS),
    ),
    _param("mixing_kind", "mix", "beside the raw map", MIXING_KINDS["head"], _choice(MIXING_KINDS)),
    _param("shapeflow_padded", "padded", "padded batch", False, _FLAG),
    _param("shapeflow_step", "step", "step", SHAPEFLOW_DEFAULT_STEP, _name),
    _param("shapeflow_stage", "stage", "stage of the shape flow", None, _number, bounds=(1, MAX_FLOW_STAGES)),
    _param("coref_mode", "coref", "coreference mode", COREF_MODES["sentence"], _choice(COREF_MODES)),
    _param("coref_pronoun", "pronoun", "pronoun (word index)", None, _number),
    _param("coref_candidates", "candidates", "candidates (word indices)", None, _LIST),
    _param("coref_answer", "answer", "answer (word index)", None, _number),
    _param("coref_rank", "rank", "rank heads by", DEFAULT_CRITERION, _choice(COREF_RANKS)),
    _param("coref_pair", "pair", "twin sentences", 0, _number),
    _param("coref_twins", "twins", "twin sentences from", COREF_TWINS["suite"], _choice(COREF_TWINS)),
    _param("coref_twin", "twin", "twin sentence", None, _text),
    _param("coref_twin_answer", "tanswer", "answer in the twin", None, _text),
    _param("coref_set", "set", "coreference examples", COREF_SETS["builtin"], _choice(COREF_SETS)),
    _param("coref_by", "by", "group by", NO_GROUPING, _text),
    _param("coref_group_a", "ga", "group A", None, _text),
    _param("coref_group_b", "gb", "group B", None, _text),
    _param("coref_compare", "vs", "second model", "", _text),
    _param("rollout_kind", "derived", "beside the raw map", DERIVED["rollout"], _choice(DERIVED)),
    _param("qk_query", "query", "query token", 0, _number),
    _param("ablate_heads", "ablate", "heads ablated", None, _PAIRS),
    _param("ablate_mode", "ablation", "ablation", ABLATION_MODES["zero"], _choice(ABLATION_MODES)),
    _param("gqa_kv", "kv", "key/value heads", None, _number),
    _param("gqk_corpus", "corpus", "points from", GQK_CORPORA["gap"], _choice(GQK_CORPORA)),
    _param("gqk_file", "file", "corpus file", "", _path),
    _param("gqk_folder", "folder", "folder of points", "", _path),
    _param("gqk_scope", "scope", "heads", GQK_SCOPES["head"], _choice(GQK_SCOPES)),
    _param("gqk_colour", "colour", "colour by", "kind", _words(GQK_COLOURS)),
    _param("gqk_tokens", "tokens", "tokens of the corpus", GQK_MIN_TOKENS, _tokens),
    _param("gqk_method", "layout", "layout", "pca", _words(GQK_LAYOUTS)),
    _param("stats_over", "over", "head statistics of", STATS_OVER["sentence"], _choice(STATS_OVER)),
    _param("stats_run", "run", "corpus run folder", "", _path),
    _param("stats_measure", "measure", "grid shows", STATS_MEASURES["entropy"], _choice(STATS_MEASURES)),
    _param("walk_step", "walk", "step of the walk", 0, _number),
    _param("target", "target", "target text", "", _target),
    _param("cross_part", "part", "attention part", CROSS_PARTS["cross"], _choice(CROSS_PARTS)),
    _param("gen_on", "cont", "continued", False, _FLAG),
    _param("gen_n", "n", "new tokens", 20, _number, bounds=(1, MAX_NEW_TOKENS)),
    _param("gen_sample", "sample", "sampled", False, _FLAG),
    _param("gen_temperature", "temp", "temperature", 1.0, (_short, _decimal), bounds=TEMPERATURES),
    _param("gen_top_k", "topk", "top-k (0: off)", 0, _number, bounds=(0, MAX_TOP_K)),
    _param("gen_top_p", "topp", "top-p", 1.0, (_short, _decimal), bounds=(0.01, 1.0)),
    _param("gen_seed", "seed", "seed", 0, _whole, bounds=(0, MAX_SEED)),
    _param("gen_picks", "pick", "tokens picked", [], _PICKS),
    _param(
        "lens_every",
        "every",
        "every k-th layer of the lens (0: as the figure holds)",
        0,
        _number,
        bounds=(0, MOST_SKIPPED),
    ),
    _param("lens_span", "layers", "layers of the lens", None, _SPAN),
    _param("next_position", "pos", "position", None, _number),
    # the bars' comparison temperature: by default the sampling temperature (ui/views/next_token.py)
    _param("next_temperature", "t", "temperature of the bars", None, (_short, _decimal), bounds=TEMPERATURES),
    _param("source", "model", "model", "", _path),
]
registry.check_params(p.name for p in PARAMS)


WRITTEN_BACK = ("show_strip",)  # choices drawn by a widget without persist_state (an expander)


def init_from_url() -> None:
    """On a session's first run, restore the sentence(s), the model and every choice from the URL."""
    if "ready" in st.session_state:
        return
    st.session_state.ready = True
    params, notices = st.query_params, []
    text, text_b = params.get("s", DEFAULT_SENTENCE), params.get("s2", "")
    if len(text) > MAX_URL_TEXT or len(text_b) > MAX_URL_TEXT:
        notices.append(f"The link's sentence is longer than {MAX_URL_TEXT:,} characters; the default is shown.")
        text, text_b = DEFAULT_SENTENCE, ""
    st.session_state.text, st.session_state.text_b = text, text_b
    st.session_state.submitted = (text, text_b)
    for p in PARAMS:
        if p.key == "source":  # loaded below, like a typed source
            continue
        if p.default is not None:
            st.session_state[p.key] = p.default
        if p.name not in params:
            continue
        try:
            st.session_state[p.key] = capped(p, p.read(params[p.name]), notices)
        except ValueError as err:
            if p.name == "view":
                notices.append(f"Unknown view in the link; showing {registry.DEFAULT.label}.")
            else:
                default = p.write(p.default) if p.default not in (None, "", []) else "the default"
                notices.append(f"The link's {p.name} is {err}; using {default}.")
    st.session_state.source = ""
    if params.get("model"):  # loaded as if typed in the model box: an error is shown, the bundled model kept
        try:
            st.session_state.pending_source = _path(params["model"]).strip()
        except ValueError as err:  # read before any path is looked at (a long one made the file system raise)
            notices.append(f"The link's model is {err}; using the bundled model.")
    if "pronoun" in params or "candidates" in params:
        st.session_state.coref_prefilled = text  # the link's choice, not the example's
    # no head in the link: the first run opens one worth seeing (see choose_first_head)
    st.session_state.pick_head = "layer" not in params and "head" not in params
    st.session_state.url_notices = notices


def capped(p: Param, value, notices: list[str]):
    """A list from the link cut to its first MAX_LIST_ITEMS distinct items, a number to its Param's bounds,
    each with a notice saying so."""
    if p.bounds is not None and not p.bounds[0] <= value <= p.bounds[1]:
        low, high = p.bounds
        kept = type(value)(min(max(value, low), high))
        notices.append(
            f"The link's {p.name} is {_shown(value)}, outside {_shown(low)}–{_shown(high)}; using {_shown(kept)}."
        )
        return kept
    if not isinstance(value, list) or len(value) <= MAX_LIST_ITEMS:
        return value
    notices.append(
        f"The link's {p.name} names {len(value):,} different items; a list may have at most "
        f"{MAX_LIST_ITEMS}, so the first {MAX_LIST_ITEMS} are used."
    )
    return value[:MAX_LIST_ITEMS]


def _shown(number) -> str:
    """A number as a notice writes it: a whole one in full (a seed's ten digits), a decimal as 0.7 or 5."""
    return str(number) if isinstance(number, int) else f"{number:g}"


def keep_choices() -> None:
    """Keep every choice across runs. Streamlit forgets a widget's value after a run that does not draw it,
    unless the widget is drawn with `persist_state="session"`, as every choice's is (a test keeps it so). An
    expander has no such option: its choice is written back as the script's own value, which lasts until it is
    drawn again. Only there: a value the script writes is sent to the browser with the widget and replaces a
    pick made while the run went on (a second head picked in "Heads to draw" during the first pick's run was
    lost, 1 run in 4 under load, when every choice was written back)."""
    for key in WRITTEN_BACK:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    if st.session_state.get("view") not in registry.labels():
        st.session_state.view = registry.DEFAULT.label


def fit_view(kinds: Collection[str]) -> None:
    """The chosen view, when it is not for this model (a link's, or the last model's), becomes the first view,
    with a notice saying what the view needs; a view for models that write is offered on the bundled writer
    (session_state.offer_writer, its label: controls.writer_offer)."""
    view = registry.by_label(st.session_state.get("view"))
    st.session_state.offer_writer = None
    if not view.applies(kinds):
        st.session_state.url_notices.append(
            f"{view.label} needs {view.needs}; this model is not one, so {registry.DEFAULT.label} is shown."
        )
        st.session_state.view = registry.DEFAULT.label
        if view.applies({"causal"}):  # a view for models that write: the bundled writer is one click away
            st.session_state.offer_writer = view.label


def view_key() -> str:
    """The chosen view's short name ("head", "overview", ...), as in the URL."""
    return registry.by_label(st.session_state.get("view")).key


def current_choices() -> list[tuple[Param, Any]]:
    """The choices that shape the page of the chosen view, with their values."""
    reads = registry.SHARED + registry.by_label(st.session_state.get("view")).reads
    return [(p, st.session_state[p.key]) for p in PARAMS if p.key in st.session_state and p.name in reads]


def write_url() -> None:
    text, text_b = st.session_state.submitted  # as typed: a continuation is written again from the link
    params = {
        p.name: p.write(value)
        for p, value in current_choices()
        if value is not None and (p.always or value != p.default)
    }
    if len(text) <= MAX_URL_TEXT and len(text_b) <= MAX_URL_TEXT:
        params["s"] = text
        if text_b:
            params["s2"] = text_b
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)


def clamp_selection(n_layers: int, n_heads: int) -> None:
    """The chosen layer and head within this model, and each list of choices without repeats: the heads
    drawn as lines within its n_heads, so that no view does work per repeat or per head it lacks. A layer or
    head asked for (a link, a box) is said when clamped; one left from the model before a switch is not: the
    strongest head of this model is opened in its place (app.choose_view)."""
    switched = st.session_state.pop("model_switched", False)
    for name, n in zip(("layer", "head"), offered(n_layers, n_heads)):
        value = st.session_state.get(name, 0)
        if not 0 <= value < n:
            if switched:
                st.session_state.pick_head = True
            else:
                st.session_state.url_notices.append(
                    f"{name.capitalize()} {value} does not exist in {layers_part()} "
                    f"(0–{n - 1}); showing {min(max(value, 0), n - 1)}."
                )
            st.session_state[name] = min(max(value, 0), n - 1)
    heads = st.session_state.get("line_heads") or []
    if len(distinct(heads)) != len(heads) or any(h >= n_heads for h in heads):  # at most n_heads, each once
        st.session_state.line_heads = [h for h in distinct(heads) if h < n_heads]
    # each once; pairs outside this model are the ablation view's to name, candidates past the sentence's
    # words the coreference view's
    for key in ("ablate_heads", "coref_candidates"):
        chosen = st.session_state.get(key)
        if chosen and len(distinct(chosen)) != len(chosen):
            st.session_state[key] = distinct(chosen)


def offered(n_layers: int, n_heads: int) -> tuple[int, int]:
    """How many layers and heads the Layer and Head boxes offer: the run's `n_layers` and `n_heads` (an
    encoder-decoder's encoder's), but in the Cross-attention view of a part of the decoder (cross- or
    self-attention) the decoder's, more or fewer."""
    if layers_shown() != "decoder":
        return n_layers, n_heads
    config = get_seq2seq(st.session_state.source)[0].decoder.config
    return config.num_hidden_layers, config.num_attention_heads


def layers_shown() -> str:
    """Whose layers the Layer box lists: the model's, or an encoder-decoder's "encoder" or "decoder" (the
    decoder's in the Cross-attention view of a part of the decoder)."""
    if get_seq2seq(st.session_state.source) is None:
        return "model"
    view = registry.by_label(st.session_state.get("view")).key
    decoder = view == "cross" and st.session_state.get("cross_part") != CROSS_PARTS["encoder"]
    return "decoder" if decoder else "encoder"


def layers_part() -> str:
    """Whose layers and heads the Layer and Head boxes list, in words: "this model", or its encoder or decoder."""
    part = layers_shown()
    return "this model" if part == "model" else f"this model's {part}"
