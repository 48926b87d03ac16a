"""The server's caps, which an operator may set in the environment before `streamlit run`:

    ATTENTION_HEAVY_SLOTS=1              heavy computations at once in the whole server (1 to 64)
    ATTENTION_HEAVY_WAIT_S=120           seconds a session waits for a heavy slot before it is told to try again
    ATTENTION_TIME_LIMIT_FLOW=60         seconds one attention flow may take
    ATTENTION_TIME_LIMIT_SUITE=120       seconds one coreference suite's scoring may take
    ATTENTION_TIME_LIMIT_COMPARISON=60   seconds the head comparison may take
    ATTENTION_TIME_LIMIT_ABLATION=60     seconds one ablation may take
    ATTENTION_TIME_LIMIT_GQA=120         seconds one grouped-query conversion and run may take
    ATTENTION_MAX_UPLOAD_MB=2            the largest coreference suite file taken, in MB
    ATTENTION_MAX_EXAMPLES=5000          the most examples an uploaded suite may have

They are read once, when the server first imports this module. A value that is not a number in
its range is not used: the default stands and the server log says which variable was ignored and
why (the page never shows it). `python -m ui.settings` prints the settings the environment gives
and exits with status 1 if any value would be ignored: a check to run before starting a server.
"""
from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import Mapping

log = logging.getLogger("attention-app")

HEAVY_KINDS = ("flow", "suite", "comparison", "ablation", "gqa")


@dataclass(frozen=True)
class Setting:
    var: str
    default: float
    low: float
    high: float
    integer: bool
    means: str

    def read(self, env: Mapping[str, str]) -> tuple[float, str | None]:
        """The value the environment gives (or the default) and, if it gave a bad one, why it was ignored."""
        raw = env.get(self.var)
        default = int(self.default) if self.integer else float(self.default)
        if raw is None or not raw.strip():
            return default, None
        try:
            value = int(raw) if self.integer else float(raw)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or not self.low <= value <= self.high:
            kind = "a whole number" if self.integer else "a number"
            return default, (f"{self.var}={raw!r} ignored: {self.means} must be {kind} from {self.low:g} to "
                                  f"{self.high:g}; using the default {default:g}")
        return value, None


SETTINGS = {
    "heavy_slots": Setting("ATTENTION_HEAVY_SLOTS", 1, 1, 64, True, "the number of heavy slots"),
    "heavy_wait_s": Setting("ATTENTION_HEAVY_WAIT_S", 120, 1, 3600, False, "the wait for a heavy slot (s)"),
    **{f"limit_{kind}": Setting(f"ATTENTION_TIME_LIMIT_{kind.upper()}", default, 1, 3600, False,
                                f"the time limit of {kind} (s)")
       for kind, default in zip(HEAVY_KINDS, (60, 120, 60, 60, 120))},
    "max_upload_mb": Setting("ATTENTION_MAX_UPLOAD_MB", 2, 1, 200, False, "the largest upload (MB)"),
    "max_examples": Setting("ATTENTION_MAX_EXAMPLES", 5000, 1, 1_000_000, True, "a suite's size"),
}


def read(env: Mapping[str, str] | None = None) -> tuple[dict[str, float], list[str]]:
    """Every setting's value from `env` (the process's environment by default), and the warnings for
    the values ignored."""
    env = os.environ if env is None else env
    values, warnings = {}, []
    for name, setting in SETTINGS.items():
        values[name], warning = setting.read(env)
        if warning:
            warnings.append(warning)
    return values, warnings


VALUES, WARNINGS = read()
for _warning in WARNINGS:
    log.warning(_warning)

# what the rest of the app reads
HEAVY_SLOTS = int(VALUES["heavy_slots"])
HEAVY_WAIT_S = VALUES["heavy_wait_s"]
TIME_LIMITS = {kind: VALUES[f"limit_{kind}"] for kind in HEAVY_KINDS}  # seconds per kind
MAX_UPLOAD_BYTES = int(VALUES["max_upload_mb"] * 1024 * 1024)
MAX_EXAMPLES = int(VALUES["max_examples"])


def main() -> int:
    for name, setting in SETTINGS.items():
        ignored = any(w.startswith(setting.var + "=") for w in WARNINGS)
        taken = setting.var in os.environ and os.environ[setting.var].strip() and not ignored
        shown = f"{VALUES[name]:g}" + ("" if taken else " (default)")
        shown += " (the value given is ignored)" if ignored else ""
        print(f"{setting.var}={shown}")
    return 1 if WARNINGS else 0  # the ignored values were logged to stderr on import


if __name__ == "__main__":
    sys.exit(main())
