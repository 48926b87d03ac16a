"""What a forward pass is asked for, in two small objects.

`MapRequest` is the whole pass's: which layers' maps to keep, which query rows of them, whether to stop at the
last kept map, whether to keep hidden states, and whether to make maps one head at a time. `Call` is one
attention call's: the named implementation that turns its scores into outputs (attention/core/implementations.py),
the rows of its map to keep, a recorder of its steps and the heads it ablates. `MapRequest.call` is the one
place that chooses a layer's implementation by name from what was asked; the attention never infers it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import torch

from .dot_product import Recorder, no_record
from .implementations import IMPLEMENTATIONS
from .long import LongKeep


@dataclass(frozen=True, eq=False)
class Call:
    """One attention call: `implementation`, a name in implementations.IMPLEMENTATIONS; `rows` (B, P), the query
    positions whose map rows are kept (None: every row); `record`, called at every step; `head_mask` (H,), 1 keeps
    a head and 0 ablates it, as `ablation` says ("zero" or "uniform"); `head`, the head whose maps a "by_head" call
    records (the others are made a few rows at a time and let go); `keep`, where a "long" call puts what its map
    needs (long.LongKeep)."""

    implementation: str = "explicit"
    rows: torch.Tensor | None = None
    record: Recorder = no_record
    head_mask: torch.Tensor | None = None
    ablation: str = "zero"
    head: int | None = None
    keep: LongKeep | None = None

    def __post_init__(self):
        if self.implementation not in IMPLEMENTATIONS:
            known = ", ".join(IMPLEMENTATIONS)
            raise ValueError(f"no attention implementation {self.implementation!r}: one of {known}")


EXPLICIT = Call()  # every step written out, the map kept
FUSED = Call("fused")  # torch's fused kernel, no map


@dataclass(frozen=True, eq=False)
class MapRequest:
    """What a forward pass keeps. `layers`: the layers whose maps are kept, each other layer running fused and its
    map None (None: every layer's). `rows` (B, P), long query positions: only those rows of each kept map, every
    output computed fused (the same numbers as those rows of the full map). `stop`: only the maps are wanted, the
    last kept layer stops at its map and no layer after it runs. `keep_hidden`: every layer's hidden states kept
    (False: only the one the next layer reads). `head`: each kept layer makes its maps one head at a time, none
    made whole, and a recorded layer records this head's (attention/core/by_head.py). `keep` (long.LongKeep): a
    long pass, every layer "long", no map made and what recomputes one put in it (attention/long_maps.py)."""

    layers: Collection[int] | None = None
    rows: torch.Tensor | None = None
    stop: bool = False
    keep_hidden: bool = True
    head: int | None = None
    keep: LongKeep | None = None

    def keeps(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers

    def last(self, n_layers: int) -> int:
        """The last layer to run: the last kept one when the pass stops at its map, else the last of all."""
        if not self.stop:
            return n_layers - 1
        return max((i for i in range(n_layers) if self.keeps(i)), default=-1)

    def call(
        self,
        layer: int,
        last: int,
        rows: torch.Tensor | None = None,
        record: Recorder = no_record,
        head_mask: torch.Tensor | None = None,
        ablation: str = "zero",
    ) -> Call:
        """Layer `layer`'s call, its implementation named from what is asked: "map_only" for the layer a stopping
        pass ends at; the explicit steps ("by_head" one head at a time) when its steps are recorded or a head is
        ablated, or its map is kept whole; "rows" when only some rows are kept; "fused" when no map is; "long"
        for every layer of a long pass, which records nothing and ablates no head."""
        keep = self.keeps(layer)
        rows = rows if keep else None  # (B, P), normalised by the caller (masks.query_rows)
        changed = record is not no_record or head_mask is not None
        if self.keep is not None:
            if changed or rows is not None:
                raise ValueError("a long pass keeps no rows, records no step and ablates no head")
            return Call("long", keep=self.keep)
        if self.stop and layer == last:
            how = "map_only"
        elif changed or (keep and rows is None):
            how = "explicit" if self.head is None else "by_head"
        else:
            how = "rows" if keep else "fused"
        return Call(how, rows, record, head_mask, ablation, self.head)


EVERY_MAP = MapRequest()  # every layer's whole map and hidden states: transformers' output_attentions
NO_MAP = MapRequest(layers=())  # every layer fused
