"""Multi-head attention in the paper's steps: project, split into heads, positions, scores, mask, softmax,
weighted sum, merge, output. How a family projects and normalises q and k is a part chosen when the attention is
built (qkv.py); how scores become outputs is a named implementation the caller chooses (implementations.py,
request.py); the steps themselves are dot_product.py's.

Shapes use one set of letters throughout:
    B batch, L query length, S key/value length, D model width,
    H query heads, G key/value heads (G divides H), d head width (D = H * d).
Attention maps are always laid out as [batch, head, query_pos, key_pos] = (B, H, L, S).

Each step passes its result through `record(name, tensor)` (dot_product.py), which returns the tensor unchanged;
attention/tracing/trace.py passes a recorder that keeps the tensor and the line of code that made it, so the shape-flow
diagram shows the real forward pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .dot_product import Recorder, attention_probs, no_record
from .implementations import IMPLEMENTATIONS
from .masks import build_mask, pick_rows
from .qkv import PROJECTIONS, QK_NORMS, VALUE_NORMS, split_heads
from .request import EXPLICIT, Call
from .rotary import rotate
from .score_parts import Sinks, SoftCap


class KeyValueCache:
    """One layer's keys and values of the positions already seen, (B, G, P, d) each, after rotary and before
    the groups share them: a causal decoder writing token by token computes only the new positions' k and v."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.size(2)

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The new positions' k and v (B, G, L, d) appended: the keys and values of all P + L positions."""
        if self.k is not None and self.v is not None:
            k, v = torch.cat((self.k, k), dim=2), torch.cat((self.v, v), dim=2)  # (B, G, P + L, d)
        self.k, self.v = k, v
        return k, v


class MultiHeadAttention(nn.Module):
    """Multi-head attention with named projections q_proj, k_proj, v_proj and o_proj.

    num_kv_heads < num_heads gives grouped-query attention: each key/value head serves a group
    of num_heads // num_kv_heads query heads (num_kv_heads = 1 is multi-query attention).
    The parts (qkv.py): `projection` "separate" (q_proj, k_proj, v_proj), "fused" (one qkv_proj, D -> (H + 2G)·d,
    cut into Q, K and V) or "per_head" (one qkv_proj laid out [q_h k_h v_h] per head); `qk_norm` None, "head"
    (each head's q and k over d) or "projection" (all heads' q, all heads' k, over H·d and G·d), its norms made by
    `make_norm(width)`. head_dim: d when it is not D / H (then H·d ≠ D); out_bias: o_proj's bias when it differs
    from the others'. scaling: what the scores are multiplied by, when not d ** -0.5.
    Score parts: `cap`, a part of score_parts.py that bends the scaled scores before the mask (`softcap`: Gemma 2's
    cap · tanh(s / cap); torch's fused kernel cannot, so a fused call takes the explicit steps and lets the map
    go); `sinks`: each head's learned logit joins every row's softmax as a column of no key (gpt-oss; score_parts.Sinks,
    the explicit steps too); `terms`, parts that read q and k and add to the scores as the mask is added (set by
    the model that owns them: models/disentangled.py). `value_norm`: the eps of a weight-free RMSNorm on each head's
    v (Gemma 4; qkv.ValueRMSNorm), None for none.
    Cross-attention (an encoder-decoder's decoder reading the encoder) is the same module, given the
    encoder's output as its key and value.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        projection: str = "separate",
        head_dim: int | None = None,
        out_bias: bool | None = None,
        qk_norm: str | None = None,
        make_norm: Callable[[int], nn.Module] = nn.LayerNorm,
        scaling: float | None = None,
        softcap: float | None = None,
        sinks: bool = False,
        value_norm: float | None = None,
    ):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if head_dim is None and d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}")
        if projection not in PROJECTIONS or qk_norm not in QK_NORMS:
            raise ValueError(f"no such part: projection {projection!r}, qk_norm {qk_norm!r}")
        if projection == "per_head" and num_kv_heads != num_heads:
            raise ValueError("a per-head Q·K·V layout needs one K/V head per query head")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.head_dim = head_dim or d_model // num_heads
        self.scaling = self.head_dim**-0.5 if scaling is None else scaling
        self.cap = None if softcap is None else SoftCap(softcap)  # a score part (score_parts.py), or none
        self.sink = Sinks() if sinks else None  # each head's learned sink in the softmax (score_parts.py), or none
        if sinks:
            self.sinks = nn.Parameter(torch.zeros(num_heads))  # (H,) one logit per query head
        self.dropout = dropout
        self.projection, self.qk_norm = projection, qk_norm
        self.project = PROJECTIONS[projection]  # input -> q (B, H, L, d), k and v (B, G, S, d)
        self.qk_norm_part = QK_NORMS[qk_norm]
        self.value_norm_part = VALUE_NORMS[value_norm is not None]  # each head's v normalised, or as projected
        self.value_eps = 0.0 if value_norm is None else value_norm
        self.terms: tuple[Callable[..., torch.Tensor], ...] = ()  # term(q, k, mask, record, head, rows) -> mask
        # widths of Q, K and V: H·d, G·d, G·d
        self.qkv_widths = (num_heads * self.head_dim, num_kv_heads * self.head_dim, num_kv_heads * self.head_dim)
        if projection == "separate":
            self.q_proj = nn.Linear(d_model, num_heads * self.head_dim, bias=bias)
            self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
            self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        else:
            self.qkv_proj = nn.Linear(d_model, sum(self.qkv_widths), bias=bias)
        self.o_proj = nn.Linear(num_heads * self.head_dim, d_model, bias=bias if out_bias is None else out_bias)
        widths = self.qk_norm_part.widths(self)
        if widths is not None:
            self.q_norm, self.k_norm = make_norm(widths[0]), make_norm(widths[1])

    @property
    def fused_qkv(self) -> bool:
        return self.projection != "separate"

    @property
    def fusable(self) -> bool:
        """Whether torch's fused kernel computes what these parts do: every score term is a mask; a cap may not be."""
        return all(part is None or part.fusable for part in (self.cap, self.sink))

    @property
    def dropout_p(self) -> float:
        return self.dropout if self.training else 0.0

    def sink_logits(self, head: int | None = None, groups: int | None = None) -> torch.Tensor | None:
        """The sinks shaped to the scores' heads: (1, H, 1, 1); one `head`'s, (1, 1, 1, 1); or in `groups` of query
        heads as by_group reads them, (1, G, H/G, 1). None without sinks."""
        if self.sink is None:
            return None
        if head is not None:
            return self.sinks[head].view(1, 1, 1, 1)
        if groups is not None:
            return self.sinks.view(1, groups, -1, 1)
        return self.sinks.view(1, -1, 1, 1)

    def split_heads(self, x: torch.Tensor, n_heads: int, name: str, record: Recorder) -> torch.Tensor:
        """(B, T, n·d) -> (B, n, T, d), recorded as `{name}_view` and `{name}_heads`."""
        return split_heads(x, n_heads, self.head_dim, name, record)

    def add_terms(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        mask,
        record: Recorder,
        head: int | None = None,
        rows: slice | None = None,
    ):
        """The mask with the score-term parts that read q and k added to it, (B, H, L, S) additive; the mask as it
        is without such parts. `head`: q and k are that one head's (by_head.py); `rows`: q and the mask are those
        query rows' only, (B, ·, P, ·), and so is what is returned (long.py)."""
        for term in self.terms:
            mask = term(q, k, mask, record, head=head, rows=rows)
        return mask

    def share(
        self, k: torch.Tensor, v: torch.Tensor | None, record: Recorder
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Grouped K and V, (B, G, S, d), repeated over each group of query heads: (B, H, S, d)."""
        if self.num_kv_heads == self.num_heads:
            return k, v
        group = self.num_heads // self.num_kv_heads
        k = record("k_shared", k.repeat_interleave(group, dim=1))  # (B, G, S, d) -> (B, H, S, d)
        if v is not None:
            v = record("v_shared", v.repeat_interleave(group, dim=1))  # (B, G, S, d) -> (B, H, S, d)
        return k, v

    def map_rows(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        mask: torch.Tensor | None,
        rows: torch.Tensor | None,
        record: Recorder = no_record,
        head_mask: torch.Tensor | None = None,
        ablation: str = "zero",
    ) -> torch.Tensor:
        """The map of the queries `rows` (B, P) against every key, with their rows of the mask: (B, H, P, S),
        the same numbers as those rows of the full map; every query's, (B, H, L, S), when rows is None."""
        if rows is not None:
            q = pick_rows(q, rows)  # (B, H, L, d) -> (B, H, P, d)
            mask = None if mask is None else pick_rows(mask, rows)  # (B, 1, P or 1, S)
        sink = self.sink_logits()
        return attention_probs(q, k, mask, self.scaling, record, head_mask, ablation, self.cap, sink)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KeyValueCache | None = None,
        call: Call = EXPLICIT,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """query (B, L, D); key and value (B, S, D), by default the query (self-attention).

        `rotary` (cos, sin), each (B or 1, L, d) from rotary.rotary_angles, turns q and k by their positions
        (RoPE) before the scores; self-attention only. `cache` (self-attention only): the keys and values of the
        P positions before these, which this call extends; the queries are the last L of the P + L positions, so
        S is P + L and a mask given must be (B or 1, 1, L, P + L). `call` (request.py): the named implementation
        (implementations.py), the map rows kept, a recorder of the steps, heads ablated.
        With half-precision weights the softmax is taken in float32 and the probs are float32.
        Returns (output (B, L, D), probs (B, H, L, S), or (B, H, P, S) for the call's rows, as used, ablated heads
        included; None when the implementation keeps no map); output None when only the map was asked for.
        """
        key = query if key is None else key
        value = key if value is None else value
        B, L, _ = query.shape
        if value.size(1) != key.size(1):
            raise ValueError(f"key and value lengths differ: {key.size(1)} vs {value.size(1)}")
        rows = call.rows
        if rows is not None and (rows.dim() != 2 or rows.size(0) != B):
            raise ValueError(f"rows must be (batch, n_rows) query positions, got {tuple(rows.shape)} for batch {B}")
        how, record = IMPLEMENTATIONS[call.implementation], call.record
        record("input", query)  # (B, L, D)
        # 1. project, split into heads: q (B, H, L, d), k and v (B, G, S, d), by the family's parts
        q, k, v = self.project(self, query, key, value, record, how.values)
        q, k = self.qk_norm_part.heads(self, q, k, record)
        v = self.value_norm_part(self, v, record)
        # 2. positions enter here, and only here (rotary.py)
        if rotary is not None:
            q = record("q_rot", rotate(q, *rotary))  # (B, H, L, d)
            k = record("k_rot", rotate(k, *rotary))  # (B, G, S, d)
        if cache is not None and v is not None:  # the earlier positions' keys and values go before these
            k, v = cache.extend(k, v)  # (B, G, P + L, d) each
        if how.shares:  # each key/value head read by its group of query heads
            k, v = self.share(k, v, record)  # (B, H, S, d)
        # 3. the mask; then scores, softmax and the weighted sum of the values, as the call's implementation does
        mask = record("mask", build_mask(attention_mask, is_causal, B, L, k.size(2), device=query.device))
        heads, probs = how.run(self, q, k, v, mask, call)  # (B, H, L, d), (B, H, L or P, S) or None
        if heads is None:  # only the map was asked for
            return None, probs
        # 4. merge the heads, and the output projection
        merged = record("merged", heads.transpose(1, 2).reshape(B, L, -1))  # (B, L, H, d) -> (B, L, H·d)
        return record("output", self.o_proj(merged)), probs  # (B, L, D)
