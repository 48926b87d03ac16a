"""BERT now lives in attention/models/bert.py, beside the other families; kept for old imports."""

from .models.bert import BertModel, BertOutput

__all__ = ["BertModel", "BertOutput"]
