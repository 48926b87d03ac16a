"""As a newcomer meets the project: the packages import from any folder after the README's set-up."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import distribution

from conftest import ROOT


def test_attention_and_viz_import_from_another_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run(
        [sys.executable, "-c", "import attention, viz; print(attention.__file__); print(viz.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    for line in run.stdout.split():
        assert os.path.samefile(os.path.commonpath([line, str(ROOT)]), ROOT)  # this checkout's packages


def test_the_readme_setup_installs_the_project_with_the_pinned_cpu_torch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["dependencies"]
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "-e ." in lines  # the README's `pip install -r requirements.txt` installs the project itself
    assert "pip install -r requirements.txt" in (ROOT / "README.md").read_text()
    assert distribution(project["name"]).version == project["version"]
