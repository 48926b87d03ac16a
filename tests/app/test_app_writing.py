"""A continuation on the page is the sequence the model wrote (AppTest, tiny Llama): every view runs on the
ids written, never on the decoded text read again by the tokenizer, which cuts it otherwise."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import make_family
from test_app import decode, head_figure, no_errors, start
from test_app_families import every_view_draws
from test_app_generate import PROMPT, strip_ids

from attention import generate, load_model
from viz._text import escape_all, position_labels


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_family(tmp_path_factory.mktemp("llama"), "llama")


def test_every_view_runs_on_the_ids_written_not_the_text_read_again(llama):
    model, tokenizer = load_model(str(llama))
    ids = generate(model, tokenizer, PROMPT, max_new_tokens=6).ids[0].tolist()
    again = tokenizer(tokenizer.decode(ids, clean_up_tokenization_spaces=False))["input_ids"]
    assert again != ids  # the case at hand: the text written reads again as other tokens
    at = start(model=str(llama), s=PROMPT, cont="1", n="6", layer="1", head="2")
    no_errors(at)
    with torch.inference_mode():
        expected = model(torch.tensor([ids])).attentions[1][0, 2].numpy()
    fig = head_figure(at)
    assert fig["data"][0]["y"] == position_labels(escape_all(tokenizer.convert_ids_to_tokens(ids)))
    np.testing.assert_allclose(decode(fig["data"][0]["z"]).reshape(len(ids), len(ids)), expected, atol=1e-6)
    assert strip_ids(at) == ids
    assert not any("read again" in i.value for i in at.info)
    every_view_draws(at)


def test_the_traced_layer_the_padded_batch_and_the_grouped_run_read_the_ids_written(llama):
    from ui.compute.computations import get_grouped_run
    from ui.compute.generation import Settings, continuation
    from ui.compute.runs import get_batch, get_trace
    from ui.state.state import SHORT_SECOND

    source = str(llama)
    written = continuation(source, PROMPT, Settings(6, False, 1.0, None, None, None))
    model, tokenizer = load_model(source)
    ids = list(written.ids)
    with torch.inference_mode():
        expected = model(torch.tensor([ids])).attentions[1][0].numpy()  # (H, T, T)
    probs = get_trace(source, (written.text,), "", 1, 0).tensor("probs")[0]
    np.testing.assert_allclose(probs.float().numpy(), expected, atol=1e-6)
    batch = get_batch(source, (written.text, SHORT_SECOND))
    assert batch.tokens[0] == tokenizer.convert_ids_to_tokens(ids)  # the longer of the two: not padded
    np.testing.assert_allclose(batch.attentions[1, 0], expected, atol=1e-5)
    padded = get_trace(source, (written.text, SHORT_SECOND), "", 1, 0).tensor("probs")[0]
    np.testing.assert_allclose(padded.float().numpy(), expected, atol=1e-5)
    grouped = get_grouped_run(source, 2, written.text, "")
    assert grouped.encoded.input_ids[0].tolist() == ids


def test_the_report_says_how_the_text_was_written_where_it_was(llama):
    """A model that wrote: one row with the settings it wrote by; the same model not continuing: none."""
    from test_app_report import facts, report

    at = start(model=str(llama), s=PROMPT, cont="1", n="6", sample="1", seed="3")
    no_errors(at)
    said = facts(report(at))
    assert said["Continued by the model"] == "6 tokens, sampled at temperature 1, seed 3"
    assert not {"New tokens", "Sampled", "Seed", "Temperature"} & set(said)
    at = start(model=str(llama), s=PROMPT)
    no_errors(at)
    assert "Continued by the model" not in facts(report(at)) and "Seed" not in facts(report(at))
