"""In Chromium: a tiny checkpoint of an encoder (BERT), GPT-2 (its fused QKV) and a Llama-style decoder opened in the
app, its tokens on the head map (a causal model's map a lower triangle), its own steps in the shape flow, and (BERT
and GPT-2) every other view drawn. The other five of the first eight families make the same figures: their head
maps are checked on the page for every family in tests/app/test_app_families.py, their shape flows in
tests/families/test_shapeflow_families.py."""

from __future__ import annotations

import os
import urllib.parse

import numpy as np
import pytest
from browser import CHROMIUM, served_chromium
from families import make_family
from test_browser_state import SIZE, clean, wait_drawn

from ui.page import registry

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
SENTENCE = "The animal didn't cross the street because it was too tired."  # an example: coreference is set

HEAD_MAP = """() => {
    const el = [...document.querySelectorAll('.js-plotly-plot')]
        .find(p => (p.querySelector('.gtitle') || {}).textContent?.startsWith('Layer '));
    if (!el) return null;
    const z = el._fullData[0].z;
    return {z: z.map(row => Array.from(row)), ticks: [...el.querySelectorAll('.xtick text')].map(t => t.textContent)};
}"""


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    with served_chromium() as (browser, url):
        page = browser.new_page(viewport=SIZE)
        page.app_url = url
        yield page


def open_app(page, **params) -> None:
    page.goto(page.app_url + "/?" + urllib.parse.urlencode(params))
    wait_drawn(page)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_each_family_opens_in_the_app(browser_page, tmp_path, family):
    from attention import encode, load_model

    page = browser_page
    folder = make_family(tmp_path / family, family)
    model, tokenizer = load_model(folder)
    tokens = encode(tokenizer, SENTENCE).tokens
    open_app(page, model=str(folder), s=SENTENCE, view="head", layer="1", head="2")
    clean(page)
    assert f"— {family}" in page.inner_text("section[data-testid=stSidebar]")
    page.wait_for_function(f"() => ({HEAD_MAP})() !== null", timeout=60_000)
    drawn = page.evaluate(HEAD_MAP)
    z = np.array(drawn["z"], dtype=float)
    assert z.shape == (len(tokens), len(tokens))
    np.testing.assert_allclose(z.sum(1), 1, atol=1e-4)
    if model.config.attention.causal:  # each token sees only itself and the tokens before it
        assert np.all(np.triu(z, 1) == 0) and page.get_by_text("(causal)").count() >= 1
    else:
        assert np.triu(z, 1).sum() > 0.1
    flow_text = "() => [...document.querySelectorAll('.js-plotly-plot')].map(p => p.textContent).join(' ')"
    first = "qkv_proj" if family == "gpt2" else "q_proj"  # the projection's stage, then the softmax's
    open_app(page, model=str(folder), s=SENTENCE, view="flow", layer="1", head="2", step=first)
    clean(page)
    text = page.evaluate(flow_text)
    assert ("fused QKV projection" in text) == (family == "gpt2")
    assert "Q projection" in text or family == "gpt2"
    open_app(page, model=str(folder), s=SENTENCE, view="flow", layer="1", head="2")
    clean(page)
    assert "softmax" in page.evaluate(flow_text)
    if family == "llama":  # its other views are gpt2's figures; gpt-oss (RoPE, GQA) opens in every view in _more
        return
    for _ in visit_views(page, KINDS[family], opened=("head", "shapeflow")):  # every other view
        pass


KINDS = {"bert": {"encoder"}, "gpt2": {"causal"}, "deberta-v2": {"encoder", "deberta"}, "gpt_oss": {"causal", "sinks"}}


def visit_views(page, kinds, opened=("head",)):
    """Opens, one after the other from its button, each view the page offers a model of these `kinds` (the
    registry's rows for them) and not `opened` already, yielding each once it is drawn without an error; the views
    for other models are not offered. A click reruns the page in its session: on a 2-core machine 0.7-1.4 s a
    view, where a link per view (a new session, the page's scripts run again) took 2 s."""
    for view in registry.VIEWS:
        button = page.get_by_role("radio", name=view.label, exact=True)
        button = button.or_(page.get_by_role("button", name=view.label, exact=True))
        if not view.applies(kinds):
            assert button.count() == 0, f"{view.label} is offered for a model of {sorted(kinds)}"
        elif view.key not in opened:
            button.first.click()
            page.wait_for_function(
                "(key) => new URLSearchParams(location.search).get('view') === key", arg=view.key, timeout=60_000
            )
            wait_drawn(page)
            clean(page)
            yield view
