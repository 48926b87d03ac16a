"""Which head links a pronoun to its answer in one sentence: every head valued by one named criterion,
the heads ranked by it, and whether the best one separates the candidates at all. Pure numpy.

- margin: attention pronoun → answer minus the best other candidate (ExampleScore.margin).
- specificity: the same margin once each candidate's attention is reduced by what that candidate's
  columns get from the average other token (the mean over every row but the pronoun's pieces). A head
  that looks at the answer from every token, whatever the pronoun, scores low on it.

Also the candidates suggested for a typed sentence: the words before the pronoun that are not common
function words.
"""

from __future__ import annotations

import numpy as np

from .mentions import Located

CRITERIA = {
    "margin": "margin: attention pronoun → answer minus the best other candidate",
    "specificity": "specificity: the margin after subtracting from each candidate the attention it gets from the "
    "average other token",
}
DEFAULT_CRITERION = "specificity"
MIN_SEPARATION = 0.05  # a best value at or under this separates nothing: attention is a share of 1 per row


def column_means(attentions: np.ndarray, located: Located) -> np.ndarray:
    """(n_layers, H, L, L) maps -> (n_layers, H, n_candidates): each candidate's attention (the sum of
    its pieces' columns) averaged over every row but the pronoun's pieces."""
    L = attentions.shape[-2]
    pronoun = sorted(set(located.pronoun))
    n_other = L - len(pronoun)
    means = []
    for cols in located.candidates:
        per_row = attentions[..., cols].sum(axis=-1)  # (n_layers, H, L): each row's attention to the candidate
        others = per_row.sum(axis=-1) - per_row[..., pronoun].sum(axis=-1)
        means.append(others / n_other if n_other else np.zeros_like(others))
    return np.stack(means, axis=-1)


def specificity(word_scores: np.ndarray, attentions: np.ndarray, located: Located) -> np.ndarray:
    """(n_layers, H, n_candidates): pronoun → candidate (``word_scores``, as coref.word_attention gives)
    minus the candidate's column mean over the other tokens' rows."""
    return word_scores - column_means(attentions, located)


def margin_of(values: np.ndarray, answer: int) -> np.ndarray:
    """(..., n_candidates) -> (...): the answer's value minus the best other candidate's."""
    return values[..., answer] - np.delete(values, answer, axis=-1).max(axis=-1)


def head_values(
    word_scores: np.ndarray, attentions: np.ndarray, located: Located, answer: int, criterion: str
) -> np.ndarray:
    """(n_layers, H): every head's value under ``criterion`` (a key of CRITERIA)."""
    if criterion == "margin":
        return margin_of(word_scores, answer)
    if criterion == "specificity":
        return margin_of(specificity(word_scores, attentions, located), answer)
    raise ValueError(f"criterion should be one of {', '.join(CRITERIA)}, got {criterion!r}")


def ranked(values: np.ndarray, top: int | None = None) -> list[tuple[int, int]]:
    """(layer, head) by ``values`` (n_layers, H), highest first; ties by layer then head. NaN last."""
    flat = np.where(np.isnan(values), -np.inf, values).ravel()
    order = np.lexsort((np.arange(flat.size), -flat))[:top]
    return [(int(i) // values.shape[1], int(i) % values.shape[1]) for i in order]


def separates(value: float) -> bool:
    """Whether a best value is more than MIN_SEPARATION: a smaller one is a tie in all but name."""
    return bool(value > MIN_SEPARATION)


def best_head(values: np.ndarray, margins: np.ndarray) -> tuple[int, int] | None:
    """The best head by ``values`` (n_layers, H) among those whose pronoun row itself favours the answer: its
    margin (pronoun → answer minus the best other candidate, ``margins``) separates. Specificity alone can
    crown a head that gives the answer nothing, where the other candidate draws attention from every other
    token but the pronoun. None where no such head's value separates either."""
    eligible = np.where(margins > MIN_SEPARATION, values, np.nan)
    layer, head = ranked(eligible, 1)[0]
    return (layer, head) if separates(float(eligible[layer, head])) else None


# ---- candidates for a typed sentence ---------------------------------------------------------------

STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "some",
        "any",
        "every",
        "each",
        "no",
        "all",
        "both",
        "either",
        "neither",
        "and",
        "or",
        "but",
        "nor",
        "so",
        "yet",
        "for",
        "because",
        "although",
        "though",
        "while",
        "if",
        "when",
        "whenever",
        "since",
        "until",
        "unless",
        "as",
        "than",
        "then",
        "of",
        "in",
        "on",
        "at",
        "to",
        "from",
        "by",
        "with",
        "without",
        "into",
        "onto",
        "over",
        "under",
        "about",
        "after",
        "before",
        "through",
        "during",
        "between",
        "among",
        "against",
        "across",
        "along",
        "around",
        "behind",
        "beyond",
        "near",
        "off",
        "out",
        "up",
        "down",
        "upon",
        "within",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "doesn't",
        "didn't",
        "don't",
        "isn't",
        "wasn't",
        "weren't",
        "has",
        "have",
        "had",
        "having",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "can't",
        "couldn't",
        "won't",
        "wouldn't",
        "not",
        "n't",
        "i",
        "me",
        "my",
        "mine",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "hers",
        "it",
        "its",
        "we",
        "us",
        "our",
        "ours",
        "they",
        "them",
        "their",
        "theirs",
        "who",
        "whom",
        "whose",
        "which",
        "what",
        "there",
        "here",
        "too",
        "very",
        "just",
        "also",
        "only",
        "even",
        "still",
        "again",
        # what a tokenizer leaves of contractions ("didn't" -> didn ' t)
        "didn",
        "doesn",
        "don",
        "isn",
        "wasn",
        "weren",
        "couldn",
        "wouldn",
        "shouldn",
        "hasn",
        "hadn",
        "haven",
        "aren",
        "t",
        "s",
        "d",
        "ll",
        "re",
        "ve",
        "m",
    }
)


def suggest_candidates(words: list[str], pronoun: int) -> list[int]:
    """Word indices before ``pronoun`` that may be its antecedent: not a function word (STOP_WORDS),
    not punctuation or a number, each spelling once (its first occurrence), not the pronoun's own word."""
    seen = {words[pronoun].lower()}
    chosen = []
    for i, word in enumerate(words[:pronoun]):
        w = word.lower()
        if w in seen or w in STOP_WORDS or not any(ch.isalpha() for ch in w):
            continue
        seen.add(w)
        chosen.append(i)
    return chosen
