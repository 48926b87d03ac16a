"""What a corpus run may add to each (text, layer, head) row beyond stats.head_stats (`--measures`):

    sinks     to_first, to_first_weighted: the head's share of attention to the text's first token, of the
              probabilities as they are and of the value-weighted maps ‖a_ij f_h(x_j)‖ (mixing.sink_shares' numbers)
    weighted  <stat>_weighted for each of scoring.STATS: stats.head_stats of the value-weighted maps, each row
              divided by its sum (what the head moves, not where it looks)

Both read one more forward pass per text, the text alone and unpadded (mixing.each_layer: its values and
probabilities, layer by layer, each layer's maps let go once reduced), so a text measures exactly as it would alone.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from ...runs.inputs import Encoded
from ..mixing import each_layer, head_norms
from ..stats import first_share, head_stats, punctuation_mask
from .columns import SINK_COLUMNS, STATS, WEIGHTED_COLUMNS

COLUMNS = {"sinks": SINK_COLUMNS, "weighted": WEIGHTED_COLUMNS}
MEASURES = tuple(COLUMNS)


def measure_columns(measures: Iterable[str]) -> tuple[str, ...]:
    """The columns `measures` add to a row, in MEASURES' order."""
    chosen = set(measures)
    return tuple(column for measure, columns in COLUMNS.items() if measure in chosen for column in columns)


def check_measures(measures: Iterable[str]) -> tuple[str, ...]:
    """The measures asked for, each once, in MEASURES' order; a ValueError naming one that is not of MEASURES."""
    asked = [m.strip() for m in measures if m.strip()]
    unknown = [m for m in asked if m not in MEASURES]
    if unknown:
        raise ValueError(f"unknown measure {unknown[0]!r}: choose from {', '.join(MEASURES)}")
    return tuple(m for m in MEASURES if m in asked)


def text_measures(model, encoded: Encoded, measures: tuple[str, ...]) -> dict[str, np.ndarray]:
    """measure_columns' values of one text, (n_layers, H) float64 each, from one forward pass of the text alone."""
    per_layer: dict[str, list[np.ndarray]] = {name: [] for name in measure_columns(measures)}
    punct = punctuation_mask(encoded.tokens)

    def keep(i: int, probs: torch.Tensor, f: torch.Tensor, records: dict) -> None:
        by_head = head_norms(probs, f).cpu().numpy()  # (H, L, L) float64: ‖a_ij f_h(x_j)‖
        if "sinks" in measures:
            per_layer["to_first"].append(first_share(probs.double().cpu().numpy(), shares=False))  # (H,)
            per_layer["to_first_weighted"].append(first_share(by_head))  # (H,)
        if "weighted" in measures:
            total = by_head.sum(axis=-1, keepdims=True)
            shares = np.divide(by_head, total, out=np.zeros_like(by_head), where=total > 0)  # (H, L, L)
            of_layer = head_stats(shares[None], encoded.special, encoded.sequence_ids, punct)  # {stat: (1, H)}
            for name in STATS:
                per_layer[f"{name}_weighted"].append(of_layer[name][0])

    each_layer(model, encoded.input_ids, None, keep)
    return {name: np.stack(rows) for name, rows in per_layer.items()}
