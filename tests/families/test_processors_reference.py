"""The scores a token is chosen from are transformers' own: repetition penalty, temperature, top-k and top-p
(attention/writing/processors.py) against transformers' logits processors, built by its generate's own code in its own
order, on fixed logits at several temperatures and top-p values, and by hand on a case small enough to count; the
top probabilities a sampled writing keeps (attention.generate's top_probs) against softmax(logits / T) after the
same processors, from transformers' model's logits; and the Next token view's tempered bars against
TemperatureLogitsWarper's softmax."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from families import make_family

from attention import generate, load_model
from attention.writing.processors import Settings, process
from viz.next_token import softmax

PROMPT = "The animal didn't cross the street because"
TEMPERATURES = (0.3, 0.7, 1.0, 1.6)
TOP_PS = (None, 0.3, 0.5, 0.9, 0.97)
V = 64
# the tokens already written: some of them have negative logits, some positive, one comes twice
IDS = torch.tensor([[3, 17, 17, 40, 5, 61]])


def logits_fixed() -> torch.Tensor:
    return torch.randn(1, V, generator=torch.Generator().manual_seed(51)) * 2.5  # (1, V)


def their_processors(penalty=1.0, temperature=1.0, top_k=None, top_p=None, config=None, length=None):
    """transformers' processors for these options (sampling), as its generate builds and orders them, over the
    generation config `config` (a checkpoint's) or the defaults, for a prompt of `length` tokens (IDS's by default)."""
    from transformers import GenerationConfig
    from transformers.generation.utils import GenerationMixin

    class Model(GenerationMixin):  # what _get_logits_processor reads of a model: a decoder's config
        config = SimpleNamespace(is_encoder_decoder=False)

    options = dict(do_sample=True, temperature=temperature, top_k=top_k or 0, top_p=top_p or 1.0)
    if config is None:
        config = GenerationConfig(repetition_penalty=penalty, **options)
    else:
        config = copy.deepcopy(config)
        config.update(**options)
    return Model()._get_logits_processor(config, input_ids_seq_length=length or IDS.size(1), device="cpu")


def test_their_order_is_penalty_temperature_top_k_top_p():
    """What the comparisons below compare with: the order transformers applies them in, ours."""
    names = [type(p).__name__ for p in their_processors(1.3, 0.7, 5, 0.9)]
    assert names == [
        "RepetitionPenaltyLogitsProcessor",
        "TemperatureLogitsWarper",
        "TopKLogitsWarper",
        "TopPLogitsWarper",
    ]


def clear_of_threshold(scores: torch.Tensor, top_p: float | None) -> float:
    """How far the cumulative probabilities top-p compares lie from its threshold 1 - top_p (inf without top-p):
    the fixed logits are chosen so that no rounding can move a token across it."""
    if top_p is None:
        return math.inf
    cumulative = scores.sort(dim=-1).values.softmax(-1).cumsum(-1)
    return float((cumulative - (1 - top_p)).abs().min())


@pytest.mark.parametrize("top_p", TOP_PS)
@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_processed_scores_are_transformers(temperature, top_p):
    logits = logits_fixed()
    for penalty in (1.0, 1.3):
        for top_k in (None, 1, 7):
            theirs = their_processors(penalty, temperature, top_k, top_p)(IDS, logits.clone())  # (1, V)
            ours = process(logits, IDS, Settings(repetition_penalty=penalty), temperature, top_k, top_p)
            case = (temperature, top_p, penalty, top_k)
            before_top_p = their_processors(penalty, temperature, top_k)(IDS, logits.clone())
            assert clear_of_threshold(before_top_p, top_p) > 1e-4, case
            assert torch.equal(ours.isinf(), theirs.isinf()), (case, ours.isinf().sum(), theirs.isinf().sum())
            torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0, msg=f"{case}")
            torch.testing.assert_close(ours.softmax(-1), theirs.softmax(-1), rtol=1e-5, atol=1e-7, msg=f"{case}")
    assert torch.equal(logits, logits_fixed())  # ours left the logits as they were


def test_processed_scores_differ_from_the_logits_where_they_should():
    """The grid above compares things that differ: temperature and penalty change the scores, top-p cuts."""
    logits = logits_fixed()
    plain = process(logits, IDS, Settings(), 1.0, None, None)
    assert torch.equal(plain, logits)
    assert not torch.allclose(process(logits, IDS, Settings(), 0.7, None, None), logits)
    assert not torch.equal(process(logits, IDS, Settings(repetition_penalty=1.3), 1.0, None, None), logits)
    kept = [int((~process(logits, IDS, Settings(), 1.0, None, p).isinf()).sum()) for p in TOP_PS[1:]]
    assert kept == sorted(kept) and 1 < kept[0] < kept[-1] < V  # the more top-p, the more kept; never all


@pytest.mark.parametrize(("top_p", "kept"), [(0.35, 1), (0.5, 2), (0.75, 3), (0.95, 4)])
def test_top_p_keeps_the_token_that_crosses_it(top_p, kept):
    """probabilities 0.4, 0.3, 0.2, 0.1: top-p 0.5 keeps 0.4 and 0.3, the token whose probability carries the
    sum past 0.5 included (0.4 alone does not reach it), renormalised to 4/7 and 3/7; transformers keeps the same."""
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log()
    ours = process(logits, torch.tensor([[0]]), Settings(), 1.0, None, top_p)
    theirs = their_processors(top_p=top_p)(torch.tensor([[0]]), logits.clone())
    assert (~ours.isinf()).sum() == kept == (~theirs.isinf()).sum()
    assert torch.equal(ours.isinf(), torch.arange(4)[None] >= kept)  # the most probable ones
    expected = torch.tensor([0.4, 0.3, 0.2, 0.1])[:kept] / sum([0.4, 0.3, 0.2, 0.1][:kept])
    torch.testing.assert_close(ours.softmax(-1)[0, :kept], expected)


def test_temperature_divides_the_logits_once():
    """By hand: logits (2, 1, 0) at T = 0.5 give softmax(4, 2, 0); at T = 2, softmax(1, 0.5, 0)."""
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    for temperature, scaled in ((0.5, [4.0, 2.0, 0.0]), (2.0, [1.0, 0.5, 0.0])):
        probs = process(logits, torch.tensor([[0]]), Settings(), temperature, None, None).softmax(-1)[0]
        e = torch.tensor(scaled).exp()
        torch.testing.assert_close(probs, e / e.sum())


@pytest.fixture(scope="module")
def penalised(tmp_path_factory):
    """A tiny Llama whose generation config asks for a repetition penalty, loaded by us and by transformers."""
    from transformers import AutoModelForCausalLM

    folder = make_family(tmp_path_factory.mktemp("llama"), "llama")
    path = folder / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "repetition_penalty": 1.3}))
    reference = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    return folder, *load_model(folder), reference


# (temperature, top_k, top_p, seed): seeds whose every step lies clear of top-p's threshold (see the guard)
SAMPLED = [(0.6, None, 0.8, 1), (0.6, None, 0.7, 1), (1.5, 40, 0.9, 3), (2.0, 20, 0.6, 3), (0.8, 6, None, 3)]


@pytest.mark.parametrize(("temperature", "top_k", "top_p", "seed"), SAMPLED)
def test_sampled_top_probabilities_are_softmax_of_the_processed_logits(penalised, temperature, top_k, top_p, seed):
    """Each step's top probabilities of a sampled writing are softmax(logits / T) after transformers' processors
    (the checkpoint's repetition penalty, then temperature, top-k, top-p), the logits transformers' model's own
    over the sequence written so far. The two models' logits agree within 1e-5 (the parity tests' bound on hidden
    states; bit for bit here), which moves a probability or a cumulative sum by at most 2 · 1e-5 / T."""
    from transformers import GenerationConfig

    folder, model, tokenizer, reference = penalised
    options = dict(do_sample=True, temperature=temperature, top_k=top_k, top_p=top_p)
    ours = generate(model, tokenizer, PROMPT, max_new_tokens=6, seed=seed, top=5, **options)
    start = ours.ids.size(1) - ours.new_ids.size(1)
    checkpoint = GenerationConfig.from_pretrained(str(folder))
    processors = their_processors(temperature=temperature, top_k=top_k, top_p=top_p, config=checkpoint, length=start)
    assert "RepetitionPenaltyLogitsProcessor" in [type(p).__name__ for p in processors]
    for step in range(ours.new_ids.size(1)):
        ids = ours.ids[:, : start + step]  # (1, T): what was there when this token was chosen
        with torch.no_grad():
            logits = reference(ids).logits[:, -1].float()  # (1, V)
        before_top_p = their_processors(temperature=temperature, top_k=top_k, config=checkpoint, length=start)(
            ids, logits.clone()
        )
        assert clear_of_threshold(before_top_p, top_p) > 1e-4, step  # no token near the threshold
        probs = processors(ids, logits.clone()).softmax(-1)[0]  # (V,)
        expected, expected_ids = probs.topk(5)
        torch.testing.assert_close(ours.top_probs[step], expected, atol=5e-5, rtol=0, msg=f"step {step}")
        shown = expected > 0  # ids of probability 0 are in no order
        assert torch.equal(ours.top_ids[step][shown], expected_ids[shown]), step
        assert bool(probs[ours.new_ids[0, step]] > 0)  # the token drawn was one of those kept


def test_the_next_token_views_tempered_bars_are_temperature_warpers():
    """The Next token view's bars at temperature T (viz.next_token.softmax): transformers' TemperatureLogitsWarper,
    then a softmax, in float64 from the same float32 logits."""
    from transformers.generation.logits_process import TemperatureLogitsWarper

    logits = logits_fixed()
    for temperature in (0.05, 0.3, 0.7, 1.0, 1.6, 3.0):
        warped = TemperatureLogitsWarper(temperature)(IDS, logits.double())
        np.testing.assert_allclose(softmax(logits.numpy(), temperature), warped.softmax(-1).numpy(), rtol=1e-12, atol=0)
