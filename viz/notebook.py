"""bertviz's head view as one self-contained plotly figure: the layer and head are chosen in the figure.

Every (layer, head) map is a heatmap trace, drawn once. Two properties choose the one shown, so the
two menus work independently without a server: the head menu restyles ``visible`` (only that head's
traces), the layer menu restyles ``opacity`` and ``hoverinfo`` (only that layer's traces are seen and
answer the mouse). The shown trace is the one both let through. A sentence pair's filter zooms the
axes onto one block (relayout), which neither menu touches.
"""

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._maps import colour_axis, encode, hover_weight, is_compact
from viz._style import SEQUENTIAL, base_layout, clean_axis
from viz._text import head_label, position_labels
from viz.heatmap import COLORBAR_PX, DIVIDER, SLACK_PX, _label_px, _plot_px, column_ticks, dividers, row_ticks
from viz.kind_menu import kind_items, suffix
from viz.panels import Panel, chosen_layers, pair_blocks, panels

NOTEBOOK_PX = 960  # a notebook's output column
MENU_PX, MENU_GAP_PX = 40, 16  # height of the row of menus; room between two menus


def head_view(
    attentions=None,
    tokens=None,
    sentence_b_start: int | None = None,
    prettify_tokens: bool = True,
    layer: int | None = None,
    heads: int | Sequence[int] | None = None,
    *,
    encoder_attention=None,
    decoder_attention=None,
    cross_attention=None,
    encoder_tokens=None,
    decoder_tokens=None,
    include_layers: Sequence[int] | None = None,
    compact: bool | None = None,
    attention=None,
    font_size: int = 14,
    width: int | None = None,
    title: str | None = None,
) -> go.Figure:
    """One head's map at a time, with menus in the figure to choose the layer and the head.

    ``attentions`` is ``outputs.attentions`` of any model (one (batch, H, L, S) tensor per layer,
    batch 0 shown) or an (n_layers, H, L, S) array; ``attention=`` is accepted as bertviz's name.
    A seq2seq model gives ``encoder_attention``, ``decoder_attention`` and ``cross_attention`` with
    ``encoder_tokens`` and ``decoder_tokens`` instead: each kind is a panel, the same layer and head
    shown in all. ``sentence_b_start`` (the first token of sentence B) draws a divider and adds a
    menu that zooms onto one block ("A → B": A's tokens attending to B's). ``layer`` chooses the
    first layer shown and ``include_layers`` limits the layer menu.

    ``heads`` is one head (shown first) or a list of heads. Where bertviz overlays the lines of every
    listed head, each in its own colour, a list of two or more heads here starts on their overlay:
    one map whose every cell is the largest weight any of the listed heads gives it (a cell that one
    of them attends to stands out, as a line of that head's colour does in bertviz), on the same
    colour scale as a single head, and its hover names the head the weight came from
    ("... : 0.42 (H3)"). The overlay is the Head menu's first entry ("H2 + H3 (max)"), so the menu
    still opens each head alone and comes back to the overlay; the Layer menu moves it to another layer.

    Maps go as float32, or as whole percents (uint8) when ``compact`` or when float32 would pass
    ``FLOAT32_BUDGET`` (see ``viz._maps``). Tokens are escaped; ``title`` is plotly markup.
    """
    attentions = attention if attentions is None else attentions
    views = panels(
        attentions,
        tokens,
        encoder_attention=encoder_attention,
        decoder_attention=decoder_attention,
        cross_attention=cross_attention,
        encoder_tokens=encoder_tokens,
        decoder_tokens=decoder_tokens,
        prettify_tokens=prettify_tokens,
    )
    layers = chosen_layers(views, include_layers)
    n_heads = max(p.n_heads for p in views)
    first_layer = layers[0] if layer is None else int(layer)
    listed = _listed_heads(heads)
    first_head = listed[0]
    if first_layer not in layers or not all(0 <= h < n_heads for h in listed):
        raise ValueError(
            f"layer {first_layer}, heads {', '.join(map(str, listed))} are not among layers {layers}, "
            f"heads 0–{n_heads - 1}"
        )
    overlay = listed if len(listed) > 1 else []
    if sentence_b_start is not None and (len(views) > 1 or views[0].first_new is not None):
        raise ValueError(
            "sentence_b_start is for one sentence pair's attention, not an encoder-decoder's or a generation's"
        )

    n_cells = sum(p.maps[0, 0].size * (p.n_heads + bool(overlay)) for p in views for i in layers if i < p.n_layers)
    compact = is_compact(n_cells, compact)
    traces, shown = [], []  # shown: the (layer, head) of each trace, in order; OVERLAY for the listed heads'
    for index, panel in enumerate(views):
        for i in (i for i in layers if i < panel.n_layers):
            for h in range(panel.n_heads):
                traces.append(_map_trace(panel, index, i, h, compact))
                shown.append((i, h))
            if overlay and all(h < panel.n_heads for h in overlay):
                traces.append(_overlay_trace(panel, index, i, overlay, compact))
                shown.append((i, OVERLAY))
    layout = _layout(views, title, font_size, width)
    fig = go.Figure(traces, layout)
    fig.update_layout(coloraxis=colour_axis(compact, SEQUENTIAL))
    menus = [
        _menu("Layer", [(f"Layer {i}", _layer_args(shown, i)) for i in layers], layers.index(first_layer)),
        _menu(
            "Head",
            [(_overlay_name(overlay), _head_args(shown, OVERLAY))] * bool(overlay)
            + [(f"Head {h}", _head_args(shown, h)) for h in range(n_heads)],
            0 if overlay else first_head,
        ),
    ]
    if len(views) > 1:  # an encoder-decoder: its kinds together or one alone
        menus.append(_menu("Attention", kind_items(views, layout, "x"), 0, method="relayout"))
    n_tokens = len(views[0].queries)
    blocks = pair_blocks(n_tokens, sentence_b_start) if len(views) == 1 else {}
    if len(blocks) > 1 and sentence_b_start is not None:  # a pair has its second sentence's start
        menus.append(
            _menu("Sentences", [(name, _zoom_args(*block)) for name, block in blocks.items()], 0, method="relayout")
        )
    split = sentence_b_start if sentence_b_start is not None else views[0].first_new
    if split is not None and len(views) == 1:
        fig.update_layout(shapes=dividers(split, n_tokens))
    fig.update_layout(updatemenus=_placed(menus, fig.layout))
    _apply_per_trace(fig, _layer_args(shown, first_layer)[0] | _head_args(shown, OVERLAY if overlay else first_head)[0])
    return fig


OVERLAY = -1  # the "head" of a trace that overlays the listed heads


def _listed_heads(heads) -> list[int]:
    """The heads asked for, in order, each once: [0] when none is given."""
    if heads is None:
        return [0]
    if isinstance(heads, (int, np.integer)):
        return [int(heads)]
    heads = list(dict.fromkeys(int(h) for h in heads))
    if not heads:
        raise ValueError("heads is empty: give a head or a list of heads")
    return heads


def _overlay_name(heads: Sequence[int]) -> str:
    return " + ".join(f"H{h}" for h in heads) + " (max)"


def _overlay_trace(panel: Panel, index: int, layer: int, heads: Sequence[int], compact: bool) -> go.Heatmap:
    """The listed heads of one layer in one map: each cell the largest of their weights, its hover naming
    the head that gives it."""
    maps = panel.maps[layer, list(heads)]  # (k, L, S)
    strongest = np.argmax(maps, axis=0)
    return _panel_heatmap(
        panel,
        index,
        f"L{layer} {_overlay_name(heads)}",
        np.take_along_axis(maps, strongest[None], axis=0)[0],
        compact,
        " (H%{customdata})",
        np.asarray(heads, dtype=np.uint8 if max(heads) < 256 else np.int32)[strongest],
    )


def _map_trace(panel: Panel, index: int, layer: int, head: int, compact: bool) -> go.Heatmap:
    return _panel_heatmap(panel, index, head_label(layer, head), panel.maps[layer, head], compact)


def _panel_heatmap(
    panel: Panel,
    index: int,
    what: str,
    z: np.ndarray,
    compact: bool,
    hover_tail: str = "",
    customdata: np.ndarray | None = None,
) -> go.Heatmap:
    """One map of a panel (the ``index``-th, on its own axes), named "<panel> <what>" in its hover."""
    name = f"{panel.name} {what}" if panel.name else what
    return go.Heatmap(
        z=encode(z, compact),
        customdata=customdata,
        x=position_labels(panel.keys),
        y=position_labels(panel.queries),
        xaxis=f"x{suffix(index)}",
        yaxis=f"y{suffix(index)}",
        coloraxis="coloraxis",
        hovertemplate=f"{name}<br>%{{y}} → %{{x}}: {hover_weight(compact)}{hover_tail}<extra></extra>",
        name=name,
    )


def _layer_args(shown: list[tuple[int, int]], layer: int) -> list[dict]:
    """Restyle arguments showing ``layer``'s traces: the others are transparent and ignore the mouse."""
    return [
        dict(
            opacity=[1.0 if i == layer else 0.0 for i, _ in shown],
            hoverinfo=["all" if i == layer else "skip" for i, _ in shown],
        )
    ]


def _head_args(shown: list[tuple[int, int]], head: int) -> list[dict]:
    """Restyle arguments making only ``head``'s traces visible."""
    return [dict(visible=[h == head for _, h in shown])]


def _apply_per_trace(fig: go.Figure, values: dict) -> None:
    """Set each trace's own value of every per-trace list in ``values`` (as the menus' restyle does)."""
    for key, per_trace in values.items():
        for trace, value in zip(fig.data, per_trace):
            trace[key] = value


def _zoom_args(rows: slice, cols: slice) -> list[dict]:
    """Relayout arguments showing one block: the key axis over ``cols``, the query axis (first on top) over ``rows``."""
    return [{"xaxis.range": [cols.start - 0.5, cols.stop - 0.5], "yaxis.range": [rows.stop - 0.5, rows.start - 0.5]}]


def _menu(name: str, items: list[tuple[str, list[dict]]], active: int, method: str = "restyle") -> dict:
    return dict(
        type="dropdown",
        name=name,
        active=active,
        buttons=[dict(label=label, method=method, args=args) for label, args in items],
        showactive=True,
        xanchor="left",
        yanchor="top",
        pad=dict(t=0, r=0, b=0, l=0),
    )


def _placed(menus: list[dict], layout) -> list[dict]:
    """The menus in a row along the top of the figure, above the title's line if any and the key labels."""
    plot_w = layout.width - layout.margin.l - layout.margin.r
    plot_h = layout.height - layout.margin.t - layout.margin.b
    top = 1 + (layout.margin.t - 4) / plot_h  # 4 px below the figure's top edge, in plot fractions
    x, out = -layout.margin.l + 10, []
    for menu in menus:
        longest = max(len(b["label"]) for b in menu["buttons"])
        out.append(menu | dict(x=x / plot_w, y=top))
        x += longest * 9 + 40 + MENU_GAP_PX
    return out


def _layout(views: list[Panel], title: str | None, font_size: int, width: int | None) -> dict:
    """Panels side by side with square cells, keys along each top, first query on top, menus above all."""
    width = NOTEBOOK_PX if width is None else width
    axis_title_px = int(font_size * 2)
    gutters = [_label_px(p.queries, font_size) + axis_title_px + 10 for p in views]
    room = (width - sum(gutters) - COLORBAR_PX - SLACK_PX * len(views) - 10) / sum(len(p.keys) for p in views)
    natural = min(
        _plot_px(max(len(p.queries), len(p.keys)), font_size) / max(len(p.queries), len(p.keys)) for p in views
    )
    cell = max(0.25, min(natural, room))
    x_ticks = [column_ticks(p.keys, cell, font_size) for p in views]
    y_ticks = [row_ticks(p.queries, cell, font_size) for p in views]
    gutters = [t.depth + axis_title_px + 10 for t in y_ticks]
    spans = [g + cell * len(p.keys) + SLACK_PX for g, p in zip(gutters, views)]
    plot_w, plot_h = sum(spans), cell * max(len(p.queries) for p in views)
    title_px = int(font_size * 1.2 * 1.5) + 12 if title else 0
    margin = dict(l=10, r=COLORBAR_PX, b=10, t=MENU_PX + title_px + max(t.depth for t in x_ticks) + axis_title_px + 10)
    layout = base_layout(font_size, title)
    layout.update(
        margin=margin, width=int(plot_w) + margin["l"] + margin["r"], height=int(plot_h) + margin["t"] + margin["b"]
    )
    if title:
        layout["title"]["pad"] = dict(t=MENU_PX + 8)
    left = 0.0
    for index, (panel, span, gutter) in enumerate(zip(views, spans, gutters)):
        s = suffix(index)
        key_title, query_title = panel.axis_titles()
        keys, queries = position_labels(panel.keys), position_labels(panel.queries)
        xt, yt = x_ticks[index], y_ticks[index]
        layout[f"xaxis{s}"] = clean_axis(
            type="category",
            tickmode="array",
            tickvals=keys[:: xt.stride],
            ticktext=_marked(panel.keys, xt.stride, panel.first_new),
            side="top",
            tickangle=xt.angle,
            tickfont=dict(size=xt.size),
            title=dict(text=key_title),
            domain=[(left + gutter) / plot_w, (left + span) / plot_w],
            anchor=f"y{s}",
            range=[-0.5, len(keys) - 0.5],
            constrain="domain",
            constraintoward="left",
        )
        layout[f"yaxis{s}"] = clean_axis(
            type="category",
            tickmode="array",
            tickvals=queries[:: yt.stride],
            ticktext=_marked(panel.queries, yt.stride, panel.first_new),
            tickfont=dict(size=yt.size),
            title=dict(text=query_title),
            domain=[1 - cell * len(queries) / plot_h, 1],
            anchor=f"x{s}",
            range=[len(queries) - 0.5, -0.5],
            scaleanchor=f"x{s}",
            scaleratio=1,
            constrain="domain",
            constraintoward="top",
        )
        left += span
    return layout


def _marked(tokens: list[str], stride: int, first_new: int | None) -> list[str]:
    """Every ``stride``-th (escaped) token as a tick label, a generation's written tokens in the divider's colour."""
    colour = f'<span style="color:{DIVIDER["color"]}">%s</span>'
    return [colour % t if first_new is not None and i >= first_new else t for i, t in enumerate(tokens)][::stride]
