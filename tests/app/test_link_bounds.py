"""A link's values at each end of their ranges (ui/state/url_values.py's bounds) are kept as they are, with no notice;
one step past an end is clamped to it with a notice, or refused by the value's reader. Every Param with bounds is
covered (a new one joins by being in ui/state.PARAMS), each reader that bounds what it reads, a list of the most
items and a sentence of the most characters; then a whole link at the low ends and one at the high ends, opened
on the page (AppTest)."""

from __future__ import annotations

import pytest
from test_app import no_errors, start

from ui.state import url_values as uv
from ui.state.state import PARAMS, capped

BOUNDED = [p for p in PARAMS if p.bounds is not None]
STEP = 0.01  # a link's decimals have up to 3 places; its numbers are whole


def ends(p) -> tuple:
    """(low, high) in the Param's own type: what its reader gives for them."""
    kind = type(p.read(p.write(p.bounds[0])))  # as its reader gives it (the flow's stage: a count; t: a decimal)
    return kind(p.bounds[0]), kind(p.bounds[1])


def test_every_value_that_sizes_writing_is_bounded():
    """What the rest covers: the writing settings, the bars' temperature, the shape flow's stage, the head
    view's marked token and the lens's every k-th layer have bounds."""
    assert {p.name for p in BOUNDED} == {"n", "temp", "topk", "topp", "seed", "t", "stage", "mark", "every"}


@pytest.mark.parametrize("p", BOUNDED, ids=[p.name for p in BOUNDED])
def test_a_value_at_either_end_is_kept_without_a_notice(p):
    for end in ends(p):
        notices: list[str] = []
        text = p.write(end)  # as the page writes it into a link
        value = capped(p, p.read(text), notices)
        assert (value, type(value), notices) == (end, type(end), []), (p.name, text)


@pytest.mark.parametrize("p", BOUNDED, ids=[p.name for p in BOUNDED])
def test_one_step_past_an_end_is_clamped_with_a_notice_or_refused(p):
    low, high = ends(p)
    step = 1 if isinstance(low, int) else STEP
    for past, end in ((low - step, low), (high + step, high)):
        text = p.write(past)
        try:
            read = p.read(text)
        except ValueError:  # the reader refuses it (a sign, more digits than it takes): init_from_url says so
            continue
        notices: list[str] = []
        assert capped(p, read, notices) == end, (p.name, text)
        assert len(notices) == 1 and f"The link's {p.name} is {text}, outside" in notices[0], notices


@pytest.mark.parametrize(
    ("reader", "at_end", "past_end"),
    [
        (uv._number, str(10**uv.MAX_DIGITS - 1), str(10**uv.MAX_DIGITS)),
        (uv._tokens, str(uv.GQK_MIN_TOKENS), str(uv.GQK_MIN_TOKENS - uv.GQK_TOKEN_STEP)),
        (uv._tokens, str(uv.GQK_MAX_TOKENS), str(uv.GQK_MAX_TOKENS + uv.GQK_TOKEN_STEP)),
        (uv._numbers, ",".join(["1"] * (uv.MAX_LIST_CHARS // 2)), ",".join(["1"] * (uv.MAX_LIST_CHARS // 2 + 1))),
        (uv._text, "x" * uv.MAX_SHORT_TEXT, "x" * (uv.MAX_SHORT_TEXT + 1)),
        (uv._path, "/" * uv.MAX_PATH, "/" * (uv.MAX_PATH + 1)),
        (uv._target, "x" * uv.MAX_TARGET_CHARS, "x" * (uv.MAX_TARGET_CHARS + 1)),
        (uv._picks, f"{uv.MAX_NEW_TOKENS - 1}.{uv.MAX_TOKEN_ID}", f"{uv.MAX_NEW_TOKENS}.0"),
        (uv._picks, f"0.{uv.MAX_TOKEN_ID}", f"0.{uv.MAX_TOKEN_ID + 1}"),
    ],
    ids=["number", "tokens-low", "tokens-high", "list-chars", "text", "path", "target", "pick-number", "pick-id"],
)
def test_a_reader_takes_its_last_value_and_refuses_the_next(reader, at_end, past_end):
    reader(at_end)
    with pytest.raises(ValueError):
        reader(past_end)


def test_a_list_of_the_most_items_is_kept_whole():
    heads = next(p for p in PARAMS if p.name == "heads")
    for n, said in ((uv.MAX_LIST_ITEMS, 0), (uv.MAX_LIST_ITEMS + 1, 1)):
        notices: list[str] = []
        items = heads.read(heads.write(list(range(n))))
        assert capped(heads, items, notices) == list(range(min(n, uv.MAX_LIST_ITEMS))) and len(notices) == said


def link(end: int) -> dict[str, str]:
    """Every bounded Param at its low (0) or high (1) end, as the page writes them, and a corpus of the fewest
    or most tokens; the sentence and a corpus run's folder at their most characters on the high end."""
    values = {p.name: p.write(ends(p)[end]) for p in BOUNDED}
    values["tokens"] = str((uv.GQK_MIN_TOKENS, uv.GQK_MAX_TOKENS)[end])
    if end:
        values["s"] = ("The cat sat on the mat. " * uv.MAX_URL_TEXT)[: uv.MAX_URL_TEXT]
        values["run"] = ("/srv/corpus-runs/" + "run" * uv.MAX_PATH)[: uv.MAX_PATH]  # Head stats' run folder
    return values


@pytest.mark.parametrize("end", [0, 1], ids=["low", "high"])
def test_a_link_at_every_end_opens_as_it_says_without_a_notice(end):
    values = link(end)
    at = start(layer="0", head="0", **values)
    no_errors(at)
    assert not [i.value for i in at.info], [i.value for i in at.info]
    for p in BOUNDED:
        assert at.session_state[p.key] == ends(p)[end], p.name
    assert at.session_state["gqk_tokens"] == int(values["tokens"])
    if end:  # the sentence of the most characters a link carries: read, not replaced by the default
        assert at.session_state["text"] == values["s"] and len(values["s"]) == uv.MAX_URL_TEXT
        assert at.session_state["stats_run"] == values["run"] and len(values["run"]) == uv.MAX_PATH
