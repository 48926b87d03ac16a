"""In Chromium: the two families added after the first eight whose figures differ from the others' (gpt-oss, its head
map with one more column, its sink's share; DeBERTa-v2, its own view of the three terms) opened in the app and drawn
in every view of the registry: the head map a stochastic matrix over its own tokens, and no view failing. The other
families (tests/helpers/families.py's MORE_CONFIGS) make the figures the first eight make: each one's head map and
every view are checked on the page in tests/app/test_app_families.py."""

from __future__ import annotations

import os
import urllib.parse

import numpy as np
import pytest
from browser import CHROMIUM, served_chromium
from families import make_more
from test_browser_families import HEAD_MAP, KINDS, SENTENCE, visit_views
from test_browser_state import SIZE, clean, wait_drawn

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def browser_page():
    with served_chromium() as (browser, url):
        page = browser.new_page(viewport=SIZE)
        page.app_url = url
        yield page


def open_app(page, **params) -> None:
    page.goto(page.app_url + "/?" + urllib.parse.urlencode(params))
    wait_drawn(page)
    clean(page)


@pytest.mark.parametrize("family", ["deberta-v2", "gpt_oss"])
def test_each_added_family_opens_in_every_view(browser_page, tmp_path, family):
    from attention import encode, load_model
    from attention.runs.run import run_sentence

    page = browser_page
    folder = make_more(tmp_path / family, family)
    model, tokenizer = load_model(folder)
    tokens = encode(tokenizer, SENTENCE).tokens
    open_app(page, model=str(folder), s=SENTENCE, view="head", layer="1", head="2")
    page.wait_for_function(f"() => ({HEAD_MAP})() !== null", timeout=60_000)
    z = np.array(page.evaluate(HEAD_MAP)["z"], dtype=float)
    sinks = model.layers[1].attention.sink is not None
    assert z.shape == (len(tokens), len(tokens) + sinks)
    np.testing.assert_allclose(z.sum(1), 1, atol=1e-4)
    if sinks:  # gpt-oss: one more column, each row's share that went to its sink and to no token
        maps = run_sentence(model, tokenizer, SENTENCE).attentions[1, 2]  # (L, L)
        np.testing.assert_allclose(z[:, :-1], maps, atol=1e-4)
        assert z[:, -1].min() > 1e-3
        z = z[:, :-1]
    assert np.all(np.triu(z, 1) == 0) if model.config.attention.causal else np.triu(z, 1).sum() > 0.1
    for view in visit_views(page, KINDS[family]):
        if view.key != "global":  # the global view computes when asked (its button), the others draw at once
            # the script has ended; a busy browser may still be drawing the chart it sent (a timeout fails the test)
            page.wait_for_selector(".js-plotly-plot", timeout=60_000)
