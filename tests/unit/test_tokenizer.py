"""`encode` runs a fast tokenizer's own `tokenizers` backend: every field the same as transformers'
`tokenizer(...)` for each kind of tokenizer here; and the bundled model's tokenizer, whose transformers
part is built at its first use, so that its first run needs no transformers import."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys

import pytest
from conftest import ROOT, write_tiny_tokenizer
from families import write_bpe_tokenizer

from attention import encode, load_model
from attention.load.sources import default_model_dir
from attention.load.tokenizer import FirstUseTokenizer, load_tokenizer

KINDS = ("bundled", "wordpiece", "roberta", "gpt2", "llama")
# (text, pair, max_length): pairs cut from the longer side first and from both, and texts holding special tokens
CASES = [
    ("The animal didn't cross the street because it was too tired.", None, 512),
    ("The animal didn't cross the street because it was too tired.", None, 6),
    ("The cat sat on the mat.", "She read the book and he ran.", 512),
    ("The cat sat on the mat.", "The trophy doesn't fit in the suitcase because it is too big.", 12),
    ("The trophy doesn't fit in the suitcase because it is too big.", "The cat sat.", 9),
    ("The trophy doesn't fit in the suitcase.", "She read the book and he ran.", 7),
    ("[CLS] the <s> cat </s> <|endoftext|> [SEP] sat", None, 512),
    ("Crème brûlée à la façon de Zoë,   naïve  résumé 😍.", "注意力机制 是 Transformer", 512),
    ("", None, 512),
    ("   ", "x", 512),
]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    made = {}
    for kind in KINDS:
        if kind == "bundled":
            made[kind] = load_tokenizer(default_model_dir(), 30522)
            continue
        folder = tmp_path_factory.mktemp(kind)
        if kind == "wordpiece":
            write_tiny_tokenizer(folder)
        else:
            write_bpe_tokenizer(folder, roberta=kind == "roberta", llama=kind == "llama")
        made[kind] = load_tokenizer(folder, 10_000)
    return made


@pytest.mark.parametrize("kind", KINDS)
def test_encode_gives_what_the_tokenizer_gives(tokenizers, kind):
    """Every field of `encode` equals transformers' call with the same truncation, case by case; each case after
    transformers' calls (which leave the backend truncating), so a setting left behind would show."""
    tokenizer = tokenizers[kind]
    for text, pair, limit in CASES:
        enc = encode(tokenizer, text, pair, max_length=limit)
        theirs = tokenizer(
            text,
            pair,
            truncation=True,
            max_length=limit,
            return_offsets_mapping=True,
            return_token_type_ids=True,
            return_special_tokens_mask=True,
        )
        whole = tokenizer(text, pair)["input_ids"]
        case = (kind, text, pair, limit)
        assert enc.input_ids[0].tolist() == theirs["input_ids"], case
        assert enc.attention_mask[0].tolist() == theirs["attention_mask"], case
        assert enc.token_type_ids[0].tolist() == theirs["token_type_ids"], case
        assert enc.tokens == theirs.tokens(), case
        assert enc.word_ids == theirs.word_ids(), case
        assert enc.sequence_ids == theirs.sequence_ids(), case
        assert enc.offsets == [tuple(o) for o in theirs["offset_mapping"]], case
        assert list(enc.special_tokens_mask or ()) == [bool(m) for m in theirs["special_tokens_mask"]], case
        assert enc.total_tokens == len(whole), case
        assert enc.truncated == (len(whole) > limit), case
    assert sum(len(whole) > limit for text, pair, limit in CASES for whole in [tokenizer(text, pair)["input_ids"]]) >= 3


def test_encode_leaves_the_tokenizer_as_it_found_it(tokenizers):
    """After a truncated encode, transformers' own call without truncation reads the whole text."""
    tokenizer = tokenizers["wordpiece"]
    text = CASES[1][0]
    assert encode(tokenizer, text, max_length=6).truncated
    assert tokenizer.backend_tokenizer.truncation is None
    assert len(tokenizer.backend_tokenizer.encode(text).ids) > 6


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_the_bundled_model_runs_before_transformers_is_imported():
    """Loading the bundled model and encoding a sentence imports no transformers; anything else asked of its
    tokenizer builds transformers' tokenizer, which encodes the same."""
    script = """
import sys
from attention import encode, load_model
model, tokenizer = load_model()
enc = encode(tokenizer, "The animal didn't cross the street because it was too tired.")
print("before", "transformers" in sys.modules, type(tokenizer).__name__)
ids = tokenizer("The animal didn't cross the street because it was too tired.")["input_ids"]
print("after", "transformers" in sys.modules, ids == enc.input_ids[0].tolist(), type(tokenizer.loaded).__name__)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["before", "False", "FirstUseTokenizer", "after", "True", "True", "BertTokenizer"]


def test_the_bundled_backend_is_the_one_transformers_builds():
    """The tokenizer.json read at once is the backend transformers' tokenizer holds, but for the padding and
    truncation transformers sets before each call; the same truncation side; the same size."""
    _, tokenizer = load_model()
    assert isinstance(tokenizer, FirstUseTokenizer)
    ours = json.loads(tokenizer.backend_tokenizer.to_str())
    built = json.loads(tokenizer.loaded.backend_tokenizer.to_str())
    assert ours["padding"] is None and ours["truncation"] is None
    assert {**built, "padding": None, "truncation": None} == ours
    assert tokenizer.truncation_side == tokenizer.loaded.truncation_side
    assert tokenizer.backend_tokenizer.encode_special_tokens == tokenizer.loaded.split_special_tokens
    assert len(tokenizer) == len(tokenizer.loaded) == 30522
    assert tokenizer.backend_tokenizer is not tokenizer.loaded.backend_tokenizer


def test_the_first_use_tokenizer_copies_and_pickles():
    """Shipped to a Ray actor (pickled) or copied, it is the same tokenizer."""
    _, tokenizer = load_model()
    text = CASES[3][0]
    for other in (pickle.loads(pickle.dumps(tokenizer)), copy.deepcopy(tokenizer), copy.copy(tokenizer)):
        assert isinstance(other, FirstUseTokenizer)
        assert encode(other, text).tokens == encode(tokenizer, text).tokens
        assert other.decode(encode(other, text).input_ids[0]) == tokenizer.decode(encode(tokenizer, text).input_ids[0])
