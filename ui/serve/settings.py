"""The server's caps, which an operator may set in the environment before `streamlit run`:

    ATTENTION_HEAVY_SLOTS=1              heavy computations at once in the whole server (1 to 64)
    ATTENTION_HEAVY_WAIT_S=120           seconds a session waits for a heavy slot before it is told to try again
    ATTENTION_TIME_LIMIT_FLOW=60         seconds one attention flow may take
    ATTENTION_TIME_LIMIT_SUITE=120       seconds one coreference suite's scoring may take
    ATTENTION_TIME_LIMIT_COMPARISON=60   seconds the head comparison may take
    ATTENTION_TIME_LIMIT_ABLATION=60     seconds one ablation may take
    ATTENTION_TIME_LIMIT_GQA=120         seconds one grouped-query conversion and run may take
    ATTENTION_TIME_LIMIT_GLOBAL=180      seconds the global Q·K view's points of a corpus may take
    ATTENTION_TIME_LIMIT_LONG=300        seconds one long text's run may take (its forward pass and every thumbnail)
    ATTENTION_LONG_MAX_TOKENS=8192       the most tokens a long text may have (its maps made a tile at a time)
    ATTENTION_LONG_MAX_MB=512            the most a long text's run may keep (each layer's queries and keys), in MB
    ATTENTION_MAX_UPLOAD_MB=2            the largest coreference suite file taken, in MB
    ATTENTION_MAX_EXAMPLES=5000          the most examples an uploaded suite may have
    ATTENTION_DEVICE=auto                where the model runs: auto (a CUDA GPU when there is one, else the CPU),
                                         cpu, cuda, cuda:N
    ATTENTION_DTYPE=auto                 the weights' dtype: auto (bfloat16 on a GPU, float32 on the CPU), float32,
                                         bfloat16 or float16; the attention maps are float32 whatever it is

They are read once, when the server first imports this module. A value that is not a number in
its range (for the device and dtype, not one of the words taken) is not used: the default stands
and the server log says which variable was ignored and why (the page never shows it). A CUDA GPU
is used when torch finds one (ATTENTION_DEVICE=cpu keeps the model off it); a GPU asked for by name
that the machine lacks is said on the page, in one sentence, where the model would be.
`python -m ui.serve.settings` prints the settings the environment gives and exits with status 1 if any value would be
ignored: a check to run before starting a server.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("attention-app")

HEAVY_KINDS = ("flow", "suite", "comparison", "ablation", "gqa", "global", "long")


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
            return default, (
                f"{self.var}={raw!r} ignored: {self.means} must be {kind} from {self.low:g} to "
                f"{self.high:g}; using the default {default:g}"
            )
        return value, None

    def show(self, value) -> str:
        return f"{value:g}"


@dataclass(frozen=True)
class Choice:
    """A setting that is one of a few words (case and surrounding spaces do not matter)."""

    var: str
    default: str
    choices: tuple[str, ...]  # the words taken, as they are used
    means: str
    aliases: tuple[tuple[str, str], ...] = ()  # other spellings taken: (spelling, the word it stands for)
    pattern: str | None = None  # a regular expression of more values taken as they are (e.g. cuda:N)
    described: str | None = None  # the values taken, in words, when there is a pattern

    def read(self, env: Mapping[str, str]) -> tuple[str, str | None]:
        """The value the environment gives (or the default) and, if it gave a bad one, why it was ignored."""
        raw = env.get(self.var)
        if raw is None or not raw.strip():
            return self.default, None
        word = raw.strip().lower()
        word = dict(self.aliases).get(word, word)
        if word in self.choices or (self.pattern is not None and re.fullmatch(self.pattern, word)):
            return word, None
        taken = self.described or ", ".join(self.choices)
        return self.default, (
            f"{self.var}={raw!r} ignored: {self.means} must be one of {taken}; using the default {self.default}"
        )

    def show(self, value) -> str:
        return str(value)


SETTINGS: dict[str, Setting | Choice] = {
    "heavy_slots": Setting("ATTENTION_HEAVY_SLOTS", 1, 1, 64, True, "the number of heavy slots"),
    "heavy_wait_s": Setting("ATTENTION_HEAVY_WAIT_S", 120, 1, 3600, False, "the wait for a heavy slot (s)"),
    **{
        f"limit_{kind}": Setting(
            f"ATTENTION_TIME_LIMIT_{kind.upper()}", default, 1, 3600, False, f"the time limit of {kind} (s)"
        )
        for kind, default in zip(HEAVY_KINDS, (60, 120, 60, 60, 120, 180, 300))
    },
    "max_upload_mb": Setting("ATTENTION_MAX_UPLOAD_MB", 2, 1, 200, False, "the largest upload (MB)"),
    "max_examples": Setting("ATTENTION_MAX_EXAMPLES", 5000, 1, 1_000_000, True, "a suite's size"),
    "long_max_tokens": Setting("ATTENTION_LONG_MAX_TOKENS", 8192, 1, 1_000_000, True, "a long text's tokens"),
    "long_max_mb": Setting("ATTENTION_LONG_MAX_MB", 512, 16, 1_000_000, False, "what a long run keeps (MB)"),
    # where and in what precision the model runs: a GPU only when the operator asks for one
    "device": Choice(
        "ATTENTION_DEVICE",
        "auto",
        ("cpu", "auto", "cuda"),
        "the device",
        pattern=r"cuda:\d+",
        described="cpu, auto, cuda or cuda:N",
    ),
    "dtype": Choice(
        "ATTENTION_DTYPE",
        "auto",
        ("auto", "float32", "bfloat16", "float16"),
        "the weights' dtype",
        aliases=(("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16"), ("half", "float16")),
    ),
}


def read(env: Mapping[str, str] | None = None) -> tuple[dict[str, float | str], list[str]]:
    """Every setting's value from `env` (the process's environment by default), and the warnings for
    the values ignored."""
    env = os.environ if env is None else env
    values: dict[str, float | str] = {}
    warnings: list[str] = []
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
HEAVY_WAIT_S = float(VALUES["heavy_wait_s"])
TIME_LIMITS = {kind: float(VALUES[f"limit_{kind}"]) for kind in HEAVY_KINDS}  # seconds per kind
MAX_UPLOAD_BYTES = int(float(VALUES["max_upload_mb"]) * 1024 * 1024)
MAX_EXAMPLES = int(VALUES["max_examples"])
LONG_MAX_TOKENS = int(VALUES["long_max_tokens"])
LONG_MAX_BYTES = int(float(VALUES["long_max_mb"]) * 1024 * 1024)
DEVICE = str(VALUES["device"])  # passed to attention.load_model: "cpu", "auto", "cuda" or "cuda:N"
DTYPE = str(VALUES["dtype"])  # "auto" (bfloat16 on a GPU, float32 on the CPU), "float32", "bfloat16" or "float16"


def main() -> int:
    for name, setting in SETTINGS.items():
        ignored = any(w.startswith(setting.var + "=") for w in WARNINGS)
        taken = setting.var in os.environ and os.environ[setting.var].strip() and not ignored
        shown = setting.show(VALUES[name]) + ("" if taken else " (default)")
        shown += " (the value given is ignored)" if ignored else ""
        print(f"{setting.var}={shown}")
    return 1 if WARNINGS else 0  # the ignored values were logged to stderr on import


if __name__ == "__main__":
    sys.exit(main())
