"""BERT now lives in attention/models/bert.py, beside the other families; kept for old imports."""
from .models.blocks import ACTIVATIONS as _ACTIVATIONS  # noqa: F401
from .models.bert import BertModel, BertOutput  # noqa: F401
