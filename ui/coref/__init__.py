"""The Coreference view's parts: its suites and uploads (coref_data.py), groups (coref_groups.py), public-set
measures (coref_measures.py), the per-example table (coref_rows.py), and the sentence's ranked heads and twins
(coref_sentence.py)."""
