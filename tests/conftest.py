"""Shared fixtures: the bundled MiniLM and a tiny random BERT checkpoint written to a temp folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
# The app tests compare the page with float32 runs on the CPU; on a machine with a GPU, ATTENTION_DEVICE's
# default (auto) would put the app's model there in bfloat16. Set it to run them on the GPU
# (tests/families/test_cuda.py puts its models there itself).
os.environ.setdefault("ATTENTION_DEVICE", "cpu")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
    type_vocab_size=2,
    initializer_range=0.3,
)
# a WordPiece vocabulary that fits the tiny model's 99 ids
_WORDS = (
    "the animal street it was too tired cross because didn ##ed ##ing cat dog sat on mat big small "
    "trophy suitcase fit in not he she they book read ##er ##ly and of to is mouse ran"
)
TINY_VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "'", "!", "?"]
    + list("abcdefghijklmnopqrstuvwxyz")
    + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    + _WORDS.split()
)
assert len(TINY_VOCAB) == len(set(TINY_VOCAB)) == TINY["vocab_size"]


def write_tiny_tokenizer(folder: Path) -> None:
    from transformers import BertTokenizer

    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(TINY_VOCAB[: TINY["vocab_size"]]) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(vocab=str(vocab), do_lower_case=True)
    assert len(tokenizer) == TINY["vocab_size"]
    tokenizer.save_pretrained(str(folder))


def make_tiny(folder: Path, model_class: str = "BertModel", safe: bool = True, seed: int = 0, **overrides) -> Path:
    """Save a random transformers BERT (of `model_class`) with a matching tokenizer into `folder`."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(**{**TINY, **overrides})
    model = getattr(transformers, model_class)(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    if not safe:  # the older pickle-based format, written the way older releases wrote it
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    write_tiny_tokenizer(folder)
    return folder


@pytest.fixture(scope="session", autouse=True)
def readable_temp(tmp_path_factory):
    """The page reads the server's files only under ATTENTION_FILE_DIRS (ui/serve/sources.py): the tests' checkpoints,
    corpora and points are written under pytest's temp folder, and the repository's data/ is the default, so
    both are listed (for the servers the browser tests start too). tests/app/test_serving.py sets its own."""
    os.environ.setdefault("ATTENTION_FILE_DIRS", f"{tmp_path_factory.getbasetemp()};{ROOT / 'data'}")


def pytest_collection_modifyitems(items):
    """Every test in tests/browser/ drives Chromium: marked `browser` here, so that the everyday selection
    (`-m "not slow and not browser"`, pytest.ini) leaves them out without a mark on each."""
    for item in items:
        if item.path.name.startswith("test_browser"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def minilm():
    from attention import load_bert

    return load_bert()


def reference_model(folder):
    """transformers' own BertModel on the same checkpoint, eager attention, as the reference."""
    from transformers import BertModel

    return BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
