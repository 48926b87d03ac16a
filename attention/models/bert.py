"""BERT: the shared model with ModelConfig's defaults, and BERT's tensor names.

RoBERTa and ELECTRA keep BERT's encoder names, so they import `ENCODER_RULES` from here.
"""

from __future__ import annotations

from ..config import BertConfig
from .blocks import ModelOutput, Transformer
from .family import Family, MaskedLMNames

BertModel = Transformer  # a BERT is the shared model with BERT's choices, the config's defaults
BertOutput = ModelOutput

ENCODER_RULES = (  # checkpoint name (after any "bert." prefix) -> ours
    (r"embeddings\.(word_embeddings|position_embeddings|token_type_embeddings)\.weight", r"embeddings.\1.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"embeddings.LayerNorm.\1"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)", r"layers.\1.attention.q_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)", r"layers.\1.attention.k_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)", r"layers.\1.attention.v_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"layers.\1.attention.o_proj.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)", r"layers.\1.attention_norm.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"layers.\1.intermediate.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"layers.\1.output.\2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)", r"layers.\1.output_norm.\2"),
)
BUFFERS = (r"embeddings\.(position_ids|token_type_ids)",)  # saved by older transformers releases
TASK_HEADS = ("pooler.", "classifier.", "qa_outputs.")

FAMILY = Family(
    model_type="bert",
    title="BERT",
    read_config=BertConfig.from_dict,
    prefix="bert.",
    rules=ENCODER_RULES,
    heads=TASK_HEADS + ("cls.",),
    skipped=BUFFERS,
    masked_lm=MaskedLMNames(
        root="cls.predictions.", dense="transform.dense", norm="transform.LayerNorm", decoder="decoder", bias="bias"
    ),
)
