"""Multi-head attention, written out step by step, on the scaled dot-product attention of dot_product.py.

Shapes use one set of letters throughout:
    B batch, L query length, S key/value length, D model width,
    H query heads, G key/value heads (G divides H), d head width (D = H * d).
Attention maps are always laid out as [batch, head, query_pos, key_pos] = (B, H, L, S).

Each step passes its result through `record(name, tensor)` (dot_product.py), which returns the tensor unchanged;
attention/trace.py passes a recorder that keeps the tensor and the line of code that made it, so the shape-flow
diagram shows the real forward pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import by_head
from .dot_product import Recorder, attention_probs, no_record, scaled_dot_product_attention
from .masks import build_mask, pick_rows
from .rotary import rotate


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
    fused_qkv: one projection qkv_proj, D -> (H + 2G)·d, whose output is cut into Q, K and V
    (GPT-2's c_attn); self-attention only. head_dim: d when it is not D / H (then H·d ≠ D);
    out_bias: o_proj's bias when it differs from the others' (Qwen2: q/k/v biased, o not).
    qkv_per_head: the fused projection's output is laid out per head, [q_h k_h v_h] for each head h
    (GPT-NeoX's query_key_value), not [Q K V]. qk_norm: q_norm and k_norm, made by `make_norm(width)`,
    normalise q and k before rotary: "head" each head's d (Qwen3), "projection" all heads' H·d (OLMo2).
    scaling: what the scores are multiplied by, when not d ** -0.5 (T5: 1, its q weights hold the scale).
    softcap: the scaled scores capped to tanh(s / softcap) · softcap before the mask (Gemma2); torch's fused
    attention cannot, so the explicit steps run even when no map is kept.
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
        fused_qkv: bool = False,
        head_dim: int | None = None,
        out_bias: bool | None = None,
        qkv_per_head: bool = False,
        qk_norm: str | None = None,
        make_norm: Callable[[int], nn.Module] = nn.LayerNorm,
        scaling: float | None = None,
        softcap: float | None = None,
    ):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if head_dim is None and d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_heads {num_heads} is not divisible by num_kv_heads {num_kv_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim or d_model // num_heads
        self.scaling = self.head_dim**-0.5 if scaling is None else scaling
        self.softcap = softcap
        self.dropout = dropout
        self.fused_qkv = fused_qkv
        self.qkv_per_head = qkv_per_head
        self.qk_norm = qk_norm
        # relative(q, k, mask, record) -> the mask with terms added to the scores that read q and k themselves
        # (DeBERTa's content-to-position and position-to-content, models/disentangled.py); None: none
        self.relative: Callable[..., torch.Tensor] | None = None
        if qkv_per_head and (not fused_qkv or num_kv_heads != num_heads):
            raise ValueError("a per-head Q·K·V layout needs fused_qkv and one K/V head per query head")
        # widths of Q, K and V: H·d, G·d, G·d
        self.qkv_widths = (num_heads * self.head_dim, num_kv_heads * self.head_dim, num_kv_heads * self.head_dim)
        if fused_qkv:
            self.qkv_proj = nn.Linear(d_model, sum(self.qkv_widths), bias=bias)
        else:
            self.q_proj = nn.Linear(d_model, num_heads * self.head_dim, bias=bias)
            self.k_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
            self.v_proj = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * self.head_dim, d_model, bias=bias if out_bias is None else out_bias)
        if qk_norm is not None:  # over d, or over H·d and G·d
            self.q_norm = make_norm(self.head_dim if qk_norm == "head" else self.qkv_widths[0])
            self.k_norm = make_norm(self.head_dim if qk_norm == "head" else self.qkv_widths[1])

    def split_heads(self, x: torch.Tensor, n_heads: int, name: str, record: Recorder) -> torch.Tensor:
        """(B, T, n·d) -> (B, n, T, d), recorded as `{name}_view` and `{name}_heads`."""
        B, T, _ = x.shape
        x = record(f"{name}_view", x.view(B, T, n_heads, self.head_dim))  # (B, T, n, d)
        return record(f"{name}_heads", x.transpose(1, 2))  # (B, n, T, d)

    def split_per_head(self, qkv: torch.Tensor, record: Recorder) -> tuple[torch.Tensor, ...]:
        """A fused projection laid out per head, (B, L, H·3·d), as q, k and v (B, H, L, d): views, no copy."""
        B, L, _ = qkv.shape
        d = self.head_dim
        per_head = qkv.view(B, L, self.num_heads, 3 * d)  # (B, L, H, 3·d): [q_h k_h v_h] for each head h
        views = [record(f"{x}_view", per_head[..., i * d : (i + 1) * d]) for i, x in enumerate("qkv")]  # (B, L, H, d)
        return tuple(record(f"{x}_heads", view.transpose(1, 2)) for x, view in zip("qkv", views))  # (B, H, L, d)

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
        return attention_probs(q, k, mask, self.scaling, record, head_mask, ablation, self.softcap)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        record: Recorder = no_record,
        head_mask: torch.Tensor | None = None,
        ablation: str = "zero",
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        keep_map: bool = True,
        rows: torch.Tensor | None = None,
        map_only: bool = False,
        cache: KeyValueCache | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """query (B, L, D); key and value (B, S, D), by default the query (self-attention).

        `rotary` (cos, sin), each (B or 1, L, d) from rotary.rotary_angles, turns q and k by their
        positions (RoPE) before the scores; self-attention only.
        keep_map=False, with nothing recorded and no head ablated, runs torch's fused
        F.scaled_dot_product_attention instead of the explicit steps: no (B, H, L, S) map is kept
        and None is returned in its place.
        `rows` (B, P), query positions (long), keeps only those rows of the map: the output is still
        computed for every query (by the fused attention when nothing is recorded or ablated), and
        the returned probs are (B, H, P, S), those rows of q against every key with the same mask,
        scaling, rotation and shared K/V: the same numbers as the rows of the full map.
        map_only=True: only the map (or its `rows`) is wanted; no values, no output: returns (None, probs).

        `head_mask` (H,), 1 = keep and 0 = ablate, with `ablation` "zero" or "uniform", changes
        the heads' probabilities after the softmax (see `ablate_heads`).
        With half-precision weights the softmax is taken in float32 and the probs are float32.
        `cache` (self-attention only): the keys and values of the P positions before these, which this
        call extends; the queries are the last L of the P + L positions, so S is P + L and a mask given
        must be (B or 1, 1, L, P + L).
        Returns (output (B, L, D), probs (B, H, L, S) or with `rows` (B, H, P, S)), probs as used,
        ablated heads included.
        """
        key = query if key is None else key
        value = key if value is None else value
        B, L, _ = query.shape
        S = key.size(1)
        if value.size(1) != S:
            raise ValueError(f"key and value lengths differ: {S} vs {value.size(1)}")
        if rows is not None and (rows.dim() != 2 or rows.size(0) != B):
            raise ValueError(f"rows must be (batch, n_rows) query positions, got {tuple(rows.shape)} for batch {B}")
        record("input", query)  # (B, L, D)

        if self.fused_qkv and (key is not query or value is not query):
            raise ValueError("a fused Q·K·V projection does self-attention only: give no key or value")
        if not self.qkv_per_head:
            if self.fused_qkv:
                Q, K, _ = self.qkv_widths
                qkv = record("qkv_proj", self.qkv_proj(query))  # (B, L, (H+2G)·d)
                q = record("q_proj", qkv[..., :Q])  # (B, L, H·d)
                k = record("k_proj", qkv[..., Q : Q + K])  # (B, S, G·d)
                v = record("v_proj", qkv[..., Q + K :])  # (B, S, G·d)
            else:
                q = record("q_proj", self.q_proj(query))  # (B, L, H·d)
                k = record("k_proj", self.k_proj(key))  # (B, S, G·d)
                v = None if map_only else record("v_proj", self.v_proj(value))  # (B, S, G·d); a map needs no values
            if self.qk_norm == "projection":  # OLMo2: all heads' q, and all heads' k, normalised at once
                q = record("q_norm", self.q_norm(q))  # (B, L, H·d)
                k = record("k_norm", self.k_norm(k))  # (B, S, G·d)
            q = self.split_heads(q, self.num_heads, "q", record)  # (B, H, L, d)
            k = self.split_heads(k, self.num_kv_heads, "k", record)  # (B, G, S, d)
            if v is not None:
                v = self.split_heads(v, self.num_kv_heads, "v", record)  # (B, G, S, d)
        else:  # GPT-NeoX: each head's q, k and v side by side in the fused output
            qkv = record("qkv_proj", self.qkv_proj(query))  # (B, L, H·3·d)
            q, k, v = self.split_per_head(qkv, record)  # (B, H, L, d) each
        if self.qk_norm == "head":  # Qwen3: each head's q and k normalised over its d
            q = record("q_norm", self.q_norm(q))  # (B, H, L, d)
            k = record("k_norm", self.k_norm(k))  # (B, G, S, d)
        if rotary is not None:  # positions enter here, and only here (rotary.py)
            q = record("q_rot", rotate(q, *rotary))  # (B, H, L, d)
            k = record("k_rot", rotate(k, *rotary))  # (B, G, S, d)
        if cache is not None and v is not None:  # the earlier positions' keys and values go before these
            k, v = cache.extend(k, v)  # (B, G, P + L, d) each
            S = k.size(2)
        fused = (not keep_map or rows is not None) and head_mask is None and record is no_record and not map_only
        # the fused kernel alone reads k and v: it shares each key/value head with its group itself
        grouped = fused and self.softcap is None and rows is None and self.relative is None
        # a step of writing (one new query, no mask): each key/value head's group of queries read it as rows of one
        # matrix (B, G, group, d), with no copy of the keys and values per query head
        by_group = (
            cache is not None and L == 1 and attention_mask is None and not is_causal and not map_only
            and self.num_kv_heads != self.num_heads and not grouped and record is no_record
            and head_mask is None and self.relative is None and rows is None
        )  # fmt: skip
        if by_group:
            q = q.reshape(B, self.num_kv_heads, self.num_heads // self.num_kv_heads, q.size(-1))  # (B, G, H/G, d)
        elif self.num_kv_heads != self.num_heads and not grouped:
            group = self.num_heads // self.num_kv_heads
            k = record("k_shared", k.repeat_interleave(group, dim=1))  # (B, G, S, d) -> (B, H, S, d)
            if v is not None:
                v = record("v_shared", v.repeat_interleave(group, dim=1))  # (B, G, S, d) -> (B, H, S, d)

        mask = record("mask", build_mask(attention_mask, is_causal, B, L, S, device=query.device))
        head_by_head = by_head.active() and not fused and not map_only and not by_group  # a trace of one head
        if self.relative is not None and not head_by_head:  # DeBERTa: position terms read q and k, added as the mask is
            mask = self.relative(q, k, mask, record)  # (B, H, L, S) additive
        if map_only:  # the map's rows (all of them without `rows`) and nothing else
            return None, self.map_rows(q, k, mask, rows, record, head_mask, ablation)  # (B, H, L or P, S)
        dropout_p = self.dropout if self.training else 0.0
        if fused and self.softcap is None:
            fused_mask = mask if mask is None or mask.dtype == torch.bool else mask.to(q.dtype)
            grouped_kv = k.size(1) != q.size(1)  # (B, G, S, d): the kernel shares them across each group
            heads = F.scaled_dot_product_attention(
                q, k, v, attn_mask=fused_mask, dropout_p=dropout_p, scale=self.scaling, enable_gqa=grouped_kv
            )  # (B, H, L, d), no map kept
            if mask is not None:  # a query with no key left (padding under a causal mask) outputs zero
                heads = heads.nan_to_num(0.0) if heads.requires_grad else heads.nan_to_num_(0.0)
            merged = heads.transpose(1, 2).reshape(B, L, -1)  # (B, L, H, d) -> (B, L, H·d)
            if rows is None:
                return self.o_proj(merged), None
            return self.o_proj(merged), self.map_rows(q, k, mask, rows)  # only the kept rows: (B, H, P, S)
        if head_by_head:  # no (B, H, L, S) map made whole: each head's in turn, the kept head's probs (B, 1, L, S)
            heads, probs = by_head.attend(self, q, k, v, mask, dropout_p, record, head_mask, ablation)
        else:
            heads, probs = scaled_dot_product_attention(
                q, k, v, mask, self.scaling, dropout_p, record, head_mask, ablation, self.softcap
            )
        if by_group and probs is not None:  # (B, G, H/G, ·) -> (B, H, 1, ·): head g·(H/G) + i is row i of group g
            heads, probs = heads.reshape(B, self.num_heads, 1, -1), probs.reshape(B, self.num_heads, 1, S)
        merged = record("merged", heads.transpose(1, 2).reshape(B, L, -1))  # (B, L, H, d) -> (B, L, H·d)
        output = record("output", self.o_proj(merged))  # (B, L, D)
        if rows is not None and probs is not None:  # recorded, ablated or capped: the full map made, its rows kept
            probs = pick_rows(probs, rows)  # (B, H, L, S) -> (B, H, P, S)
        elif fused:  # capped scores: the map was made, but not kept
            return output, None
        return output, probs
