"""The per-head statistics a corpus run's rows hold: the STATS (means over query positions) of every run, and those
--measures may add (measures.measure_columns), named in one place for scoring.py and measures.py."""

from __future__ import annotations

STATS = ("entropy", "to_cls", "to_sep", "to_self", "to_prev", "to_next", "to_punct", "distance")
SINK_COLUMNS = ("to_first", "to_first_weighted")  # --measures sinks
WEIGHTED_COLUMNS = tuple(f"{name}_weighted" for name in STATS)  # --measures weighted: the STATS of the weighted maps
MEASURED = (*SINK_COLUMNS, *WEIGHTED_COLUMNS)
