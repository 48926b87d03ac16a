"""The masked-language-model head: which tokens the model would put at a [MASK].

The head is a dense layer, an activation and a LayerNorm, then the decoder back to the vocabulary,
whose weight is the word embedding matrix (tied) plus a bias of its own: BERT's `cls.predictions`,
RoBERTa's `lm_head`, DistilBERT's `vocab_*`, ELECTRA's generator head, each family's names
declared in its file (attention/models/, `masked_lm`). Encoder checkpoints (such as the bundled
MiniLM) have no head; task checkpoints (BertForMaskedLM, RobertaForMaskedLM ...) do, and
`load_mlm_head` reads it from the same files. GPT-2 has none.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from .config import ModelConfig
from .errors import ModelLoadError
from .load.checkpoint import read_checkpoint
from .load.convert import check_tensors
from .models import FAMILIES, Transformer
from .models.blocks import ACTIVATIONS
from .models.family import MaskedLMNames
from .runs.inputs import on_model_device

_OLD_NAMES = {"gamma": "weight", "beta": "bias"}  # LayerNorm names of the original TensorFlow checkpoints


class PredictionTransform(nn.Module):
    """dense (D -> E), activation, LayerNorm; E is the embedding width (D but for ELECTRA)."""

    def __init__(self, config: ModelConfig, activation: str | None = None):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_width)
        self.act = ACTIVATIONS[activation or config.feed_forward.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.embedding_width, eps=config.norms.layer_norm_eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden)))  # (..., D) -> (..., E)


class MaskedLMHead(nn.Module):
    """Hidden states (..., D) -> vocabulary logits (..., V).

    `decoder.weight` is tied to the model's word embeddings (V, E) by `tie_to`; `bias` is the head's own.
    `activation` is the family's (RoBERTa and ELECTRA use gelu); None takes the config's hidden_act.
    """

    def __init__(self, config: ModelConfig, activation: str | None = None):
        super().__init__()
        self.transform = PredictionTransform(config, activation)
        # its weight is the word embeddings' (tie_to): made on the meta device, it takes no memory meanwhile
        self.decoder = nn.Linear(config.embedding_width, config.vocab_size, bias=False, device="meta")
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def tie_to(self, word_embeddings: nn.Embedding) -> None:
        """Share the word embedding matrix (V, E) as the decoder weight."""
        self.decoder.weight = word_embeddings.weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(hidden)) + self.bias  # (..., D) -> (..., V)


def _parts(names: MaskedLMNames) -> dict[str, str]:
    """The family's name of each part of the head (under names.root) -> ours; the bias first, as
    DistilBERT's is its decoder's own."""
    return {
        names.bias: "bias",
        names.dense: "transform.dense",
        names.norm: "transform.LayerNorm",
        names.decoder: "decoder",
    }


def _checkpoint_name(key: str, names: MaskedLMNames) -> str:
    """The checkpoint's name for the head's tensor `key`, for error messages."""
    for theirs, ours in _parts(names).items():
        if key == ours or key.startswith(ours + "."):
            return names.root + theirs + key[len(ours) :]
    return names.root + key


def _head_tensors(checkpoint: Mapping[str, torch.Tensor], names: MaskedLMNames) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under `names.root`, under the head's names (decoder's as "decoder.*"),
    as float32; a name under the root that is no part of the head is kept as it is (an error later).
    Only those are read from the files: the model's own weights stay on disk."""
    parts = _parts(names)
    tensors = {}
    for name in [n for n in checkpoint if n.startswith(names.root)]:
        tensor = checkpoint[name]
        key = re.sub(
            r"LayerNorm\.(gamma|beta)$", lambda m: f"LayerNorm.{_OLD_NAMES[m.group(1)]}", name[len(names.root) :]
        )
        for theirs, ours in parts.items():
            if key == theirs or key.startswith(theirs + "."):
                key = ours + key[len(theirs) :]
                break
        tensors[key] = tensor.float() if tensor.is_floating_point() else tensor
    return tensors


def load_mlm_head(model: Transformer) -> MaskedLMHead | None:
    """The MLM head of the checkpoint `model` was loaded from (by load_model), or None if it has none
    (or its family has no masked-LM head, as GPT-2).

    Strict: every tensor of the head must be there with the config's shape, and nothing else under
    the head's names; a checkpoint decoder weight must equal the word embeddings (tied), once cast to
    their dtype (a model loaded in bfloat16 holds its embeddings so).
    Any failure is a ModelLoadError naming the tensor. The head is in eval mode, without gradients,
    in the model's dtype and on its device.
    """
    report = getattr(model, "load_report", None)
    if report is None:
        raise ModelLoadError(
            "this model was not loaded by load_model, so there is no checkpoint to read an MLM head from"
        )
    family = FAMILIES.get(model.config.model_type)
    names = None if family is None else family.masked_lm
    if names is None:
        return None
    tensors = _head_tensors(read_checkpoint(Path(report.path))[0], names)
    if not tensors:
        return None
    # transformers ties decoder.bias to the head's bias: older files have one or the other, or both
    decoder_bias = tensors.pop("decoder.bias", None)
    if "bias" not in tensors and decoder_bias is not None:
        tensors["bias"] = decoder_bias
    word_embeddings = model.embeddings.word_embeddings
    decoder_weight = tensors.pop("decoder.weight", None)
    embeddings = word_embeddings.weight  # (V, E), in the model's dtype, on its device
    if decoder_weight is not None and (
        decoder_weight.shape != embeddings.shape
        or not torch.equal(decoder_weight.to(dtype=embeddings.dtype, device=embeddings.device), embeddings)
    ):
        raise ModelLoadError(
            f"'{names.root}{names.decoder}.weight' differs from the word embeddings: "
            "only MLM heads tied to the embeddings are supported"
        )

    head = MaskedLMHead(model.config, names.activation)
    expected = {k: v for k, v in head.state_dict().items() if k != "decoder.weight"}
    check_tensors(tensors, expected, what="the checkpoint's MLM head", name_of=lambda key: _checkpoint_name(key, names))
    head.tie_to(word_embeddings)  # first: the meta decoder weight could not be moved
    head.to(dtype=embeddings.dtype, device=embeddings.device)  # load_state_dict casts the float32 tensors
    head.load_state_dict({**tensors, "decoder.weight": word_embeddings.weight}, strict=True)
    return head.eval().requires_grad_(False)


def mask_probabilities(head: MaskedLMHead, hidden: torch.Tensor) -> torch.Tensor:
    """Probabilities over the vocabulary (V,) for one position's last hidden state (D,), float32
    whatever the head's dtype (a bfloat16 softmax over a large vocabulary would round them)."""
    return torch.softmax(head(hidden), dim=-1, dtype=torch.float32)  # (D,) -> (V,)


def check_top_k(top_k: int, head: MaskedLMHead) -> None:
    vocab = head.bias.numel()
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 1 <= top_k <= vocab:
        raise ValueError(f"top_k must be an integer from 1 to {vocab}, got {top_k!r}")


def top_tokens(probs: torch.Tensor, top_k: int) -> list[tuple[int, float]]:
    """The `top_k` most probable (token id, probability) of probs (V,), most probable first."""
    values, ids = probs.topk(int(top_k))
    return [(int(i), float(p)) for i, p in zip(ids, values)]


def predict_masked(
    model: Transformer,
    head: MaskedLMHead,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position: int,
    top_k: int = 5,
    head_mask=None,
    ablation: str = "zero",
) -> list[tuple[int, float]]:
    """The model's `top_k` guesses for the token at `position` of one sentence (batch of 1).

    input_ids, attention_mask, token_type_ids (1, L) as for the model; `head_mask` (n_layers, H)
    and `ablation` ablate heads as in Transformer.forward. Returns (token id, probability) pairs,
    most probable first; probabilities are the softmax over the whole vocabulary. The inputs are
    sent to the model's device.
    """
    B, L = input_ids.shape
    if B != 1:
        raise ValueError(f"predict_masked takes one sentence (batch 1), got a batch of {B}")
    if isinstance(position, bool) or not isinstance(position, numbers.Integral) or not 0 <= position < L:
        raise ValueError(f"position must be an integer from 0 to {L - 1}, got {position!r}")
    check_top_k(top_k, head)
    input_ids, attention_mask, token_type_ids = on_model_device(model, input_ids, attention_mask, token_type_ids)
    with torch.inference_mode():
        out = model(input_ids, attention_mask, token_type_ids, head_mask=head_mask, ablation=ablation)
        probs = mask_probabilities(head, out.last_hidden_state[0, int(position)])  # (V,)
    return top_tokens(probs, top_k)
