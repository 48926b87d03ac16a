"""What each head does over a whole corpus: attention.analysis.stats.head_stats of every text, batched.

scoring   a batch of texts scored in one forward pass, its rows summed per head and finished into means
engines   where a corpus's batches run: here ("local") or as a Ray Data job ("ray")
heads     head_stats: a corpus's per-head statistics, its batches from the engines summed as they come
cli       the command line, `python -m attention.analysis.corpus FILE --out DIR ...`, writing Parquet parts that a
          stopped run resumes from (through __main__; the library never imports it)
"""

from .heads import head_stats
from .scoring import CONTENT_CHARS, SHARES, STATS, add_sums, finish, head_sums, length_order, padded, score_batch

__all__ = [
    "CONTENT_CHARS",
    "SHARES",
    "STATS",
    "add_sums",
    "finish",
    "head_stats",
    "head_sums",
    "length_order",
    "padded",
    "score_batch",
]
