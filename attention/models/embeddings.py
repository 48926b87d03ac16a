"""The embeddings every family's model starts with: word pieces, token types, what the model's position part adds
(a table or sines; rotary positions turn q and k instead: position_parts.py), a norm, an optional projection."""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from ..core.dot_product import Recorder, no_record
from .parts import embedding_table, make_norm
from .position_parts import POSITION_PARTS


class Embeddings(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        E = config.embedding_width
        self.word_embeddings = embedding_table(config.vocab_size, E, padding_idx=config.pad_token_id)
        self.positions = POSITION_PARTS[
            config.positions.position_embedding_type
        ]  # what the embeddings add for positions
        if self.positions.table:
            rows, late = (
                config.max_position_embeddings + config.positions.position_offset,
                config.positions.positions_after_projection,
            )
            self.position_embeddings = embedding_table(rows, config.hidden_size if late else E)
        if config.type_vocab_size:
            self.token_type_embeddings = embedding_table(config.type_vocab_size, E)
        if config.norms.embedding_norm:
            self.LayerNorm = make_norm(config, E)
        if E != config.hidden_size:
            self.project = nn.Linear(E, config.hidden_size, bias=config.embeddings.embedding_projection_bias)
        self.dropout = nn.Dropout(config.embeddings.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None,
        record: Recorder = no_record,
        attention_mask: torch.Tensor | None = None,
        start: int = 0,
    ) -> torch.Tensor:
        """(B, L) ids -> (B, L, D); with a projection (ELECTRA), its input and output pass `record`.
        `attention_mask` (B, L) is read only by families whose positions count it (OPT); `start`, the
        positions before these (a decoder's cache), shifts a table's positions."""
        x = self.word_embeddings(input_ids)  # (B, L, E)
        if self.config.embeddings.scale_embedding_in_dtype:  # Gemma: sqrt(D) rounded to the weights' dtype first
            x = x * torch.tensor(self.config.hidden_size**0.5).to(x.dtype)  # (B, L, E)
        elif self.config.embeddings.scale_embedding:
            x = x * self.config.hidden_size**0.5  # (B, L, E)
        if self.config.type_vocab_size:
            types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            x = x + self.token_type_embeddings(types)  # (B, L, E)
        late = self.config.positions.positions_after_projection  # OPT adds its positions to the projected words
        if not late:
            x = self.positions.embed(self, x, input_ids, attention_mask, start)  # (B, L, E)
        if self.config.norms.embedding_norm:
            x = self.LayerNorm(x)
        x = self.dropout(x)
        if hasattr(self, "project"):
            x = record("embedding", x)  # (B, L, E)
            x = record("embed_proj", self.project(x))  # (B, L, E) -> (B, L, D)
        if late:
            x = self.positions.embed(self, x, input_ids, attention_mask, start)  # (B, L, D)
        return x  # (B, L, D)
