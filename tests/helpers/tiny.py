"""Tiny random BERT checkpoints and their WordPiece tokenizer, written to a folder: what the tests (through
conftest) and the benches (with tests/helpers on their path, as tests/helpers/families.py is) build on. Offline."""

from __future__ import annotations

from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]

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


def reference_model(folder):
    """transformers' own BertModel on the same checkpoint, eager attention, as the reference."""
    from transformers import BertModel

    return BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
