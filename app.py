"""Attention visualizer: type a sentence, see its WordPiece tokens and what each head attends to."""
from __future__ import annotations

import streamlit as st
import torch

from attention import encode, load_bert

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."


@st.cache_resource(show_spinner="Loading the model…")
def get_model(source: str | None):
    return load_bert(source)


def main() -> None:
    st.set_page_config(page_title="Attention visualizer", layout="wide")
    st.title("Attention visualizer")
    model, tokenizer = get_model(None)
    text = st.text_area("Sentence", DEFAULT_SENTENCE, key="text")
    if not text.strip():
        st.info("Type a sentence to see its tokens and attention.")
        return
    enc = encode(tokenizer, text, max_length=model.config.max_position_embeddings)
    if enc.notice:
        st.warning(enc.notice)
    st.dataframe({"token": enc.tokens, "id": enc.input_ids[0].tolist(), "segment": enc.token_type_ids[0].tolist()})
    with torch.inference_mode():
        out = model(enc.input_ids, enc.attention_mask, enc.token_type_ids)
    st.caption(f"{len(out.attentions)} layers × {out.attentions[0].shape[1]} heads, {len(enc.tokens)} tokens")


main()
