"""The real tensors, shapes and lines of code of one attention layer's forward pass.

`trace_layer` runs the model once with a recorder on one layer. Every `record(name, tensor)` call
in mha.py keeps a detached CPU clone of its tensor (the softmax later overwrites the scores buffer
in place, so a reference alone would show probabilities as "scores") and the line that called it.
The shape-flow diagram is drawn from this record only, so it cannot drift from the code. Each step's
title, axis letters and operation in words come from attention/tracing/steps.py.

Letters: B batch, L query length, S key/value length, D model width, H query heads,
G key/value heads, d head width.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import FrameType

import numpy as np
import torch

from ..core import by_head
from ..core.by_head import MAP_STEPS  # the steps whose tensor is a map, (B, H, L, S): one head's kept past the bound
from ..core.dot_product import Recorded
from ..core.request import Call, MapRequest
from ..models import FAMILIES, Family
from ..runs.bigrun import layer_hooks
from ..runs.inputs import on_model_device
from .source_lines import relative_path, source_of
from .steps import TITLES, dims_of, layer_facts, op_words, projection_biases, qkv_width, recorded_maps

# (step, what was kept of its tensor, the tensor's shape, file, line), in order
Records = list[tuple[str, torch.Tensor | None, tuple[int, ...] | None, str, int]]


@dataclass(frozen=True)
class Step:
    name: str
    shape: tuple[int, ...] | None  # None: nothing recorded (no mask)
    dims: tuple[str, ...] | None  # symbolic letters, e.g. ("B", "H", "L", "S")
    title: str
    op: str  # the operation in words
    code: str  # the statement(s) that made the tensor, one per line, comments left out
    path: str  # relative to the repository root
    lineno: int  # line of the first statement of `code`
    tensor: torch.Tensor | None = field(default=None, repr=False, compare=False)  # detached CPU clone
    linenos: tuple[int, ...] = ()  # line of each statement of `code`
    weights: str | None = None  # the checkpoint's name for the weight this step multiplies by, if any

    @property
    def where(self) -> str:
        """`path:lineno`, with every line when the code spans several statements."""
        return f"{self.path}:{', '.join(map(str, self.linenos or (self.lineno,)))}"


@dataclass
class Trace:
    layer: int
    steps: list[Step]  # in execution order
    token_type_ids: torch.Tensor | None = field(default=None, repr=False)  # (B, L): 0 segment A, 1 segment B
    scaling: float | None = None  # the factor on Q·Kᵀ, as the layer's attention used it
    head: int | None = None  # the one head whose maps (MAP_STEPS) were kept, (B, 1, L, S); None: every head's

    @property
    def segments(self) -> tuple[int, ...]:
        """Tokens of each segment of the first sentence: (L,) for one sentence, (A, B) for a pair."""
        if self.token_type_ids is None or not bool(self.token_type_ids.any()):
            return (self.L,)
        counts = torch.bincount(self.token_type_ids[0].long())
        return tuple(int(n) for n in counts)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step {name!r} in this trace; steps: {', '.join(self.names)}")

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def tensor(self, name: str) -> torch.Tensor:
        """Step `name`'s recorded tensor; a KeyError for a step that recorded none (no mask)."""
        tensor = self.step(name).tensor
        if tensor is None:
            raise KeyError(f"step {name!r} recorded no tensor")
        return tensor

    def map_index(self, head: int) -> int:
        """Where query head `head` is in the kept maps (MAP_STEPS' second axis); a ValueError for a head whose
        maps this trace did not keep."""
        if self.head is None:
            return head
        if head != self.head:
            raise ValueError(f"this trace kept the maps of head {self.head} only, not of head {head}")
        return 0

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of step `name`'s tensor; a KeyError for a step that recorded none (no mask)."""
        shape = self.step(name).shape
        if shape is None:
            raise KeyError(f"step {name!r} recorded no tensor")
        return shape

    # sizes, read from the recorded tensors
    @property
    def B(self) -> int:
        return self.shape("input")[0]

    @property
    def L(self) -> int:
        return self.shape("input")[1]

    @property
    def D(self) -> int:
        return self.shape("input")[2]

    @property
    def H(self) -> int:
        return self.shape("q_heads")[1]

    @property
    def d(self) -> int:
        return self.shape("q_heads")[3]

    @property
    def G(self) -> int:
        return self.shape("k_heads")[1]

    @property
    def S(self) -> int:
        return self.shape("k_heads")[2]

    def sizes(self) -> dict[str, int]:
        """Each letter's size; E (the embedding width) only where the trace recorded a projection from it."""
        sizes = {"B": self.B, "L": self.L, "S": self.S, "D": self.D, "H": self.H, "G": self.G, "d": self.d}
        if "embedding" in self:
            sizes["E"] = self.shape("embedding")[-1]
        return sizes


def trace_layer(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    layer: int = 0,
    head: int | None = None,
) -> Trace:
    """Run the model once and record every step of layer `layer`'s attention; the pass holds no other layer's
    map (each dropped as it is made) and no hidden states. With `head`, the maps (MAP_STEPS) are kept for that
    query head only (`kept_bytes` sizes either beforehand).

    The inputs are sent to the model's device; each recorded tensor is kept as a CPU copy in the
    model's dtype (head_matrix and the views read them as float32)."""
    n_layers, n_heads = len(model.layers), model.config.num_attention_heads
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
        raise ValueError(f"layer must be an integer from 0 to {n_layers - 1}, got {layer!r}")
    if head is not None and (isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < n_heads):
        raise ValueError(f"head must be an integer from 0 to {n_heads - 1}, got {head!r}")
    records: Records = []

    def recorder(name: str, tensor: Recorded) -> Recorded:
        caller = sys._getframe(1)
        while caller.f_code.co_filename == by_head.FILE and caller.f_back is not None:  # the line in mha.py
            caller = caller.f_back
        part = tensor[:, head : head + 1] if head is not None and tensor is not None and name in MAP_STEPS else tensor
        kept = None if part is None else part.detach().to("cpu", copy=True)  # a copy, from the GPU too
        shape = None if tensor is None else tuple(tensor.shape)
        records.append((name, kept, shape, caller.f_code.co_filename, caller.f_lineno))
        return tensor

    inputs = on_model_device(model, input_ids, attention_mask, token_type_ids)
    # the layers up to the traced one compute their maps as a whole forward pass does (the same numbers), each
    # dropped as it is made (bigrun.layer_hooks); the layers after it run fused; no hidden states are kept
    # with `head`, each layer up to the traced one makes its maps one head at a time (by_head): none made whole
    request = MapRequest(set(range(layer + 1)), keep_hidden=False, head=head)
    with torch.inference_mode(), layer_hooks(model, lambda index, maps: None, convert=lambda probs: None):
        model(*inputs, recorders={layer: recorder}, request=request)
    scaling = float(model.layers[layer].attention.scaling)
    types = None if token_type_ids is None else token_type_ids.detach().to("cpu", copy=True)
    report = getattr(model, "load_report", None)
    family = FAMILIES.get(getattr(model.config, "model_type", ""))
    names = weight_names(getattr(report, "weight_names", {}), layer, family) if family is not None else {}
    biases = projection_biases(model.layers[layer].attention, model.embeddings)
    trace = _build(
        layer, records, scaling, types, names, layer_facts(model.config, layer, biases, model.layers[layer].attention)
    )
    trace.head = head
    return trace


def kept_bytes(model, batch: int, n_tokens: int, head: int | None = None) -> int:
    """At most how many bytes trace_layer keeps of `batch` inputs of `n_tokens` tokens, sized before the work:
    its maps (MAP_STEPS this model makes: scores, masked scores and probabilities, a softcap's, DeBERTa's two
    position terms), every head's or one `head`'s, each (batch, heads, L, L), at 4 bytes or the model's width
    if wider; the mask, (batch, L, L) float32 (T5's, each head's distance bias: H of them); and the per-token
    steps, at most 24 of (batch, L, D): 13 for BERT, 17 for GPT-2 (its fused projection), 14.5 for Llama."""
    c = model.config
    n_heads = c.num_attention_heads
    width = max([4] + [torch.finfo(p.dtype).bits // 8 for p in model.parameters() if p.is_floating_point()])
    n_maps = 3 + max(recorded_maps(layer.attention) for layer in model.layers)  # scores, masked, probs, parts
    square = batch * n_tokens * n_tokens * width
    mask = square * (n_heads if c.positions.position_embedding_type == "relative" else 1)
    d = max(layer.attention.head_dim for layer in model.layers)  # the widest layer's (Gemma 4's full layers)
    per_token = 24 * batch * n_tokens * max(c.hidden_size, n_heads * d) * width
    return n_maps * (n_heads if head is None else 1) * square + mask + per_token


def trace_cross_attention(
    model,
    input_ids: torch.Tensor,
    decoder_input_ids: torch.Tensor,
    layer: int = 0,
    attention_mask: torch.Tensor | None = None,
    decoder_attention_mask: torch.Tensor | None = None,
) -> Trace:
    """Run an encoder-decoder (models/seq2seq.py) once and record decoder layer `layer`'s cross-attention:
    Q from the decoder's states (L = its length), K and V from the encoder's output, recorded first as
    "memory" (S = the encoder's length)."""
    n_layers = len(model.decoder.layers)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
        raise ValueError(f"layer must be an integer from 0 to {n_layers - 1}, got {layer!r}")
    records: Records = []

    def recorder(name: str, tensor: Recorded) -> Recorded:
        caller = sys._getframe(1)
        kept = None if tensor is None else tensor.detach().to("cpu", copy=True)
        records.append(
            (name, kept, None if kept is None else tuple(kept.shape), caller.f_code.co_filename, caller.f_lineno)
        )
        return tensor

    def with_recorder(module, args, kwargs):  # the cross-attention's call, given the recorder
        caller: FrameType | None = sys._getframe(1)
        while caller is not None and caller.f_code.co_name != "cross_attend":  # blocks.py hands it the memory
            caller = caller.f_back
        assert caller is not None, "the cross-attention was called from outside Block.cross_attend"
        memory = args[1].detach().to("cpu", copy=True)
        records.append(("memory", memory, tuple(memory.shape), caller.f_code.co_filename, caller.f_lineno))
        return args, {**kwargs, "call": Call(record=recorder)}

    attention = model.decoder.layers[layer].cross_attention
    hook = attention.register_forward_pre_hook(with_recorder, with_kwargs=True)
    try:
        with torch.inference_mode():
            model(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask)
    finally:
        hook.remove()
    return _build(layer, records, float(attention.scaling), None, facts={"biases": projection_biases(attention)})


# the module each step multiplies by, under our names (attention/models/blocks.py)
_WEIGHTS = {
    "qkv_proj": "attention.qkv_proj",
    "q_proj": "attention.q_proj",
    "k_proj": "attention.k_proj",
    "v_proj": "attention.v_proj",
    "output": "attention.o_proj",
    "embed_proj": "embeddings.project",
}


def weight_names(origins: dict[str, str], layer: int, family: Family) -> dict[str, str]:
    """For each step that multiplies by a loaded weight, the checkpoint's own name for it, short: what
    the family calls it (BERT's attention.self.query, DistilBERT's attention.q_lin, GPT-2's attn.c_attn),
    without the layer's path, as the family's tensor-name rules find it, and without the ".weight"."""
    names = {}
    for step, module in _WEIGHTS.items():
        ours = f"{module}.weight" if module.startswith("embeddings.") else f"layers.{layer}.{module}.weight"
        if ours in origins:
            names[step] = family.name_in_layer(origins[ours]).removesuffix(".weight")
    return names


def _build(
    layer: int,
    records: Records,
    scaling: float,
    token_type_ids: torch.Tensor | None,
    weights: dict[str, str] | None = None,
    facts: dict | None = None,
) -> Trace:
    shapes = {name: shape for name, _, shape, _, _ in records}
    recorded = {name: shape for name, shape in shapes.items() if shape is not None}
    B, L, D = recorded["input"]
    _, H, _, d = recorded["q_heads"]
    _, G, S, _ = recorded["k_heads"]
    sizes = {
        "B": B,
        "L": L,
        "S": S,
        "D": D,
        "H": H,
        "G": G,
        "d": d,
        "H·d": H * d,
        "G·d": G * d,
        "1": 1,
        qkv_width(H, G): (H + 2 * G) * d,
    }
    if "embedding" in recorded:  # a projection from the embedding width E (ELECTRA)
        sizes["E"] = recorded["embedding"][-1]
    tensors = {name: t for name, t, _, _, _ in records}
    steps = []
    for name, tensor, _, filename, lineno in records:
        shape = shapes[name]
        code, linenos = source_of(filename, lineno)
        steps.append(
            Step(
                name=name,
                shape=shape,
                dims=dims_of(name, shape, sizes),
                title=TITLES.get(name, name),
                op=op_words(name, tensors, sizes, scaling, layer, facts),
                code=code,
                path=relative_path(filename),
                lineno=linenos[0],
                tensor=tensor,
                linenos=linenos,
                weights=(weights or {}).get(name),
            )
        )
    return Trace(layer, steps, token_type_ids, scaling)


# ---- one head's slice of a step, as the app shows it -------------------------------------------


def head_matrix(trace: Trace, name: str, head: int, batch: int = 0) -> tuple[np.ndarray, str, str]:
    """The 2-D slice of step `name` for query head `head`: (matrix, row axis, column axis).

    input/merged/output give [L, D] (all heads); projections give the head's d columns (a fused
    QKV projection its Q, K and V columns side by side, [L, 3·d]); the
    per-head steps give [T, d] or [L, S]; the mask gives [L, S] with 1 = may attend, 0 = dropped.
    K and V steps before sharing use the key/value head of the query head's group.
    """
    step = trace.step(name)
    H, G, d = trace.H, trace.G, trace.d
    if not 0 <= head < H:
        raise ValueError(f"head must be from 0 to {H - 1}, got {head}")
    if not 0 <= batch < trace.B:
        raise ValueError(f"batch must be from 0 to {trace.B - 1}, got {batch}")
    kv_side = name in ("k_proj", "v_proj", "k_view", "v_view", "k_heads", "v_heads", "k_rot", "k_norm", "v_norm")
    own = head // (H // G) if kv_side else trace.map_index(head) if name in MAP_STEPS else head  # in the tensor
    if name == "mask":
        return _mask_matrix(step.tensor, trace, head, batch), "L", "S"
    if step.tensor is None or step.dims is None:
        raise ValueError(f"step {name!r} kept no tensor")
    t, dims = step.tensor[batch], step.dims
    if name == "qkv_proj" and "q_proj" not in trace:  # laid out per head (GPT-NeoX): the head's 3·d columns
        return t[:, head * 3 * d : (head + 1) * 3 * d].float().cpu().numpy(), "L", "3·d"
    if name == "qkv_proj":  # the head's own Q, K and V columns side by side: (L, 3·d)
        Q, K = H * d, G * d
        kv = head // (H // G)
        columns = [
            t[:, head * d : (head + 1) * d],
            t[:, Q + kv * d : Q + (kv + 1) * d],
            t[:, Q + K + kv * d : Q + K + (kv + 1) * d],
        ]
        return torch.cat(columns, dim=1).float().cpu().numpy(), "L", "3·d"
    axes: tuple[str, ...]
    if name.endswith("_proj") or name.endswith("_norm") and t.dim() == 2:  # (T, n·d): the head's d columns
        matrix, axes = t[:, own * d : (own + 1) * d], (dims[1], "d")
    elif name.endswith("_view"):
        matrix, axes = t[:, own, :], (dims[1], "d")
    elif t.dim() == 3:  # (n, T, d) or (H, L, S)
        matrix, axes = t[own], dims[2:]
    else:  # input, merged, output
        matrix, axes = t, dims[1:]
    return matrix.float().cpu().numpy(), axes[0], axes[1]


def _mask_matrix(mask: torch.Tensor | None, trace: Trace, head: int, batch: int) -> np.ndarray:
    L, S = trace.L, trace.S
    if mask is None:
        return np.ones((L, S), dtype=np.float32)
    keep = mask if mask.dtype == torch.bool else mask != float("-inf")
    full = keep.expand(trace.B, trace.H, L, S) if keep.dim() == 4 else keep.expand(L, S)
    return (full[batch, head] if full.dim() == 4 else full).float().cpu().numpy()
