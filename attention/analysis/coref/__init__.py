"""Which heads link a pronoun to its antecedent: scoring every head on a suite of coreference examples.

examples    the coreference JSONL format, words or character spans, checked line by line
mentions    where a mention's pieces are, and the word-level attention between them
heads       one sentence's heads ranked (the page's criteria), and candidate words suggested
attend      a batch's pronoun -> candidate attention, the computation the engines run
engines     where a suite's batches run: locally or as a Ray Data job
scoring     every head scored on a suite, in length-bucketed batches (the rules in its docstring)
results     a suite's scores: per example, excluded, accuracy per head, by group; twins
stats       exact intervals, McNemar's test and Holm's correction for right/wrong records
metrics     GAP F1, Winogender's gender gap, the held-out best head, model against model
result_csv  every head of a result, or every example, as CSV (the command line's --csv, the page's downloads)
groups_csv  a result's groups as CSV
cli         the command line, `python -m attention.analysis.coref FILE ...` (through __main__; the library never
            imports it)
"""

from .examples import CorefExample, ExampleError, load_examples, parse_example, parse_examples
from .results import CorefResult, ExampleScore, Exclusion, flipping_heads, group, twin_pairs
from .scoring import NO_ANSWER, score_example, score_heads

__all__ = [
    "NO_ANSWER",
    "CorefExample",
    "CorefResult",
    "ExampleError",
    "ExampleScore",
    "Exclusion",
    "flipping_heads",
    "group",
    "load_examples",
    "parse_example",
    "parse_examples",
    "score_example",
    "score_heads",
    "twin_pairs",
]
