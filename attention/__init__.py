"""Multi-head attention and transformer models (BERT, RoBERTa, DistilBERT, ELECTRA, GPT-2, Llama, Mistral,
Qwen2, and the encoder-decoders BART, mBART, Marian and T5) written out in plain PyTorch, loading real
checkpoints."""

from .config import BertConfig, ConfigError, ModelConfig
from .core.dot_product import scaled_dot_product_attention
from .core.mha import MultiHeadAttention
from .errors import ModelLoadError
from .load.convert import map_state_dict
from .load.loading import LoadReport, load_bert, load_model
from .models import FAMILIES, EncoderDecoder, ModelOutput, Seq2SeqOutput, Transformer
from .models.bert import BertModel, BertOutput
from .runs.inputs import Encoded, encode
from .writing.generate import Generation, generate, load_lm_head

__all__ = [
    "FAMILIES",
    "Generation",
    "BertConfig",
    "BertModel",
    "BertOutput",
    "ConfigError",
    "Encoded",
    "EncoderDecoder",
    "LoadReport",
    "ModelConfig",
    "ModelLoadError",
    "ModelOutput",
    "MultiHeadAttention",
    "Seq2SeqOutput",
    "Transformer",
    "encode",
    "generate",
    "load_bert",
    "load_lm_head",
    "load_model",
    "map_state_dict",
    "scaled_dot_product_attention",
]
