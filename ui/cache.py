"""Cached computations, shared by every session and never changed after they are made: the model
once per process, results per input in stores bounded both in entries and in bytes, so that a
room full of people cannot grow the server's memory without limit."""
from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Any, Callable

import numpy as np
import streamlit as st
import torch

from attention import load_bert
from attention.run import run_padded_batch, run_sentence
from attention.trace import trace_layer

MB = 1024 * 1024


def size_of(value: Any) -> int:
    """Bytes held by the arrays and tensors inside a result (dataclasses, lists, dicts)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(size_of(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return sum(size_of(v) for v in value)
    if isinstance(value, dict):
        return sum(size_of(v) for v in value.values())
    return 0


class BoundedStore:
    """Least recently used results, at most `max_entries` of them and `max_bytes` in all (the newest
    is always kept). Thread-safe; two sessions asking for the same new key may both compute it."""

    def __init__(self, max_entries: int, max_bytes: int):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.lock = threading.Lock()

    @property
    def total_bytes(self) -> int:
        return sum(size for _, size in self.items.values())

    def get(self, key):
        with self.lock:
            if key not in self.items:
                return None
            self.items.move_to_end(key)
            return self.items[key][0]

    def put(self, key, value) -> None:
        size = size_of(value)
        with self.lock:
            self.items[key] = (value, size)
            self.items.move_to_end(key)
            while len(self.items) > 1 and (len(self.items) > self.max_entries or self.total_bytes > self.max_bytes):
                self.items.popitem(last=False)

    def get_or_compute(self, key, compute: Callable[[], Any]):
        value = self.get(key)
        if value is None:
            value = compute()
            self.put(key, value)
        return value


@st.cache_resource(show_spinner=False)
def store(name: str, max_entries: int, max_bytes: int) -> BoundedStore:
    """One store per name and process."""
    return BoundedStore(max_entries, max_bytes)


@st.cache_resource(max_entries=2, show_spinner=False)
def get_model(source: str):
    return load_bert(source or None)


def get_run(source: str, text: str, text_b: str, causal: bool = False):
    def compute():
        model, tokenizer = get_model(source)
        return run_sentence(model, tokenizer, text, text_b, causal=causal)

    return store("runs", 32, 400 * MB).get_or_compute((source, text, text_b, causal), compute)


def get_trace(source: str, texts: tuple[str, ...], text_b: str, layer: int):
    """The recorded forward pass of one layer: for one sentence (or pair), or a padded batch."""
    def compute():
        model, tokenizer = get_model(source)
        limit = model.config.max_position_embeddings
        if len(texts) == 1:
            enc = tokenizer(texts[0], text_b or None, truncation=True, max_length=limit, return_tensors="pt")
        else:
            enc = tokenizer(list(texts), padding=True, truncation=True, max_length=limit, return_tensors="pt")
        return trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=layer)

    return store("traces", 8, 200 * MB).get_or_compute((source, texts, text_b, layer), compute)


def get_batch(source: str, texts: tuple[str, ...]):
    def compute():
        model, tokenizer = get_model(source)
        return run_padded_batch(model, tokenizer, list(texts))

    return store("batches", 8, 200 * MB).get_or_compute((source, texts), compute)
