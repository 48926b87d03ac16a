"""Loading a checkpoint: where its files are (sources.py), reading and measuring its weight files (checkpoint.py,
checkpoint_sizes.py), renaming them by the family's map and the strict copy (convert.py), its tokenizer
(tokenizer.py), and load_model with its report (loading.py)."""
