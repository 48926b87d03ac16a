"""Cached computations: the model once per process, results per input (shared, read-only)."""
from __future__ import annotations

import streamlit as st

from attention import load_bert
from attention.run import run_padded_batch, run_sentence
from attention.trace import trace_layer


@st.cache_resource(max_entries=3, show_spinner=False)
def get_model(source: str):
    return load_bert(source or None)


@st.cache_resource(max_entries=16, show_spinner=False)
def get_run(source: str, text: str, text_b: str, causal: bool = False):
    model, tokenizer = get_model(source)
    return run_sentence(model, tokenizer, text, text_b, causal=causal)


@st.cache_resource(max_entries=4, show_spinner=False)
def get_trace(source: str, texts: tuple[str, ...], text_b: str, layer: int):
    """The recorded forward pass of one layer: for one sentence (or pair), or a padded batch."""
    model, tokenizer = get_model(source)
    limit = model.config.max_position_embeddings
    if len(texts) == 1:
        enc = tokenizer(texts[0], text_b or None, truncation=True, max_length=limit, return_tensors="pt")
    else:
        enc = tokenizer(list(texts), padding=True, truncation=True, max_length=limit, return_tensors="pt")
    return trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=layer)


@st.cache_resource(max_entries=8, show_spinner=False)
def get_batch(source: str, texts: tuple[str, ...]):
    model, tokenizer = get_model(source)
    return run_padded_batch(model, tokenizer, list(texts))
