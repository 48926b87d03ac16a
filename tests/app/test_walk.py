"""The guided walk: each step draws the real tensor of the recorded pass for the chosen head, has its
own link, and the buttons and the arrow keys move between steps."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from test_app import SENTENCE, decode, no_errors, start

from attention.runs.run import run_sentence
from attention.tracing.trace import head_matrix, trace_layer


def step_title(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Step "))


def walk_figures(at) -> dict[str, dict]:
    return {e.proto.id: json.loads(e.proto.spec) for e in at.get("plotly_chart")}


def test_the_step_buttons_carry_no_arrow_of_their_own():
    """Streamlit draws each button's shortcut (← / →) beside its label: a label with its own arrow read
    "◀ Back ←" and "Next ▶ →" on the page."""
    at = start(view="walk", layer="3", head="1")
    labels = {b.key: b.label for b in at.button if b.key in ("walk_prev", "walk_next")}
    assert labels == {"walk_prev": "Back", "walk_next": "Next"}


def test_every_step_draws_the_recorded_tensor_of_the_chosen_head(minilm):
    model, tokenizer = minilm
    enc = tokenizer(SENTENCE, return_tensors="pt")
    trace = trace_layer(model, enc["input_ids"], enc["attention_mask"], enc["token_type_ids"], layer=3)
    at = start(view="walk", layer="3", head="1")
    titles = []
    while True:
        no_errors(at)
        titles.append(step_title(at))
        for fig in (json.loads(e.proto.spec) for e in at.get("plotly_chart")):
            title = (fig["layout"].get("title") or {}).get("text") or ""
            for name in ("scores", "probs", "q_proj", "heads", "merged"):
                if title.startswith(trace.step(name).title + " ["):
                    expected = head_matrix(trace, name, 1)[0]
                    np.testing.assert_allclose(decode(fig["data"][0]["z"]), expected, atol=1e-5)
        assert str(at.query_params.get("walk", "0")).strip("[]'") == str(len(titles) - 1)  # 0 is not written
        forward = next(b for b in at.button if b.key == "walk_next")
        if forward.disabled:
            break
        forward.click().run()
    assert len(titles) == 11
    assert [t.split(": ", 1)[1].split("**")[0] for t in titles][:3] == ["Tokens", "The layer's input", "Q, K and V"]
    assert "Softmax" in titles[6] and "What one head learned" in titles[-1]
    next(b for b in at.button if b.key == "walk_prev").click().run()
    assert "Step 10 of 11" in step_title(at)


def test_a_link_opens_its_step_and_the_last_step_finds_the_coreference_head(minilm):
    model, tokenizer = minilm
    at = start(view="walk", walk="10", layer="0", head="0")
    no_errors(at)
    assert "Step 11 of 11" in step_title(at)
    run = run_sentence(model, tokenizer, SENTENCE)
    to_animal = run.attentions[:, :, run.tokens.index("it"), run.tokens.index("animal")]
    layer, head = np.unravel_index(np.argmax(to_animal), to_animal.shape)
    assert any(f"Opened layer {layer}, head {head}" in c.value for c in at.caption)
    at = start(view="walk", walk="99")
    no_errors(at)
    assert "Step 11 of 11" in step_title(at)  # past the end: the last step


def test_the_last_steps_heading_names_the_head_it_draws(minilm, tmp_path):
    """The last step draws the head strongest_head finds; its heading names that head and says it is not the
    chosen one, in the one line presentation mode shows above the map."""
    from conftest import make_tiny

    from ui.compute.computations import strongest_head

    layer, head, _ = strongest_head(run_sentence(*minilm, SENTENCE), SENTENCE)
    chosen = (layer + 1) % 6, (head + 1) % 12
    for present in ({}, {"present": "1"}):
        at = start(view="walk", walk="10", layer=str(chosen[0]), head=str(chosen[1]), **present)
        no_errors(at)
        assert drawn_head(at) == f"Layer {layer}, head {head}" if not present else f"L{layer} H{head} · "
        heading = step_title(at).split("  \n")[0]  # the page's heading has the keys' hint on its next line
        assert heading.endswith(
            f"— layer {layer}, head {head} (found for this sentence; you chose layer {chosen[0]}, head {chosen[1]})"
        ), heading
    at = start(view="walk", walk="10", layer=str(layer), head=str(head))
    assert step_title(at).split("  \n")[0].endswith(f"— layer {layer}, head {head}")  # the chosen head, found
    flat = make_tiny(tmp_path / "flat", initializer_range=1e-4)  # no head separates: layer 0, head 0
    at = start(view="walk", walk="99", layer="1", head="1", model=str(flat))
    no_errors(at)
    heading = step_title(at).split("  \n")[0]
    assert heading.endswith("— layer 0, head 0 (no head separates the candidates; you chose layer 1, head 1)")
    assert drawn_head(at) == "Layer 0, head 0"


def drawn_head(at) -> str:
    """The title of the last step's map, in presentation mode up to its sentence ("L3 H1 · The animal…")."""
    title = next(f["layout"]["title"]["text"] for key, f in walk_figures(at).items() if key.endswith("walk-head"))
    return title.split("·")[0] + "· " if "·" in title else title


def test_a_causal_model_with_a_fused_projection_shows_its_own_steps(tmp_path):
    from families import make_family

    folder = make_family(tmp_path / "gpt2", "gpt2")
    at = start(view="walk", walk="2", layer="1", head="2", model=str(folder))
    no_errors(at)
    assert "One projection for Q, K and V" in step_title(at)
    for _ in range(4):  # the projections, the split, the scores, the mask
        next(b for b in at.button if b.key == "walk_next").click().run()
    assert "Mask" in step_title(at)
    assert any("causal model" in c.value for c in at.caption)
    drawn = [json.loads(c.proto.spec)["data"][0] for c in at.get("plotly_chart")]
    mask = decode([d for d in drawn if "z" in d][-1]["z"])  # the step's map (the token strip has no z)
    assert np.all(np.triu(mask, 1) == 0) and np.all(mask[np.tril_indices(len(mask))] == 1)


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian's chromium is not installed")
def test_the_arrow_keys_move_between_steps_in_the_browser():
    from browser import app_server, launch
    from playwright.sync_api import sync_playwright
    from test_browser_state import SIZE, clean, wait_drawn

    with app_server() as url, sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport=SIZE)
        page.goto(f"{url}/?view=walk&walk=3&layer=3&head=1")
        wait_drawn(page)
        page.wait_for_function("() => document.body.innerText.includes('Step 4 of 11')", timeout=60_000)
        for key, shown in (
            ("ArrowRight", "Step 5 of 11"),
            ("ArrowRight", "Step 6 of 11"),
            ("ArrowLeft", "Step 5 of 11"),
        ):
            page.keyboard.press(key)
            page.wait_for_function(f"() => document.body.innerText.includes('{shown}')", timeout=60_000)
            page.wait_for_function(
                f"() => location.search.includes('walk={int(shown.split()[1]) - 1}')", timeout=60_000
            )
        clean(page)
        browser.close()
