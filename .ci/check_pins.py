"""Exits 1 unless the environment holds exactly the packages of constraints.txt, each at its pinned version.

Run after `pip install -r requirements-dev.txt` in a new virtual environment, as the README's test command does:
a package missing, at another version, or installed without a pin is named, one line each. pip itself and this
project (installed editable) are not pinned.
"""

from __future__ import annotations

import sys
from importlib.metadata import distributions
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
UNPINNED = {"pip", "attention-visualizer"}


def pinned(text: str) -> dict[str, str]:
    """constraints.txt's `name==version` lines by canonical name (comments and blank lines skipped)."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                raise SystemExit(f"constraints.txt: not name==version: {line!r}")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in distributions()}


def differences(pins: dict[str, str], have: dict[str, str]) -> list[str]:
    out = []
    for name in sorted(pins.keys() | have.keys() - UNPINNED):
        want, got = pins.get(name), have.get(name)
        if want is None:
            out.append(f"{name}=={got} is installed but not pinned")
        elif got is None:
            out.append(f"{name}=={want} is pinned but not installed")
        elif got != want:
            out.append(f"{name}: installed {got}, pinned {want}")
    return out


def main() -> int:
    pins = pinned((ROOT / "constraints.txt").read_text())
    wrong = differences(pins, installed())
    for line in wrong:
        print(line)
    print(f"{len(pins)} pins: {'all installed as pinned' if not wrong else f'{len(wrong)} differences'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
