"""The analysis views: head statistics and patterns, rollout and flow, query·key, ablation, and the
efficient variants (grouped-query attention, fused kernels). Each reads the submitted sentence's
run; the slower steps are cached in the shared bounded stores and show progress."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import streamlit as st

from attention import ModelLoadError
from attention.analysis.ablation import ablate
from attention.bigrun import NeedsSmallerInput, is_big
from attention.analysis.rollout import FLOW_MAX_TOKENS, as_attention_tuple, attention_flow, rollout
from attention.analysis.stats import embed_heads, head_distances
from attention.analysis.gqa import kv_head_options, map_change, to_grouped
from attention.mlm import MaskedLMHead, load_mlm_head
from attention.analysis.query_key import query_key
from attention.run import run_sentence
from viz.analysis import ablation_figure, attention_pair, head_scatter, pair_stacked, query_key_figure, stats_frame
from attention.aggregate import group_means, pairwise_change
from viz.efficient import fused_panel, gqa_change_grid, gqa_groups_figure, head_change_matrix
from viz.overview import pool_map
from viz.heatmap import grid_fits, head_heatmap

from .models import get_model
from .runs import get_run, get_trace
from .stores import MB, kept, store
from .limits import deadline_check, heavy_guard
from .layout import column_px, main_px, slots
from .state import ABLATION_MODES, PRESETS, open_clicked_head, open_head
from .views import font_size, plain, sentence_patterns, show
from .workers import flow_workers

FUSED_BENCH = Path(__file__).resolve().parent.parent / "data" / "fused_bench.json"
CHANGE_MAX_CELLS = 256  # the head-against-head comparison of a GQA layer pools longer maps to this many cells
COMPARE_MAX_TOKENS = 128  # a longer sentence is left out of the head comparison (its cost grows with L²)


# ---- computations, cached per model and input ------------------------------------------------------

def comparison_sentences(text: str, text_b: str, n_tokens: int) -> list[tuple[str, str]]:
    """The examples the app offers and the submitted sentence, unless it is longer than
    COMPARE_MAX_TOKENS: the set the heads are compared over."""
    pairs = [p for p in PRESETS.values() if p != (text, text_b)]
    return ([(text, text_b)] if n_tokens <= COMPARE_MAX_TOKENS else []) + pairs


def head_map_embedding(source: str, pairs: list[tuple[str, str]], progress):
    def compute(deadline):
        progress_ = deadline.wrap(progress)
        maps = []
        for k, (text, text_b) in enumerate(pairs):
            maps.append(get_run(source, text, text_b).attentions)
            progress_(0.2 * (k + 1) / len(pairs), f"Ran {k + 1} of {len(pairs)} sentences")
        distances = head_distances(maps, progress=lambda done: progress_(0.2 + 0.8 * done, "Comparing heads…"))
        return distances, embed_heads(distances, heads_per_layer=maps[0].shape[1])

    return store("head-embeddings", 8, 20 * MB).get_or_compute_heavy((source, tuple(pairs)), "comparison", compute)


def through_layer(run, layer: int) -> tuple:
    """Layers 0..`layer` as the model's tuple of (1, H, T, T) tensors, for rollout and flow. A big run gives
    its head-averaged maps as one head each, (1, 1, T, T): both methods average the heads first, so the
    result is the same without every full map."""
    if is_big(run) and run.head_means is not None:
        return as_attention_tuple(run.head_means[: layer + 1, None])  # (layer + 1, 1, T, T)
    return as_attention_tuple(run.attentions[: layer + 1])


def rollout_at(source: str, run, text: str, text_b: str, layer: int) -> np.ndarray:
    """Rollout through `layer` (T, T), cached: about 0.3 s at 512 tokens."""
    def compute():
        return rollout(through_layer(run, layer))[-1, 0].numpy()

    return store("rollouts", 16, 50 * MB).get_or_compute((source, text, text_b, layer), compute)


def flow_into(source: str, run, text: str, text_b: str, layer: int, progress) -> np.ndarray:
    """Attention flow from the input tokens into the positions after `layer` (T, T)."""
    def compute(deadline):
        return attention_flow(through_layer(run, layer), progress=deadline.wrap(progress),
                              solve_rows=flow_workers().solve_rows)

    return store("flows", 16, 50 * MB).get_or_compute_heavy((source, text, text_b, layer), "flow", compute)


@kept(max_entries=2)
def get_mlm_head(source: str) -> tuple[MaskedLMHead | None, str | None]:
    """The checkpoint's masked-LM head, or None and why not (no head, or one that does not load)."""
    model, _ = get_model(source)
    try:
        head = load_mlm_head(model)
    except ModelLoadError as err:
        return None, f"This checkpoint's masked-LM head does not load, so there are no [MASK] guesses: {err}"
    if head is None:
        return None, ("This checkpoint has no masked-language-model head, so there are no [MASK] predictions to "
                      "compare. Load one that has (for example bert-base-uncased) to see them.")
    return head, None


@kept(max_entries=1)  # a whole model's copy: one at a time
def get_grouped_model(source: str, num_kv_heads: int, _progress=None):
    """The converted model; inside a heavy job its time limit is checked after every layer converted
    (`_progress`, or else the job's deadline). Stopped, nothing is cached."""
    model, _ = get_model(source)
    return to_grouped(model, num_kv_heads, progress=_progress or deadline_check())


def get_grouped_run(source: str, num_kv_heads: int, text: str, text_b: str):
    def compute(deadline):
        _, tokenizer = get_model(source)
        return run_sentence(get_grouped_model(source, num_kv_heads), tokenizer, text, text_b)

    return store("grouped-runs", 16, 200 * MB).get_or_compute_heavy((source, num_kv_heads, text, text_b), "gqa",
                                                                     compute)


def get_ablation(source: str, run, text: str, text_b: str, heads: tuple[tuple[int, int], ...], mode: str):
    def compute(deadline):  # the time limit is checked after each of the two forward passes
        model, tokenizer = get_model(source)
        mask = np.ones((run.n_layers, run.n_heads), dtype=np.float32)
        for layer, head in heads:
            mask[layer, head] = 0.0
        enc = run.encoded
        return ablate(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, head_mask=mask,
                      ablation=mode, mlm_head=get_mlm_head(source)[0], tokenizer=tokenizer,
                      progress=deadline.wrap(None))

    return store("ablations", 16, 200 * MB).get_or_compute_heavy((source, text, text_b, heads, mode), "ablation",
                                                                  compute)


def progress_bar(label: str):
    """A progress bar and the callback that moves it: fraction, optional text."""
    bar = st.progress(0.0, text=label)

    def update(fraction: float, text: str | None = None) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=text or label)

    return bar, update


# ---- views -----------------------------------------------------------------------------------------

def open_selected_row(frame_key: str, frame) -> None:
    rows = st.session_state[frame_key].selection.get("rows", [])
    if rows:
        open_head(frame.iloc[rows[0]]["layer"], frame.iloc[rows[0]]["head"])


def stats_view(run) -> None:
    stats, labels = sentence_patterns(run)
    st.caption("Per head, on this sentence: mean row entropy (nats), share of attention to [CLS], to [SEP], to "
               "the token itself, to the previous and next token and to punctuation, and mean distance (positions) "
               "from query to key. Click a column to sort, a row to open the head. Patterns (Kovaleva et al. 2019): "
               "vertical when [CLS]+[SEP] get ≥ 0.5, diagonal when previous+self+next get ≥ 0.5, block when a pair's "
               "queries keep ≥ 0.8 within their sentence, broad when entropy ≥ 0.7 of a uniform row's, else "
               "heterogeneous.")
    frame = stats_frame(stats, labels)
    counts = {name: int((labels == name).sum()) for name in np.unique(labels)}
    st.write("Patterns: " + ", ".join(f"{n} {name}" for name, n in counts.items()))
    st.dataframe(frame, hide_index=True, key="stats_table", on_select=lambda: open_selected_row("stats_table", frame),
                 selection_mode="single-row", height=min(36 * (len(frame) + 1), 420))

    st.subheader("Heads compared across sentences")
    pairs = comparison_sentences(*st.session_state.submitted, len(run.tokens))
    over = (f"this sentence and the {len(pairs) - 1} examples" if len(run.tokens) <= COMPARE_MAX_TOKENS else
            f"the {len(pairs)} examples (this sentence is longer than {COMPARE_MAX_TOKENS} tokens, which would take "
            "a long time, so it is left out)")
    st.caption(f"Jensen-Shannon distance between every two heads' maps, averaged over {over}, laid out in 2-D by multidimensional scaling (as in Clark et al. 2019). "
               "Nearby heads attend alike. Click a point to open the head.")
    bar, update = progress_bar("Comparing heads…")
    with heavy_guard() as outcome:
        distances, embedding = head_map_embedding(st.session_state.source, pairs, update)
    bar.empty()
    if not outcome.ok:
        return
    n_heads = run.n_heads
    index = np.arange(len(embedding.layer))
    names = [f"{labels[i // n_heads, i % n_heads]}" for i in index]
    fig = head_scatter(embedding.coords, embedding.layer, index % n_heads, labels=names, font_size=font_size())
    show(fig, "head-embedding", key="embedding_chart", on_select=lambda: open_clicked_head("embedding_chart"),
         selection_mode="points")


def rollout_view(run) -> None:
    layer, T = st.session_state.layer, len(run.tokens)
    text, text_b = st.session_state.submitted
    choice = st.radio("Beside the layer's raw attention", ["Rollout", "Flow"], key="rollout_kind", horizontal=True)
    raw = run.attentions[layer].mean(axis=0)  # (T, T) head-averaged
    labels = run.tokens
    if choice == "Rollout":
        derived = rollout_at(st.session_state.source, run, text, text_b, layer)
        title = f"Rollout through layer {layer}"
        st.caption("Rollout (Abnar & Zuidema 2020): each layer's head-averaged attention, with half the weight on "
                   "the residual path (0.5·A + 0.5·I, rows renormalised), multiplied through the layers: how much "
                   "each input token (column) reaches each position (row) after this layer. Rows sum to 1.")
    else:
        if T > FLOW_MAX_TOKENS:
            st.info(f"Attention flow is offered up to {FLOW_MAX_TOKENS} tokens; this input has {T}. It solves one "
                    f"max-flow problem for every pair of tokens ({T * T:,} of them) on a graph of all layers' "
                    f"positions: about 7 s at {FLOW_MAX_TOKENS} tokens here, and the time grows faster than T², "
                    f"to minutes at this length. Rollout is shown instead.")
            derived = rollout_at(st.session_state.source, run, text, text_b, layer)
            title = f"Rollout through layer {layer}"
        else:
            bar, update = progress_bar(f"Solving {T * T} max-flow problems…")
            with heavy_guard() as outcome:
                derived = flow_into(st.session_state.source, run, text, text_b, layer, update)
            bar.empty()
            if not outcome.ok:
                return
            title = f"Flow into layer {layer}"
            st.caption("Flow (Abnar & Zuidema 2020): the maximum flow from each input token (column) to each "
                       "position after this layer (row) through the layers' attention graph, capacities the same "
                       "residual-added attention as rollout. Values in [0, 1]; rows are not normalised.")
    if pair_stacked(labels, font_size(), main_px()):
        st.caption(f"At {T} tokens the two maps are too dense side by side: the second is drawn under the first.")
    show(attention_pair(raw, derived, labels, title, font_size=font_size(), width=main_px()), f"rollout-layer{layer}")


def query_key_view(run) -> None:
    text, text_b = st.session_state.submitted
    layer, head = st.session_state.layer, st.session_state.head
    options = list(range(len(run.tokens)))
    st.session_state.setdefault("qk_query", 0)
    if st.session_state.qk_query not in options:
        st.session_state.qk_query = 0
    query = st.selectbox("Query token", options, key="qk_query", format_func=lambda i: f"{i}: {run.tokens[i]}")
    trace = get_trace(st.session_state.source, (text,), text_b, layer)
    qk = query_key(trace, head, query)
    st.caption(f"Layer {layer}, head {head}, from the recorded forward pass: the query vector of the chosen token, "
               f"every key vector, their elementwise product, the scaled score (sum of the product × "
               f"{qk.scaling:.4f}) and the softmax probability per key.")
    show(query_key_figure(qk, run.tokens, font_size=font_size()), f"query-key-l{layer}-h{head}")


def ablation_view(run) -> None:
    text, text_b = st.session_state.submitted
    all_heads = [(layer, head) for layer in range(run.n_layers) for head in range(run.n_heads)]
    st.session_state.setdefault("ablate_heads", [(st.session_state.layer, st.session_state.head)])
    gone = [h for h in st.session_state.ablate_heads if h not in all_heads]
    if gone:  # chosen on a bigger model
        kept = [h for h in st.session_state.ablate_heads if h in all_heads]
        st.session_state.ablate_heads = kept or [(st.session_state.layer, st.session_state.head)]
        st.info("Not in this model, so no longer ablated: " + ", ".join(f"L{l} H{h}" for l, h in gone))
    left, right = st.columns([3, 2])
    heads = left.multiselect("Heads to ablate", all_heads, key="ablate_heads", format_func=lambda h: f"L{h[0]} H{h[1]}")
    mode = right.radio("Ablation", list(ABLATION_MODES.values()), key="ablate_mode", horizontal=True)
    if not heads:
        st.info("Pick one or more heads to ablate.")
        return
    with heavy_guard() as outcome:
        result = get_ablation(st.session_state.source, run, text, text_b, tuple(sorted(heads)),
                              next(word for word, label in ABLATION_MODES.items() if label == mode))
    if not outcome.ok:
        return
    st.caption("The same sentence with the chosen heads ablated: cosine between the original and the ablated hidden "
               "states per layer (mean over tokens), and how much each head's map moves (mean |Δ|). Heads before "
               "the first ablated layer do not change.")
    show(ablation_figure(result.hidden_cosine, result.attention_change, result.embedding_cosine, np.array(heads),
                         font_size=font_size()), "ablation")
    st.write(f"Sentence embedding (mean-pooled, what the default model is trained for): cosine "
             f"{result.embedding_cosine:.4f} to the original.")
    if result.predictions is not None:
        p = result.predictions
        st.write(f"Top predictions for [MASK] at position {p.position}:")
        rows = [{"rank": k + 1, "before": b[0], "p before": round(b[1], 4), "after": a[0],
                 "p after": round(a[1], 4)} for k, (b, a) in enumerate(zip(p.before, p.after))]
        st.dataframe(rows, hide_index=True)
    elif (reason := get_mlm_head(st.session_state.source)[1]) is not None:
        st.caption(plain(reason))
    else:
        st.caption("Put [MASK] in the sentence to see the model's top predictions before and after ablation.")


def get_head_change(source: str, run, text: str, text_b: str, layer: int) -> np.ndarray:
    """Mean |Δ| between every two heads' maps of one layer (H, H), cached: maps longer than
    CHANGE_MAX_CELLS tokens are pooled to that many cells a side first."""
    def compute():
        return pairwise_change(pool_map(run.attentions[layer], CHANGE_MAX_CELLS))

    return store("head-changes", 32, 8 * MB).get_or_compute((source, text, text_b, layer), compute)


def real_grouping(run, config) -> None:
    """A grouped-query model's own grouping at the chosen layer: its heads laid out by the key/value
    head they read, and how alike the maps of heads sharing one are against heads of other groups."""
    text, text_b = st.session_state.submitted
    layer = st.session_state.layer
    kv_of, H, G = config.kv_head_of, run.n_heads, config.kv_heads
    st.subheader("Grouped-query attention: this model's own grouping")
    st.caption(f"This model was trained with grouped-query attention: its checkpoint gives {G} key/value "
               f"head{'s' * (G > 1)} for its {H} query heads, so each group of {H // G} query heads reads the same "
               f"keys and values. Below, layer {layer}'s heads by the key/value head they share (the model's own "
               "grouping, nothing converted). Click a head to open it.")
    with st.spinner(f"Reading layer {layer}…"):
        maps = run.attentions[layer]  # (H, L, L): one layer, on demand for a big model
        change = get_head_change(st.session_state.source, run, text, text_b, layer)
    fig = gqa_groups_figure(pool_map(maps, 32), kv_of, layer, font_size=font_size(), width=main_px())
    show(fig, f"gqa-groups-l{layer}", key="gqa_groups_chart", on_select=lambda: open_clicked_head("gqa_groups_chart"),
         selection_mode="points")
    within, across = group_means(change, kv_of)
    pooled = len(run.tokens) > CHANGE_MAX_CELLS
    st.caption(f"Mean |Δ| between the maps of two heads of layer {layer}"
               f"{f' (pooled to {CHANGE_MAX_CELLS} × {CHANGE_MAX_CELLS} blocks)' if pooled else ''}: "
               + (f"{within:.4f} for heads sharing a key/value head, " if np.isfinite(within) else "")
               + (f"{across:.4f} for heads of different groups." if np.isfinite(across) else
                  "every head shares the one key/value head (multi-query attention)."))
    show(head_change_matrix(change, kv_of, layer, font_size=font_size(), width=main_px()), f"gqa-pairs-l{layer}")


def efficient_view(run) -> None:
    text, text_b = st.session_state.submitted
    layer, head = st.session_state.layer, st.session_state.head
    config = get_model(st.session_state.source)[0].config
    kv_heads = config.kv_heads  # fewer than n_heads: already grouped
    if kv_heads < run.n_heads:
        real_grouping(run, config)
    options = [n for n in kv_head_options(run.n_heads, kv_heads) if n < kv_heads]
    st.subheader("What-if: fewer key/value heads" if kv_heads < run.n_heads else
                 "Grouped-query attention (what-if)")
    if not options:
        st.caption("This model already shares one key/value head among all its query heads: there is no "
                   "further grouping to try.")
    elif is_big(run):
        st.info(str(NeedsSmallerInput(run.n_layers, run.n_heads, len(run.tokens))).replace(
            "This view needs", "The what-if conversion compares") + " The model's own grouping above reads one layer.")
    else:
        what_if_grouping(run, options, text, text_b, layer, head)
    fused_view()


def what_if_grouping(run, options: list[int], text: str, text_b: str, layer: int, head: int) -> None:
    """The model converted to fewer key/value heads (mean-pooled per group), against the original."""
    if st.session_state.get("gqa_kv") not in options:  # none yet, or one from a link or another model
        st.session_state.gqa_kv = options[len(options) // 2]
    kv = st.select_slider("Key/value heads", options[::-1], key="gqa_kv",
                          format_func=lambda n: f"{n} (multi-query)" if n == 1 else str(n))
    st.caption(f"A what-if: each group of {run.n_heads // kv} consecutive query heads shares one key and one value "
               "head, made by mean-pooling the group's key and value projections (how Ainslie et al. 2023 start "
               "uptraining; no training here). Mean |Δ| of each head's map against the original:")
    with st.spinner("Converting and running…"), heavy_guard() as outcome:
        grouped = get_grouped_run(st.session_state.source, kv, text, text_b)
    if not outcome.ok:
        return
    show(gqa_change_grid(map_change(run.attentions, grouped.attentions), kv, font_size=font_size(), width=main_px()),
         f"gqa-{kv}")
    beside = grid_fits(run.tokens, font_size(), column_px(2))
    width = column_px(2) if beside else main_px()
    if not beside:
        st.caption(f"At {len(run.tokens)} tokens the two maps are too dense side by side: the grouped one is "
                   "drawn under the original.")
    left, right = slots(beside)
    with left:
        show(head_heatmap(run.attentions[layer, head], run.tokens, title=f"Original: layer {layer}, head {head}",
                          font_size=font_size(), width=width), f"original-l{layer}-h{head}")
    with right:
        show(head_heatmap(grouped.attentions[layer, head], grouped.tokens,
                          title=f"{kv} key/value heads: layer {layer}, head {head}", font_size=font_size(),
                          width=width),
             f"gqa{kv}-l{layer}-h{head}")


def fused_view() -> None:
    st.subheader("Explicit attention against a fused kernel")
    try:
        bench = json.loads(FUSED_BENCH.read_text())
    except (OSError, ValueError):
        st.info("No fused-kernel benchmark results yet: run python bench/fused.py.")
        return
    st.caption("Our attention materialises the (B, H, L, S) probabilities; PyTorch's fused "
               "scaled_dot_product_attention never does. Numbers from bench/fused.py on the machine named.")
    show(fused_panel(bench), "fused")
