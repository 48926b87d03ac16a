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


def readme_command(section: str) -> str:
    """The first command in the README's section titled `section` (its ```bash block)."""
    text = (ROOT / "README.md").read_text()
    after = text.split(f"\n## {section}\n", 1)[1]
    return after.split("```bash\n", 1)[1].split("\n```", 1)[0].strip()


def test_ci_runs_the_readmes_test_command_and_both_commands_make_a_virtual_environment():
    test = readme_command("Run the tests")
    ci = (ROOT / ".ci" / "run").read_text()
    assert any(line.startswith(test) for line in ci.splitlines()), test
    for command in (test, readme_command("Run the app")):
        assert command.startswith("python3.11 -m venv .venv && . .venv/bin/activate && pip install -r requirements")
    assert "python .ci/check_pins.py" in test


def test_the_everyday_selection_uses_registered_markers():
    quick = (ROOT / "README.md").read_text().split("Every day,", 1)[1].split("```bash\n", 1)[1].split("\n```")[0]
    assert quick == 'python -m pytest -m "not slow and not browser"'
    ini = (ROOT / "pytest.ini").read_text()
    assert "--strict-markers" in ini and "\n    browser:" in ini and "\n    slow:" in ini
