"""A continuation as the runs read it (ui/state/written.py): a small dataclass, not a str passed off as the text, so a
result kept for the typed text, or for the same text written with other ids, is never taken for its own."""

from __future__ import annotations

import dataclasses

import torch

from attention.runs.inputs import Encoded
from ui.state.view_context import RunKey
from ui.state.written import Written, text_of

TEXT = "The cat sat"


def encoded(ids: list[int]) -> Encoded:
    tensor = torch.tensor([ids])
    return Encoded(
        input_ids=tensor,
        attention_mask=torch.ones_like(tensor),
        token_type_ids=torch.zeros_like(tensor),
        tokens=[str(i) for i in ids],
        word_ids=list(range(len(ids))),
        sequence_ids=[0] * len(ids),
        offsets=[(0, 0)] * len(ids),
        total_tokens=len(ids),
        notice=None,
        special_tokens_mask=(False,) * len(ids),
    )


def test_a_continuation_is_a_dataclass_not_a_str():
    written = Written.of(TEXT, encoded([5, 6, 7]))
    assert dataclasses.is_dataclass(written) and not isinstance(written, str)
    assert written.ids == (5, 6, 7) and written.text == TEXT and text_of(written) == TEXT == text_of(TEXT)


def test_a_key_with_the_same_text_and_other_ids_is_another_key():
    one, again, other = (Written.of(TEXT, encoded(ids)) for ids in ([5, 6, 7], [5, 6, 7], [5, 6, 8]))
    assert one == again and hash(one) == hash(again)  # the same text written with the same ids: one result
    assert one != other and one != TEXT and TEXT != one  # other ids, or the text typed: never the same key
    store = {("", one, ""): "mine", ("", TEXT, ""): "typed"}
    assert store[("", again, "")] == "mine" and ("", other, "") not in store
    assert RunKey("", one) == RunKey("", again) and RunKey("", one) != RunKey("", other) != RunKey("", TEXT)
