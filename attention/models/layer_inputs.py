"""What a layer adds to its own output once its feed-forward sub-block has joined the residual: one part per kind,
chosen when the model is built (`layer_input_part`), never a branch in the block's forward.

    none        the block's output as it is (every family but Gemma 4)
    per-layer   Gemma 4: each layer reads its own P-wide input per token, the sum of a per-layer embedding of the
                token (embed_tokens_per_layer · √P) and a normed projection of the scaled word embeddings
                (per_layer_model_projection · D^-½, per_layer_projection_norm), times 2^-½; the layer adds
                post_per_layer_input_norm(per_layer_projection(act(per_layer_input_gate(x)) · input)) to x, then
                multiplies everything by its saved layer_scalar

A part makes the model's shared modules (`attach`, once the layers exist), each layer's input from the ids and the
embeddings (`inputs`: one entry per layer, None where there is none) and the layer's last step (`finish`). Module
names are transformers' Gemma 4 names, so the tensor-name rules stay short.

Letters: B batch, L positions, D model width, n layers, P the per-layer input width.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from ..config import ModelConfig
from .parts import embedding_table, make_norm

if TYPE_CHECKING:
    from .blocks import Block, Transformer


_MODEL_MODULES = ("embed_tokens_per_layer", "per_layer_model_projection", "per_layer_projection_norm")
_BLOCK_MODULES = ("per_layer_input_gate", "per_layer_projection", "post_per_layer_input_norm")


class NoLayerInputs:
    """No per-layer input and no scalar: a layer's output is the residual's sum."""

    def attach(self, model: Transformer) -> None:
        pass

    def inputs(self, model: Transformer, input_ids: torch.Tensor, x: torch.Tensor) -> list[torch.Tensor | None]:
        return [None] * len(model.layers)

    def finish(self, block: Block, x: torch.Tensor, layer_input: torch.Tensor | None) -> torch.Tensor:
        return x  # (B, L, D)

    def words(self, config: ModelConfig) -> str:
        """What the layer does after its feed-forward sub-block, in words for the shape flow ("" for nothing)."""
        return ""


class PerLayerInputs(NoLayerInputs):
    """Gemma 4's per-layer embeddings (where hidden_size_per_layer_input > 0) and each layer's layer_scalar."""

    def attach(self, model: Transformer) -> None:
        c = model.config
        D, P, n = c.hidden_size, c.embeddings.per_layer_input_size, len(model.layers)
        if P:
            rows = c.embeddings.per_layer_vocab_size or c.vocab_size
            model.embed_tokens_per_layer = embedding_table(rows, n * P, padding_idx=c.pad_token_id)
            model.per_layer_model_projection = nn.Linear(D, n * P, bias=False)
            model.per_layer_projection_norm = make_norm(c, P)
        for block in model.layers:
            if P:
                block.per_layer_input_gate = nn.Linear(D, P, bias=False)
                block.per_layer_projection = nn.Linear(P, D, bias=False)
                block.post_per_layer_input_norm = make_norm(c, D)
            if c.embeddings.layer_scalar:
                block.register_buffer("layer_scalar", torch.ones(1))  # (1,), saved in the checkpoint

    def inputs(self, model: Transformer, input_ids: torch.Tensor, x: torch.Tensor) -> list[torch.Tensor | None]:
        """Each layer's input (B, L, P) from the ids (B, L) and the scaled word embeddings x (B, L, D)."""
        P, n = model.config.embeddings.per_layer_input_size, len(model.layers)
        if not P:
            return [None] * n
        B, L, D = x.shape
        table = cast(nn.Embedding, model.embed_tokens_per_layer)
        project, norm = (cast(nn.Module, getattr(model, name)) for name in _MODEL_MODULES[1:])
        own = table(input_ids) * torch.tensor(P**0.5).to(table.weight.dtype)  # (B, L, n·P), √P in the weights' dtype
        seen = norm((project(x) * D**-0.5).view(B, L, n, P))  # (B, L, n·P) -> (B, L, n, P)
        both = (seen + own.view(B, L, n, P)) * 2.0**-0.5  # (B, L, n, P)
        return [both[:, :, i] for i in range(n)]  # (B, L, P) each

    def finish(self, block: Block, x: torch.Tensor, layer_input: torch.Tensor | None) -> torch.Tensor:
        if layer_input is not None:
            gate, project, norm = (cast(nn.Module, getattr(block, name)) for name in _BLOCK_MODULES)
            x = x + norm(project(block.act(gate(x)) * layer_input))  # (B, L, P) -> (B, L, D)
        if hasattr(block, "layer_scalar"):
            x = x * cast(torch.Tensor, block.layer_scalar)  # (B, L, D) times (1,)
        return x

    def words(self, config: ModelConfig) -> str:
        P = config.embeddings.per_layer_input_size
        own = f"its own {P}-wide per-layer input of each token (gated by its output), then " if P else ""
        return f"; after the feed-forward block the layer adds {own}multiplies everything by its layer_scalar"


def layer_input_part(config: ModelConfig) -> NoLayerInputs:
    """The part a config declares: per-layer inputs or a layer scalar (Gemma 4), else none."""
    e = config.embeddings
    return PerLayerInputs() if e.per_layer_input_size or e.layer_scalar else NoLayerInputs()
