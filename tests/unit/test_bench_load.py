"""The load bench's rig: Linux's autogroup off for its run where it may be, and back as it was after; the
laptops that stand for most of its room, and what they check."""

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import _rig
import _room


class Setting:
    """/proc/sys/kernel/sched_autogroup_enabled as the bench sees it: a value, and whether it may be written."""

    def __init__(self, value: str | None, writable: bool = True):
        self.value, self.writable, self.writes = value, writable, []

    def read_text(self) -> str:
        if self.value is None:
            raise FileNotFoundError("no such file")
        return self.value + "\n"

    def write_text(self, text: str) -> None:
        if not self.writable:
            raise PermissionError(13, "Permission denied")
        self.writes.append(text)
        self.value = text


def test_autogroup_is_off_inside_the_run_and_back_on_after_it_even_when_the_run_fails(monkeypatch):
    setting = Setting("1")
    monkeypatch.setattr(_rig, "AUTOGROUP", setting)
    with pytest.raises(RuntimeError), _rig.machine_wide_priorities() as line:
        assert setting.value == "0"
        raise RuntimeError("the bench could not run")
    assert setting.value == "1" and setting.writes == ["0", "1"]
    assert "turned off for this run" in line


@pytest.mark.parametrize(
    "value, writable, says",
    [
        ("0", True, "is off"),
        (None, True, "no autogroup"),
        ("1", False, "may not turn it off"),
    ],
)
def test_autogroup_left_as_it_is_when_it_is_off_missing_or_not_ours_to_change(monkeypatch, value, writable, says):
    setting = Setting(value, writable)
    monkeypatch.setattr(_rig, "AUTOGROUP", setting)
    with _rig.machine_wide_priorities() as line:
        assert setting.value == value
    assert setting.value == value and setting.writes == []
    assert says in line


def test_chart_words_are_the_traces_and_tick_labels_not_the_template():
    spec = {
        "data": [{"type": "heatmap", "x": ["[CLS]·0", "zebra·1"], "hovertemplate": "%{y} → %{x}"}],
        "layout": {
            "xaxis": {"ticktext": ["[CLS]", "otter"]},
            "template": {"layout": {"title": "gold"}},
            "title": {"text": "Layer 3, head 1"},
        },
    }
    words = _room.chart_words(spec)
    assert {"zebra", "otter", "[CLS]"} <= words
    assert "gold" not in words and "0" in words


@pytest.mark.slow  # the app in a subprocess
def test_a_laptop_submits_the_sentence_form_and_reads_its_heatmap_and_a_foreign_word():
    """The load bench's protocol client against the real app: it finds the sentence form, its press of
    Run brings a heatmap with its own marker, and its checks catch a marker that is not its own."""
    from browser import app_server

    async def visit(url: str) -> tuple:
        laptop = _room.Laptop(url)
        await laptop.open(120)
        try:
            opened = list(laptop.heatmap)
            shown = await laptop.submit("The zebra didn't cross the road.", "zebra", 60)
            return (
                opened,
                shown,
                list(laptop.heatmap),
                laptop.check("s", "zebra", {"otter"}),
                laptop.check("s", "otter", {"zebra"}),
                laptop.errors,
            )
        finally:
            await laptop.close()

    with app_server() as url:
        opened, shown, heatmap, clean, caught, errors = asyncio.run(visit(url))
    assert "animal" in opened and "zebra" not in opened  # the default sentence, then its own
    assert shown is not None and shown > 0 and "zebra" in heatmap
    assert clean == [] and errors == []
    assert len(caught) == 2 and "not on its heatmap" in caught[0] and caught[1].startswith("ISOLATION VIOLATED")
