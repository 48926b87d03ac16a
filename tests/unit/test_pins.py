"""constraints.txt: the one set of versions both installs take, and CI's check that the environment is that set."""

from __future__ import annotations

import importlib.util
import tomllib

from conftest import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

spec = importlib.util.spec_from_file_location("check_pins", ROOT / ".ci" / "check_pins.py")
check_pins = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_pins)

PINS = check_pins.pinned((ROOT / "constraints.txt").read_text())


def test_a_missing_a_moved_and_an_unpinned_package_are_each_named():
    pins = {"numpy": "2.4.6", "plotly": "7.1.0", "orjson": "3.13.0"}
    have = {"numpy": "2.4.6", "plotly": "7.0.0", "moto": "5.2.1", "pip": "23.2.1", "attention-visualizer": "0.1.0"}
    assert check_pins.differences(pins, have) == [
        "moto==5.2.1 is installed but not pinned",
        "orjson==3.13.0 is pinned but not installed",
        "plotly: installed 7.0.0, pinned 7.1.0",
    ]
    assert check_pins.differences(pins, {**pins, "pip": "25.0"}) == []


def test_both_installs_read_the_constraints():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "-c constraints.txt" in lines
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text().splitlines()


def test_every_requirement_is_pinned_at_its_own_version():
    """pyproject.toml's and requirements-dev.txt's pins are the constraints' versions (a local build tag aside:
    torch==2.13.0 is 2.13.0+cpu), so that no install is refused as a conflict."""
    dev = [line for line in (ROOT / "requirements-dev.txt").read_text().splitlines() if "==" in line]
    named = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"] + dev
    for text in named:
        req = Requirement(text)
        assert PINS[canonicalize_name(req.name)] in req.specifier, text


def test_the_dev_install_keeps_the_dateutil_the_app_gets_and_orjson_is_pinned():
    """bertviz's botocore takes python-dateutil below 3; the app alone would take 4.x without this pin."""
    assert PINS["python-dateutil"].startswith("2.")
    assert "orjson" in PINS
