"""Every family through every view of the app (AppTest): a tiny checkpoint of each opened by its link,
each view and coreference mode drawn with no error."""

from __future__ import annotations

import pytest
from families import DECODERS, FAMILIES, MORE_CONFIGS, make_family, make_more, make_seq2seq
from test_app import SENTENCE, figures, no_errors, start, titles


@pytest.mark.parametrize("family", FAMILIES + DECODERS)
def test_every_view_draws_for_the_family(tmp_path, family):
    folder = make_family(tmp_path / family, family)
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2")
    no_errors(at)
    assert any(f"— {family}" in c.value for c in at.sidebar.caption)
    every_view_draws(at)


@pytest.mark.parametrize("family", list(MORE_CONFIGS))
def test_every_view_draws_for_the_families_added_later(tmp_path, family):
    folder = make_more(tmp_path / family, family)
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2")
    no_errors(at)
    assert any(f"— {family}" in c.value for c in at.sidebar.caption)
    every_view_draws(at)


def test_the_deberta_terms_view_draws_three_terms_and_their_total_and_names_other_models(tmp_path):
    folder = make_more(tmp_path / "deberta-v2", "deberta-v2")
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2", view="disentangled")
    no_errors(at)
    words = [" ".join(titles(fig)) for fig in figures(at)]  # decoded: the JSON may write "→" as \u2192
    assert any("position → content" in text and "total score" in text for text in words)
    assert "DeBERTa terms" in at.segmented_control(key="view").options
    other = start(s=SENTENCE, view="disentangled")  # the bundled BERT: not offered, and the link's view says why
    no_errors(other)
    assert any("DeBERTa terms needs a DeBERTa-v2 or -v3 checkpoint" in info.value for info in other.info)
    assert other.session_state.view == "Head" and "DeBERTa terms" not in other.segmented_control(key="view").options


def test_an_encoder_decoder_loads_and_its_views_read_its_encoder(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    at = start(model=str(folder), s=SENTENCE)
    no_errors(at)
    assert any("— bart encoder-decoder, its encoder's" in c.value for c in at.sidebar.caption)
    assert at.get("plotly_chart")


def every_view_draws(at) -> None:
    """Each view in turn, and each coreference mode, draws a figure and shows no error."""
    for view in at.segmented_control(key="view").options:
        at.segmented_control(key="view").set_value(view).run()
        no_errors(at)
        assert at.get("plotly_chart"), view
        if view == "Coreference":
            for mode in at.segmented_control(key="coref_mode").options:
                at.segmented_control(key="coref_mode").set_value(mode).run()
                no_errors(at)
