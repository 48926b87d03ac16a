"""The Global Q·K view's quick default and what a click opens: PCA is the default layout (and is PCA: the same
plane as a reference SVD), a few far points do not squeeze the cloud, and the head view a click opens outlines
the clicked token (also from a link's `mark`, and no longer once another sentence is run)."""

from __future__ import annotations

import numpy as np
from test_app import head_figure, no_errors, start, submit
from test_qk_global import asked, click, folder, synthetic_frame  # noqa: F401 (fixtures)

from attention.analysis.qk_project import project
from viz.global_qk import global_qk_figure, small_multiples

U32, U64 = 2.0**-24, 2.0**-53  # float32's and float64's unit roundoff


def test_the_default_layout_is_pca_and_the_compute_button_asks_for_it(asked):  # noqa: F811
    at = start(view="global", layer="4", head="3")  # a head no other test computes: nothing kept for it
    no_errors(at)
    assert at.radio(key="gqk_method").value == "pca" and at.radio(key="gqk_method").options[0] == "PCA"
    next(b for b in at.button if b.key == "gqk_compute").click().run()
    assert [key[4:] for key in asked] == [(2_000, "pca", "global")]  # tokens, method, time limit kind
    assert "layout" not in at.query_params  # the default is not written into the link


def test_pca_is_the_plane_of_a_reference_svd_up_to_sign():
    rng = np.random.default_rng(0)
    n, d = 2_000, 16
    basis = np.linalg.qr(rng.normal(size=(d, d)))[0][:, :2]  # two orthonormal directions
    latent = rng.normal(size=(n, 2)) * [8.0, 4.0]
    points = (latent @ basis.T + rng.normal(0, 0.05, (n, d)) + 3.0).astype(np.float32)  # off the origin
    got = project(points, "pca")
    centred = points.astype(np.float64) - points.astype(np.float64).mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)  # the reference: the points' own SVD
    reference = u[:, :2] * s[:2]
    assert (got[np.abs(got).argmax(0), [0, 1]] > 0).all()  # each sign fixed: the furthest point is positive
    got = got * np.sign((got * reference).sum(0))  # the reference's signs are LAPACK's
    # float64 arithmetic moves the Gram matrix by at most (n + d)·u·‖X‖_F²; a component then turns by at most that
    # over its eigenvalue's gap to the next (Davis–Kahan), a point by its length times the turn (the reference
    # SVD errs by no more); then the plane is rounded to float32, by at most u32 of each coordinate
    moved = (n + d) * U64 * (centred**2).sum()
    gap = min(s[0] ** 2 - s[1] ** 2, s[1] ** 2 - s[2] ** 2)
    turned = 4 * np.linalg.norm(centred, axis=1).max() * moved / gap
    np.testing.assert_allclose(got, reference, rtol=U32, atol=turned)


def test_a_planted_outlier_is_left_out_of_the_axes_range_and_counted():
    frame = synthetic_frame(1_000)
    plain = global_qk_figure(frame)
    assert plain.layout.xaxis.range is None and "outside" not in plain.layout.title.text  # a cloud alone: as it is
    frame.loc[3, "x"] = 1_000.0  # one query far to the right
    fig = global_qk_figure(frame)
    low, high = fig.layout.xaxis.range
    rest = frame["x"].drop(3)
    assert low <= rest.min() and rest.max() <= high < 10  # every other point in view, the outlier not
    assert "1 far point outside the view" in fig.layout.title.text
    assert sum(len(t.x) for t in fig.data) == 2_000  # still drawn, for a double-click to show
    frames = {h: synthetic_frame(500).assign(head=h) for h in range(2)}
    frames[1].loc[[0, 1], "y"] = -500.0
    multiples = small_multiples(frames)
    assert [a.text for a in multiples.layout.annotations] == ["L2 H0", "L2 H1 · 2 outside"]
    assert multiples.layout.yaxis.range is None and multiples.layout.yaxis2.range[0] > -10


def marked_rows(fig: dict) -> dict[str, tuple[float, float]]:
    """The outlined row (as y0, y1) and column (as x0, x1) of a head map, by the shape's name."""
    found = {}
    for shape in fig["layout"].get("shapes", []):
        found[shape["name"]] = (
            (shape["y0"], shape["y1"]) if shape["name"] == "marked query" else (shape["x0"], shape["x1"])
        )
    return found


def test_a_links_mark_outlines_that_token_in_the_head_map():
    at = start(view="head", layer="0", head="0", mark="3")  # the default sentence: [CLS] The animal didn …
    no_errors(at)
    assert marked_rows(head_figure(at)) == {"marked query": (2.5, 3.5), "marked key": (2.5, 3.5)}
    assert any("Outlined: didn (position 3)" in c.value for c in at.caption)
    at.checkbox(key="hide_special").check().run()  # [CLS] hidden: the same token is the third row
    assert marked_rows(head_figure(at)) == {"marked query": (1.5, 2.5), "marked key": (1.5, 2.5)}
    at = start(view="head", layer="0", head="0", mark="0", hide="1")
    hidden = [c.value for c in at.caption if "(position 0), " in c.value and "is hidden here" in c.value]
    assert not marked_rows(head_figure(at)) and hidden
    at = start(view="head", layer="0", head="0", mark="99")
    fig = head_figure(at)
    said = f"(position 99) is past this sentence's {len(fig['data'][0]['x'])} tokens"
    assert not marked_rows(fig) and any(said in c.value for c in at.caption)


def test_running_another_sentence_drops_the_mark():
    at = start(view="head", layer="0", head="0", mark="3")
    at = submit(at, "The cat sat on the mat.")
    no_errors(at)
    assert not marked_rows(head_figure(at)) and "mark" not in at.query_params


def test_a_click_in_the_global_view_outlines_the_clicked_token(folder):  # noqa: F811
    at = start(view="global", layer="1", head="4", corpus="folder", folder=str(folder))
    no_errors(at)
    at, (_, position, _, _) = click(at, "gqk_chart", trace=0, index=-1)  # the last text's last query
    no_errors(at)
    assert at.session_state.view == "Head" and position > 0
    fig = head_figure(at)
    edges = (position - 0.5, position + 0.5)
    assert marked_rows(fig) == {"marked query": edges, "marked key": edges}
    assert at.query_params["mark"] == str(position)
    assert any(f"(position {position})" in c.value for c in at.caption)
