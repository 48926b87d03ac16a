"""Where a block's norms sit around its residuals: one part per arrangement, chosen when the model is built
(`residual_part`), never a branch in the block's forward.

    post-norm      norm(x + sublayer(x))                     BERT and the encoders of its time
    pre-norm       x + sublayer(norm(x))                     GPT-2, Llama and most decoders
    sandwich       x + post_norm(sublayer(norm(x)))          Gemma2, Gemma3: a norm on each side
    norm after     x + norm(sublayer(x))                     OLMo2: the output normalised, not the input
    parallel       x + attention(norm(x)) + mlp(norm'(x))    GPT-NeoX, Phi (one norm for both)

A part says what a sub-block reads (`input`), how its output joins the residual (`add`), and what follows the
attention (`after_attention`: the feed-forward sub-block on the sum, or beside the attention in parallel).
Each sub-block's norms are the block's own modules (attention_norm, output_norm, their post_norms and
cross_attention_norm), so checkpoints keep their names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from ..config import ModelConfig

if TYPE_CHECKING:
    from .blocks import Block


class PostNorm:
    """norm(x + sublayer(x)): the sub-block reads x as it is; its norm comes after the residual."""

    reads_normed = False  # the sub-block's input is its norm of x (the trace records x first, as block_input)
    post_norms = False  # a second norm per sub-block, on its output (attention_post_norm, output_post_norm)

    def input(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        return x

    def add(self, block: Block, x: torch.Tensor, out: torch.Tensor, norm: nn.Module, post: nn.Module | None):
        return norm(x + block.drop(out))  # (B, L, D)

    def after_attention(self, block: Block, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The block's output once its attention sub-block gave `attended` (x + attention, as added)."""
        return block.feed(attended)


class PreNorm(PostNorm):
    """x + sublayer(norm(x)): each sub-block reads its norm of x; the residual adds its output as it is."""

    reads_normed = True

    def input(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        return norm(x)

    def add(self, block: Block, x: torch.Tensor, out: torch.Tensor, norm: nn.Module, post: nn.Module | None):
        return x + block.drop(out)  # (B, L, D)


class Sandwich(PreNorm):
    """x + post_norm(sublayer(norm(x))): a norm before each sub-block and one on its output."""

    post_norms = True

    def add(self, block: Block, x: torch.Tensor, out: torch.Tensor, norm: nn.Module, post: nn.Module | None):
        return x + block.drop((norm if post is None else post)(out))  # (B, L, D); cross-attention: its one norm


class NormAfter(PostNorm):
    """x + norm(sublayer(x)): the sub-block reads x; its output is normalised before the residual adds it."""

    def add(self, block: Block, x: torch.Tensor, out: torch.Tensor, norm: nn.Module, post: nn.Module | None):
        return x + block.drop(norm(out))  # (B, L, D)


class Parallel(PreNorm):
    """x + attention(norm(x)) + feed_forward(norm'(x)): the feed-forward block reads x too, not x + attention;
    with one norm for both (Phi) norm' is the attention's."""

    def after_attention(self, block: Block, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        norm = getattr(block, "output_norm", block.attention_norm)  # one norm for both: the attention's
        return attended + block.drop(block.feed_forward(norm(x)))  # attended is x + attention(norm(x))


def residual_part(config: ModelConfig) -> PostNorm:
    """The arrangement a config declares (pre_norm, norm_after_sublayer, parallel_residual)."""
    if config.norms.parallel_residual:
        return Parallel()
    if config.norms.norm_after_sublayer:
        return Sandwich() if config.norms.pre_norm else NormAfter()
    return PreNorm() if config.norms.pre_norm else PostNorm()
