"""The benches build their checkpoints with tests/helpers on the path and no pytest (bench/overview.py, render.py,
load.py): every helper module must import that way, without conftest, which only pytest puts on the path."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

HELPERS = sorted(path.stem for path in (ROOT / "tests" / "helpers").glob("*.py"))


def test_every_helper_imports_as_a_bench_imports_it():
    assert {"families", "tiny"} <= set(HELPERS)
    code = (
        "import sys; "
        f"sys.path[1:1] = [{str(ROOT)!r}, {str(ROOT / 'tests' / 'helpers')!r}]; "
        + "; ".join(f"import {name}" for name in HELPERS)
        + "; import families; assert families.make_family"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
