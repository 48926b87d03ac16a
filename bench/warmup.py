"""The server's warm-up (ui/serve/preload.py) with and without its collector tuning, each in fresh processes.

    python bench/warmup.py [--repeats 5]

Prints, per run: the warm-up's wall and CPU seconds (imports, the bundled model, the default sentence's
run), its full collections, and how long one full collection takes after it (what every session waits
for whenever the collector makes one). "plain" leaves the collector alone (gc.disable and gc.freeze
made no-ops).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE_RUN = """
import gc, sys, time
if sys.argv[1] == "plain":
    gc.disable = gc.freeze = lambda: None
wall, cpu = time.perf_counter(), time.process_time()
from ui.serve import preload
preload.page_shown()  # its last imports (scipy) wait for a first page otherwise
preload.start_warm_up().join()
wall, cpu, full = time.perf_counter() - wall, time.process_time() - cpu, gc.get_stats()[2]["collections"]
start = time.perf_counter()
gc.collect()
print(f"{sys.argv[1]:6s} warm-up {wall:.2f} s wall, {cpu:.2f} s CPU, {full} full collections; "
      f"a full collection after it {time.perf_counter() - start:.3f} s ({len(gc.get_objects()):,} objects tracked)")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for _ in range(args.repeats):
        for mode in ("tuned", "plain"):
            run = subprocess.run(
                [sys.executable, "-c", ONE_RUN, mode], cwd=ROOT, env=env, capture_output=True, text=True, check=False
            )
            print(run.stdout.strip() or f"{mode}: failed\n{run.stderr[-2000:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
