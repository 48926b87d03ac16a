"""The models: each loaded once per process on the operator's device in the operator's dtype, the two
most recently used kept (process state: no visitor's "Clear caches" unloads them), if this server's
source policy allows it (ui/serve/sources.py)."""

from __future__ import annotations

import logging

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention import ModelLoadError, load_model
from attention.load.loading import DeviceUnavailable, read_config, resolve_device
from attention.load.sources import gguf_source, resolve_source
from attention.models import EncoderDecoder

from ..serve.settings import DEVICE, DTYPE
from ..serve.sources import policy
from .stores import kept

log = logging.getLogger("attention-app")
LOADED: set[str] = set()  # sources this process has loaded (a hint for the page, not a cache)
WRITERS = ("bart", "mbart", "marian", "t5")  # the encoder-decoders attention.generate writes with


def _load_model(source: str, downloads: bool, bin_files: bool):
    """The model on the operator's device in the operator's dtype (ATTENTION_DEVICE, ATTENTION_DTYPE:
    the CPU in float32 unless a GPU is asked for). A device this machine does not have is said on the
    page, in one sentence, where the model would be, and the page stops there: no model can load."""
    try:
        device = str(resolve_device(DEVICE))  # "auto" settled once here, so the cache key is the real device
    except DeviceUnavailable as err:
        message = (
            f"This server is set to run the model on '{DEVICE}' (`ATTENTION_DEVICE`), but {err.reason}: "
            "set `ATTENTION_DEVICE=cpu`, or `auto` to use a GPU only when there is one, and restart it."
        )
        if get_script_run_ctx(suppress_warning=True) is not None:
            log.error(message)
            st.error(message)
            st.stop()
        raise ModelLoadError(message) from None
    return _load_on_device(source, downloads, bin_files, device, DTYPE)


@kept(max_entries=2)
def _load_on_device(source: str, downloads: bool, bin_files: bool, device: str, dtype: str):
    config = None if gguf_source(source) is not None else read_config(resolve_source(source or None, downloads))[1]
    if (
        config is not None and config.encoder_decoder.is_encoder_decoder and config.model_type not in WRITERS
    ):  # no generation yet
        raise ModelLoadError(
            f"{source} is an encoder-decoder ({config.model_type}) this page cannot run: it reads "
            f"{', '.join(WRITERS)} encoder-decoders."
        )
    model, tokenizer = load_model(source or None, downloads=downloads, bin_files=bin_files, device=device, dtype=dtype)
    if isinstance(model, EncoderDecoder):  # the views read its encoder, which names the checkpoint it came from
        model.encoder.load_report = model.load_report
    return model, tokenizer


def precision_caption(report) -> str:
    """ ", bfloat16 weights on cuda:0": where and in what dtype a model runs, for its caption; nothing
    for the CPU in float32 (the default)."""
    device, dtype = getattr(report, "device", "cpu"), getattr(report, "dtype", "float32")
    return "" if (device, dtype) == ("cpu", "float32") else f", {dtype} weights on {device}"


def get_model(source: str):
    """The model and tokenizer of `source` ("" for the bundled model), loaded once per process, if
    this server's source policy allows it (ui/serve/sources.py); else a ModelLoadError. For an encoder-decoder,
    its encoder: every view reads one stack of self-attention, and the encoder is run as an encoder-only
    model is (the whole model: `get_seq2seq`)."""
    loaded = _get_loaded(source)
    model, tokenizer = loaded
    return (model.encoder, tokenizer) if isinstance(model, EncoderDecoder) else loaded  # the kept pair itself


def get_seq2seq(source: str):
    """The encoder-decoder and tokenizer of `source`, or None when it is not one."""
    model, tokenizer = _get_loaded(source)
    return (model, tokenizer) if isinstance(model, EncoderDecoder) else None


def model_kinds(source: str) -> frozenset[str]:
    """What the model of `source` is, as the views' registry rows ask (ui/page/registry.py's KINDS): an encoder-decoder
    "seq2seq", a decoder "causal", else "encoder", with "deberta" for DeBERTa's position terms and "sinks" for
    learned sinks (gpt-oss)."""
    if get_seq2seq(source) is not None:
        return frozenset({"seq2seq"})
    config = get_model(source)[0].config
    kinds = {"causal" if config.attention.causal else "encoder"}
    if config.positions.position_embedding_type == "disentangled":
        kinds.add("deberta")
    if config.attention.sinks:
        kinds.add("sinks")
    return frozenset(kinds)


def _get_loaded(source: str):
    rules = policy()
    rules.check(source)
    loaded = _load_model(source, rules.downloads, rules.bin_files)
    LOADED.add(source)
    return loaded
