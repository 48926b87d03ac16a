"""Every family through every view of the app (AppTest): a tiny checkpoint of each opened by its link,
each view and coreference mode drawn with no error."""
from __future__ import annotations

import pytest

from families import DECODERS, FAMILIES, make_family
from test_app import SENTENCE, no_errors, start


@pytest.mark.parametrize("family", FAMILIES + DECODERS)
def test_every_view_draws_for_the_family(tmp_path, family):
    folder = make_family(tmp_path / family, family)
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2")
    no_errors(at)
    assert any(f"— {family}" in c.value for c in at.sidebar.caption)
    every_view_draws(at)


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
