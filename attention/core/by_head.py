"""A layer's attention one head at a time, for a trace that keeps one head's maps (attention/tracing/trace.py, past the
big-run bound): each head's scores and probabilities, (B, 1, L, S), are made, used and let go before the next
head's, so no (B, H, L, S) map is ever made whole; the kept head's are recorded as the whole layer's would be.

Each head runs the same steps and kernels as the whole layer (scaled_dot_product_attention on its slice of q,
k, v and the mask): a query row's scores, softmax and weighted sum read that row and that head only, so the
numbers are those of the whole layer's (tests/unit/test_bound_trace.py compares them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .dot_product import Recorded, Recorder, no_record, scaled_dot_product_attention

if TYPE_CHECKING:
    from .mha import MultiHeadAttention
    from .request import Call

FILE = __file__  # the recorder in trace.py skips this module's frames: it shows the lines that called
# the steps, the kept head's as the whole layer's
MAP_STEPS = ("scores", "softcap", "masked_scores", "probs", "c2p", "p2c")  # recorded (B, H, L, S), the rest as is
ROWS_BYTES = 2**20  # a head not kept makes its scores this many bytes at most at a time: a few query rows


def attend(
    attention: MultiHeadAttention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    call: Call,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """scaled_dot_product_attention's (heads (B, H, L, d), probs) head by head, q, k and v (B, H, ·, d) after
    the sharing of key/value heads, `mask` broadcastable to (B, H, L, S); the score terms that read q and k
    (attention.terms) are added to each head's mask as it comes. probs is head `call.head`'s only, (B, 1, L, S),
    in a recorded layer (`call.record` given); None in any other (every head a few rows at a time)."""
    n_heads, record = q.size(1), call.record
    kept_head = call.head if record is not no_record else None  # the recorded layer's; no other keeps one
    heads, kept = [], None
    for h in range(n_heads):
        one = slice(h, h + 1)
        own = mask if mask is None or mask.size(1) == 1 else mask[:, one]  # (B or 1, 1, L or 1, S)
        steps = _as_layer(record, n_heads) if h == kept_head else no_record
        own = attention.add_terms(q[:, one], k[:, one], own, steps, head=h)  # (B, 1, L, S)
        ablated = None if call.head_mask is None else call.head_mask[one]
        # the kept head's map whole (recorded); any other's a few query rows at a time, ROWS_BYTES at most each
        step = q.size(2) if h == kept_head else max(1, ROWS_BYTES // (4 * q.size(0) * k.size(2)))
        for start in range(0, q.size(2), step):
            rows = slice(start, start + step)
            part = own if own is None or own.size(2) == 1 else own[:, :, rows]  # (B or 1, 1, rows or 1, S)
            out, probs = scaled_dot_product_attention(
                q[:, one, rows], k[:, one], v[:, one], part, attention.scaling, attention.dropout_p, steps, ablated,
                call.ablation, attention.cap, attention.sink_logits(head=h),
            )  # fmt: skip
            heads.append(out)  # (B, 1, rows, d)
            kept = probs if h == kept_head else kept
            del out, probs, part
        del own
    merged = torch.cat(heads, dim=2).view(q.size(0), n_heads, q.size(2), -1)  # head by head, row by row
    return record("heads", merged), kept  # (B, H, L, d), (B, 1, L, S) or None


def _as_layer(record: Recorder, n_heads: int) -> Recorder:
    """The kept head's recorder: its maps handed over as the layer's (B, H, L, S) (a view, no copy: each head's
    place reads this head's numbers; trace.py keeps the kept head's slice of it); its weighted sum, "heads",
    left to `attend`, which records every head's."""

    def steps(name: str, tensor: Recorded) -> Recorded:
        if name == "heads":
            return tensor
        if name in MAP_STEPS and tensor is not None:
            record(name, tensor.expand(tensor.size(0), n_heads, *tensor.shape[2:]))
            return tensor
        return record(name, tensor)

    return steps
