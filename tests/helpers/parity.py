"""Parity of make_more's cases with transformers (tests/families/test_families_more.py, _gemma.py, _new.py): each case
built once, and the largest differences of its hidden states and maps on the test sentences."""

import pytest
from families import make_more, reference

PARITY_KINDS = ("sentence", "left padded", "right padded")


def case_loader(tmp_path_factory, cases: dict):
    """load(case) -> (our model, tokenizer, transformers' eager base model) of ``cases[case]`` = (family,
    make_more's overrides), each case built once."""
    from attention import load_model

    built = {}

    def load_case(case: str):
        if case not in built:
            family, overrides = cases[case]
            folder = make_more(tmp_path_factory.mktemp(case), family, **overrides)
            built[case] = (*load_model(folder), reference(folder))
        return built[case]

    return load_case


def parity(load, case: str, kind: str) -> tuple[float, float]:
    """The largest differences of the hidden states and of the maps between ours and transformers' on the
    test sentences of ``kind`` (one of PARITY_KINDS; tests/families/test_decoders.py), printed."""
    import test_decoders

    model, tokenizer, theirs = load(case)
    input_ids, attention_mask = test_decoders.inputs(tokenizer, kind)
    hidden, attention = test_decoders.differences(model, theirs, input_ids, attention_mask)
    print(f"\n{case:20} {kind:13} max|Δ hidden| {hidden:.2e}  max|Δ maps| {attention:.2e}")
    return hidden, attention


def parity_suite(cases: dict):
    """A family test module's `load` fixture over ``cases`` (case_loader's) and its parity test: every case on every
    kind of input, hidden states within 1e-5 and maps within 1e-6 of transformers'. A module takes both by name:
    ``load, test_parity_with_transformers = parity_suite(CASES)``."""

    @pytest.fixture(scope="module")
    def load(tmp_path_factory):
        """load(case) -> (our model, tokenizer, transformers' eager base model), each case built once."""
        return case_loader(tmp_path_factory, cases)

    @pytest.mark.parametrize("case", list(cases))
    @pytest.mark.parametrize("kind", PARITY_KINDS)
    def test_parity_with_transformers(load, case, kind):
        hidden, attention = parity(load, case, kind)
        assert hidden <= 1e-5 and attention <= 1e-6, (case, kind, hidden, attention)

    return load, test_parity_with_transformers
