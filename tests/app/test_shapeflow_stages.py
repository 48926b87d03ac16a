"""The shape flow's stages in presentation mode: it opens on the first, the buttons (keys ← / →) stop at the
ends, a step shows that stage's tensor, and the stage is kept in the link."""

from __future__ import annotations

import re

from test_app import SENTENCE, no_errors, start

from ui.views.shapeflow import MAP_STEPS


def stage_shown(at) -> tuple[int, int]:
    [where] = [m.value for m in at.markdown if re.fullmatch(r"\*\*Stage \d+ of \d+\*\*", m.value)]
    now, total = re.findall(r"\d+", where)
    return int(now), int(total)


def test_the_presentation_opens_on_the_first_stage_and_steps_without_wrapping():
    at = start(present="1", view="shapeflow", s=SENTENCE)
    no_errors(at)
    now, total = stage_shown(at)
    assert now == 1 and total >= 2
    back, ahead = at.button(key="shapeflow_prev_stage"), at.button(key="shapeflow_next_stage")
    assert back.disabled and not ahead.disabled  # ← stops at the first stage: no wrap to the last
    for expected in range(2, total + 1):
        at.button(key="shapeflow_next_stage").click().run()
        no_errors(at)
        assert stage_shown(at) == (expected, total)
        assert at.query_params["stage"] == str(expected)  # the link keeps it
    assert at.button(key="shapeflow_next_stage").disabled  # → stops at the last
    at.button(key="shapeflow_prev_stage").click().run()
    assert stage_shown(at) == (total - 1, total)


def test_each_stage_shows_a_tensor_of_its_own_boxes():
    at = start(present="1", view="shapeflow", s=SENTENCE)
    seen, total = [], stage_shown(at)[1]
    for k in range(total):
        step = at.session_state.shapeflow_step
        seen.append(step)
        charts = [e.proto.id for e in at.get("plotly_chart")]
        if step not in MAP_STEPS:  # the step's own tensor is drawn beside the diagram
            assert any(f"tensor-{step}" in c for c in charts), (step, charts)
        if k < total - 1:
            at.button(key="shapeflow_next_stage").click().run()
    assert len(set(seen)) == len(seen)  # each stage its own step: not the softmax kept throughout


def test_a_link_opens_its_stage_and_a_stage_past_the_last_is_bounded():
    at = start(present="1", view="shapeflow", s=SENTENCE, stage="2")
    no_errors(at)
    assert stage_shown(at)[0] == 2
    far = start(present="1", view="shapeflow", s=SENTENCE, stage="40")
    no_errors(far)
    assert "stage is 40, outside 1–32; using 32" in " ".join(i.value for i in far.info)
    now, total = stage_shown(far)
    assert now == total and far.query_params["stage"] == str(total)  # then to the diagram's last


def test_a_link_with_a_step_and_no_stage_opens_that_steps_stage():
    at = start(present="1", view="shapeflow", s=SENTENCE, step="heads")
    no_errors(at)
    assert at.session_state.shapeflow_step == "heads" and stage_shown(at)[0] > 1
    assert at.query_params["stage"] == str(stage_shown(at)[0])
