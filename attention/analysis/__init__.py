"""Read-only computations on a model's outputs, one question per module:

coref/     which heads send a pronoun to its antecedent: a suite of examples scored, its statistics, CSVs,
           engines and command line (`python -m attention.analysis.coref FILE ...`); its rooms in coref/__init__.py
stats      per-head statistics and pattern labels; heads compared across sentences
corpus/    those statistics over a whole corpus, batched, locally or with Ray; its command line
           `python -m attention.analysis.corpus FILE ...`; its rooms in corpus/__init__.py
runs       what a command line's output folder holds a run of (run.json: input fingerprint, settings)
rollout    attention through the layers: rollout and attention flow
maxflow    attention flow's max-flow problems, here or in a worker process (numpy and scipy only)
query_key  one head's query and key vectors for one token, from a recorded forward pass
ablation   switch heads off and measure what changes
gqa        the model converted to grouped-query attention, and how much each map moves
mixing     what attention moves, not only where it looks: value-weighted maps, value zeroing, first-token shares
alti       ALTI's token-to-token contributions of a post-norm encoder, and their rollout
lens       the logit lens: each layer's output through the final norm and LM head
"""
