"""Multi-head attention and a BERT encoder written out in plain PyTorch, loading real checkpoints."""
from .bert import BertModel, BertOutput
from .config import BertConfig, ConfigError
from .inputs import Encoded, encode
from .loading import LoadReport, ModelLoadError, load_bert, map_state_dict
from .mha import MultiHeadAttention, scaled_dot_product_attention

__all__ = [
    "BertConfig", "BertModel", "BertOutput", "ConfigError", "Encoded", "LoadReport", "ModelLoadError",
    "MultiHeadAttention", "encode", "load_bert", "map_state_dict", "scaled_dot_product_attention",
]
