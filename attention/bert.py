"""A BERT encoder built from our MultiHeadAttention.

Module names follow the checkpoints' own (embeddings, intermediate, output, LayerNorm) so that the
one state-dict map in loading.py stays short; the attention block uses q_proj/k_proj/v_proj/o_proj.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .mha import MultiHeadAttention, Recorder, build_mask, check_ablation, no_record

_ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


class BertOutput(NamedTuple):
    last_hidden_state: torch.Tensor  # (B, L, D)
    hidden_states: tuple[torch.Tensor, ...]  # n_layers + 1 items: embeddings, then each layer
    attentions: tuple[torch.Tensor, ...]  # n_layers items, each (B, H, L, L) probabilities


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        L = input_ids.size(1)
        positions = torch.arange(L, device=input_ids.device)  # (L,)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)  # (B, L, D)
        x = x + self.position_embeddings(positions)  # (B, L, D) + (L, D)
        return self.dropout(self.LayerNorm(x))


class BertLayer(nn.Module):
    """Attention, then a feed-forward block; each followed by dropout, a residual and LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        D = config.hidden_size
        self.attention = MultiHeadAttention(D, config.num_attention_heads,
                                            dropout=config.attention_probs_dropout_prob)
        self.attention_norm = nn.LayerNorm(D, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(D, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, D)
        self.output_norm = nn.LayerNorm(D, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.act = _ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, record: Recorder = no_record,
                head_mask: torch.Tensor | None = None, ablation: str = "zero") -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, L, D); `head_mask` (H,) ablates heads (1 keep, 0 ablate; see mha.ablate_heads)."""
        attended, probs = self.attention(x, attention_mask=mask, record=record,
                                         head_mask=head_mask, ablation=ablation)  # (B, L, D), (B, H, L, L)
        x = self.attention_norm(x + self.dropout(attended))  # (B, L, D)
        hidden = self.act(self.intermediate(x))  # (B, L, D_ff)
        x = self.output_norm(x + self.dropout(self.output(hidden)))  # (B, L, D)
        return x, probs


class BertModel(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        recorders: dict[int, Recorder] | None = None,
        causal: bool = False,
        head_mask: torch.Tensor | None = None,
        ablation: str = "zero",
    ) -> BertOutput:
        """input_ids (B, L); attention_mask (B, L), 1 for tokens and 0 for padding; token_type_ids (B, L).

        `recorders` maps a layer index to a Recorder for that layer's attention (see trace.py).
        `causal` is a what-if: the same weights with each token seeing only itself and earlier
        tokens (BERT was trained to see both sides).
        `head_mask` (n_layers, H), bool or float, tensor or array-like, 1 keeps a head and 0 ablates
        it (transformers' convention). `ablation` says what an ablated head's probabilities become:
        "zero" (the head adds nothing) or "uniform" (even over the keys the token may attend to).
        The returned attentions are the probabilities used. None, or all ones, changes nothing.
        """
        B, L = input_ids.shape
        if L > self.config.max_position_embeddings:
            raise ValueError(f"{L} tokens is more than this model's {self.config.max_position_embeddings} "
                             "positions: truncate the input first (attention.encode does)")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # the padding mask is built once for all layers; no mask at all when nothing is padded
        if attention_mask is not None and bool(attention_mask.all()):
            attention_mask = None
        mask = build_mask(attention_mask, causal, B, L, L)  # (B, 1, 1, L), (1, 1, L, L), both, or None
        recorders = recorders or {}
        head_mask = self.check_head_mask(head_mask, ablation)  # (n_layers, H) float or None

        x = self.embeddings(input_ids, token_type_ids)  # (B, L, D)
        hidden_states, attentions = [x], []
        for i, layer in enumerate(self.layers):
            layer_mask = None if head_mask is None else head_mask[i]  # (H,)
            x, probs = layer(x, mask, recorders.get(i, no_record), layer_mask, ablation)
            hidden_states.append(x)
            attentions.append(probs)
        return BertOutput(x, tuple(hidden_states), tuple(attentions))

    def check_head_mask(self, head_mask, ablation: str = "zero") -> torch.Tensor | None:
        """A head mask as a float (n_layers, H) tensor on the model's device; a clear ValueError if invalid."""
        check_ablation(ablation)
        if head_mask is None:
            return None
        expected = (self.config.num_hidden_layers, self.config.num_attention_heads)
        try:
            head_mask = torch.as_tensor(head_mask)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"head_mask must be a (n_layers, n_heads) = {expected} array of 0s and 1s, "
                             f"not {type(head_mask).__name__}") from None
        if tuple(head_mask.shape) != expected:
            raise ValueError(f"head_mask must be (n_layers, n_heads) = {expected}, got {tuple(head_mask.shape)}")
        if head_mask.is_complex():
            raise ValueError(f"head_mask must hold bools or real numbers, not {head_mask.dtype}")
        head_mask = head_mask.float()  # (n_layers, H)
        if not bool(((head_mask >= 0) & (head_mask <= 1)).all()):
            raise ValueError("head_mask values must be from 0 (ablate the head) to 1 (keep it)")
        return head_mask.to(self.embeddings.word_embeddings.weight.device)
