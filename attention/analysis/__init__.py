"""Read-only computations on a model's outputs, one question per module:

coref      which heads send a pronoun to its antecedent; scoring a suite of examples
coref_examples  the coreference JSONL format, words or character spans, checked line by line
coref_stats     exact intervals, McNemar's test and Holm's correction for right/wrong records
coref_metrics   GAP F1, Winogender's gender gap, the held-out best head, model against model
coref_csv       every head of a result as CSV (the command line's --csv, the page's download)
coref_engines   where a suite's batches run: locally or as a Ray Data job
coref_cli       the command line, `python -m attention.analysis.coref FILE ...`
stats      per-head statistics and pattern labels; heads compared across sentences
corpus     those statistics over a whole corpus, batched, locally or with Ray (corpus_engines); its
           command line corpus_cli, `python -m attention.analysis.corpus FILE ...`
runs       what a command line's output folder holds a run of (run.json: input fingerprint, settings)
rollout    attention through the layers: rollout and attention flow
maxflow    attention flow's max-flow problems, here or in a worker process (numpy and scipy only)
query_key  one head's query and key vectors for one token, from a recorded forward pass
ablation   switch heads off and measure what changes
gqa        the model converted to grouped-query attention, and how much each map moves
"""
