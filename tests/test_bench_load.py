"""The load bench's rig: Linux's autogroup is off for its run where it may be, and back as it was after."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import load  # noqa: E402


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
    monkeypatch.setattr(load, "AUTOGROUP", setting)
    with pytest.raises(RuntimeError):
        with load.machine_wide_priorities() as line:
            assert setting.value == "0"
            raise RuntimeError("the bench could not run")
    assert setting.value == "1" and setting.writes == ["0", "1"]
    assert "turned off for this run" in line


@pytest.mark.parametrize("value, writable, says", [
    ("0", True, "is off"),
    (None, True, "no autogroup"),
    ("1", False, "may not turn it off"),
])
def test_autogroup_left_as_it_is_when_it_is_off_missing_or_not_ours_to_change(monkeypatch, value, writable, says):
    setting = Setting(value, writable)
    monkeypatch.setattr(load, "AUTOGROUP", setting)
    with load.machine_wide_priorities() as line:
        assert setting.value == value
    assert setting.value == value and setting.writes == []
    assert says in line
