"""The server's own: the operator's settings (settings.py), where the server may read files (sources.py), the warm-
up (preload.py) and a corpus run's results read from disk (corpus_runs.py)."""
