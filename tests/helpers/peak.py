"""The memory a piece of work takes, measured in a process of its own: `peak_bytes(setup, work)` runs `setup`
(imports, a model loaded and warmed), then `work`, and gives how far the process's resident set rose above what
it was before `work`, at its peak (torch's allocations included, which tracemalloc does not see). The kernel's
high-water mark (VmHWM) is reset first (/proc/self/clear_refs), so the setup's own peak hides nothing; where it
cannot be, getrusage's ru_maxrss stands in, an upper bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER = """
import gc, json, resource
def status(field):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(field + ":"))
{setup}
result = {{}}
gc.collect()
try:
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the high-water mark back to the resident set now
except OSError:
    pass
before = status("VmRSS")
{work}
highest = min(status("VmHWM"), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
result["peak"] = highest - before
print("PEAK " + json.dumps(result))
"""


def peak_bytes(setup: str, work: str, timeout: float = 600) -> dict:
    """`work`'s rise of the peak resident set, in bytes (`peak`), with whatever `work` put in the dict `result`
    (JSON values). Both are Python source, run in a fresh interpreter from the repository's root."""
    code = RUNNER.format(setup=textwrap.dedent(setup), work=textwrap.dedent(work))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "helpers")])}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PEAK ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("PEAK "))
