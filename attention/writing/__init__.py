"""A model writing: a causal decoder continuing a prompt and an encoder-decoder writing (generate.py,
generate_seq2seq.py), the shared token loop and LM heads (search.py), and the checkpoint's generation settings,
read once at load (processors.py)."""
