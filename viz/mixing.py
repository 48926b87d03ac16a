"""The Mixing view's figure: a head's (or its layer's) raw attention beside what it moves, the value-weighted map
(attention/analysis/mixing.norm_maps), or the layer's raw attention beside its value zeroing (mixing.value_zeroing).
Same tokens, same colour scale, each row divided by its sum so that the two maps' shares compare."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from viz._maps import layer_maps
from viz.rollout import attention_pair


def shares(matrix: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The kept rows and columns, each row divided by its sum (0 where a row has nothing left), float32."""
    part = np.asarray(matrix)[np.ix_(keep, keep)].astype(np.float64)
    total = part.sum(axis=1, keepdims=True)
    return np.divide(part, total, out=np.zeros_like(part), where=total > 0).astype(np.float32)


def mixing_maps(
    attentions, layer: int, head: int | None = None, *, weighted=None, zeroing=None
) -> tuple[np.ndarray, np.ndarray, str, str]:
    """(raw, moved, raw title, moved title) of what mixing_view draws, before shares: with `zeroing` (n, n) the
    layer's mean over heads beside it; else with `weighted` (a NormMaps) head `head`'s map beside its value-weighted
    one, or with head None the layer's mean beside the layer's ‖Σ_h a·f(x)‖. A clear ValueError otherwise."""
    maps = layer_maps(attentions)  # (n_layers, H, L, S)
    if (weighted is None) == (zeroing is None):
        raise ValueError("give either weighted= (mixing.norm_maps' result) or zeroing= (mixing.value_zeroing's)")
    n_layers, n_heads = maps.shape[:2]
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < n_layers:
        raise ValueError(f"layer must be an integer from 0 to {n_layers - 1}, got {layer!r}")
    if head is not None and (isinstance(head, bool) or not isinstance(head, (int, np.integer))):
        raise ValueError(f"head must be an integer from 0 to {n_heads - 1} or None, got {head!r}")
    if head is not None and not 0 <= head < n_heads:
        raise ValueError(f"head must be an integer from 0 to {n_heads - 1} or None, got {head!r}")
    if zeroing is not None:
        return (
            maps[layer].mean(axis=0),
            np.asarray(zeroing),
            "Attention, mean over heads",
            f"Value zeroing, layer {layer}",
        )
    if head is not None:
        return (
            maps[layer, head],
            weighted.heads[layer][head],
            f"Attention, L{layer} H{head}",
            f"‖a·f(x)‖, L{layer} H{head}",
        )
    return (
        maps[layer].mean(axis=0),
        weighted.layers[layer],
        "Attention, mean over heads",
        f"‖Σ_h a·f(x)‖, layer {layer}",
    )


def mixing_view(
    attentions,
    tokens: Sequence[str],
    layer: int,
    head: int | None = None,
    *,
    weighted=None,
    zeroing=None,
    keep: np.ndarray | None = None,
    font_size: int = 12,
    width: int | None = None,
    height: int | None = None,
    min_label: int | None = None,
    byte_level: bool = False,
) -> go.Figure:
    """Raw attention beside what it moves (the module's docstring; which pair as mixing_maps says), over the
    tokens where `keep` (bool, (L,)) is True (all by default), each row divided by its sum.

    ``attentions`` is a model's ``outputs.attentions`` or an (n_layers, H, L, L) array, as head_view takes; tokens
    are escaped and labelled as text (half a character of a ``byte_level`` tokenizer's as its bytes); the figure is
    attention_pair's (one colour scale for both maps, at most ``width`` × ``height``)."""
    raw, moved, raw_title, title = mixing_maps(attentions, layer, head, weighted=weighted, zeroing=zeroing)
    keep = np.ones(len(tokens), dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    if keep.shape != (len(tokens),) or raw.shape != (len(tokens), len(tokens)) or moved.shape != raw.shape:
        raise ValueError(
            f"{len(tokens)} tokens, keep {keep.shape}, maps {raw.shape} and {moved.shape}: they must agree"
        )
    labels = [t for t, k in zip(tokens, keep) if k]
    return attention_pair(
        shares(raw, keep),
        shares(moved, keep),
        labels,
        title,
        font_size=font_size,
        width=width,
        height=height,
        min_label=min_label,
        raw_title=raw_title,
        byte_level=byte_level,
    )
