"""A sentence run through a model: text to inputs (inputs.py), its maps as arrays (run.py) with words merged and
special tokens hidden (aggregate.py), a big model's run in pooled tiles and layers on demand (bigrun.py,
seq2seq_maps.py), and the pooling they keep (pooling.py)."""
