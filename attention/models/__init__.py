"""One file per model family, each a tensor-name map and what the family declares differently;
all of them build the one model in blocks.py from the one attention in attention/mha.py."""
from __future__ import annotations

from . import bert, distilbert, electra, gpt2, gpt_neox, llama, mistral, olmo2, opt, qwen2, qwen3, roberta, xlm_roberta
from .blocks import ModelOutput, Transformer
from .family import Family, MaskedLMNames

FAMILIES: dict[str, Family] = {f.model_type: f for f in (bert.FAMILY, roberta.FAMILY, distilbert.FAMILY,
                                                         electra.FAMILY, gpt2.FAMILY, llama.FAMILY,
                                                         mistral.FAMILY, qwen2.FAMILY, xlm_roberta.FAMILY,
                                                         qwen3.FAMILY, gpt_neox.FAMILY, opt.FAMILY,
                                                         olmo2.FAMILY)}

__all__ = ["FAMILIES", "Family", "MaskedLMNames", "ModelOutput", "Transformer"]
