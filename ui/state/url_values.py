"""What a link's values may be and how each is written in it: the bounds on every value that sizes work,
each kind of value's reader and writer, and `Param`, one choice of the page (ui/state/state.py's PARAMS lists them).
Pure: no session state here."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# ---- the bounds on what a link or a widget asks for: every value that sizes work meets one of these ----
# (the model's own sizes come after it is known: clamp_selection; a sentence is cut to the model's
# positions by attention.runs.inputs.encode, and an uploaded suite's lines by attention.analysis.coref.examples)
MAX_URL_TEXT = 20_000  # a sentence's characters: longer ones are not carried in (or restored from) the URL
MAX_TEXT_CHARS = 50_000  # the most of a sentence that runs: a longer one is cut on Run, with a notice
MAX_PASTE_CHARS = 1_000_000  # the most the sentence boxes take (a browser drops a longer paste; the server cuts)
MAX_LIST_ITEMS = 64  # the distinct items of a list in a link (heads, ablated heads, candidates): the first kept
MAX_LIST_CHARS = 4_000  # a list written longer than this in a link is not read at all
MAX_DIGITS = 4  # a number in a link (a layer, a head, a word's index): at most 9999
MAX_SHORT_TEXT = 200  # a field name, a group's value or a model source in a link
MAX_PATH = 500  # characters of a path on the server (the global Q·K view's corpus file or folder)
GQK_MIN_TOKENS, GQK_MAX_TOKENS, GQK_TOKEN_STEP = 2_000, 20_000, 1_000  # a corpus's tokens in the global Q·K view
MAX_TARGET_CHARS = 1_000  # an encoder-decoder's forced target (its decoder tokens are cut to its positions too)
MAX_NEW_TOKENS = 64  # the most tokens Continue writes
MAX_TOP_K = 1000  # top-k sampling's largest k
MAX_TOKEN_ID = 999_999  # a token id picked in a link (one past the model's vocabulary is said, not written)
MAX_SEED = 2**31 - 1
MAX_MARKED_TOKEN = 8_191  # a marked token's position in a link (past the sentence's last token nothing is marked)
MAX_FLOW_STAGES = 32  # the shape flow's stage in a link (a layer has about a dozen steps, a stage at least one)
TEMPERATURES = (0.05, 5.0)  # the lowest and highest temperature


# ---- how each kind of value is written in the URL ---------------------------------------------------


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError("not 0 or 1")
    return text == "1"


def _number(text: str) -> int:
    if not re.fullmatch(rf"\d{{1,{MAX_DIGITS}}}", text):
        if re.fullmatch(r"-\d+", text):
            raise ValueError("below 0")
        raise ValueError(f"over {10**MAX_DIGITS - 1:,}" if re.fullmatch(r"\d+", text) else "not a number")
    return int(text)


def _parts(text: str) -> list[str]:
    if len(text) > MAX_LIST_CHARS:
        raise ValueError(f"longer than {MAX_LIST_CHARS:,} characters")
    return text.split(",") if text else []


def distinct(items) -> list:
    """The items without repeats, in their first order: a list asks for each thing once."""
    return list(dict.fromkeys(items))


def _numbers(text: str) -> list[int]:
    """'3,1,3' -> [3, 1]: repeats dropped (the cap on how many is init_from_url's, with a notice)."""
    return distinct(_number(part) for part in _parts(text))


def _heads(text: str) -> list[tuple[int, int]]:
    """'3.1,4.2,3.1' -> [(3, 1), (4, 2)]: layer.head pairs, repeats dropped."""
    pairs = [part.split(".") for part in _parts(text)]
    if any(len(p) != 2 for p in pairs):
        raise ValueError("not layer.head pairs")
    return distinct((_number(layer), _number(head)) for layer, head in pairs)


def _span(text: str) -> tuple[int, int]:
    """'3-29' -> (3, 29): a range of layers, its first at most its last."""
    parts = text.split("-")
    if len(parts) != 2:
        raise ValueError("not first-last")
    first, last = _number(parts[0]), _number(parts[1])
    if first > last:
        raise ValueError("its first past its last")
    return first, last


def _name(text: str) -> str:
    if not re.fullmatch(r"[a-z_]{1,32}", text):
        raise ValueError("not a step name")
    return text


def _picks(text: str) -> list[tuple[int, int]]:
    """'3.1056,5.28' -> [(3, 1056), (5, 28)]: a written token's number (0: the first) and the id picked in its
    place, by number, one each (the last given); a number past MAX_NEW_TOKENS or an id over MAX_TOKEN_ID is refused
    (an id past the model's vocabulary is said when the text is written)."""
    pairs = [part.split(".") for part in _parts(text)]
    if any(len(p) != 2 or not all(re.fullmatch(r"\d{1,7}", x) for x in p) for p in pairs):
        raise ValueError("not number.token pairs")
    picked = {int(k): int(t) for k, t in pairs}
    if any(k >= MAX_NEW_TOKENS or t > MAX_TOKEN_ID for k, t in picked.items()):
        raise ValueError(f"past {MAX_NEW_TOKENS} tokens or over id {MAX_TOKEN_ID:,}")
    return sorted(picked.items())


def _decimal(text: str) -> float:
    """A decimal number such as 0.7 or 2 (no sign, no exponent, at most 8 characters)."""
    if not re.fullmatch(r"\d{1,4}(\.\d{1,3})?", text):
        raise ValueError("not a decimal number")
    return float(text)


def _whole(text: str) -> int:
    """A seed: an integer of at most 10 digits."""
    if not re.fullmatch(r"\d{1,10}", text):
        raise ValueError("not a whole number")
    return int(text)


def _text(text: str) -> str:
    """A field name, a group's value or a model source: printable, at most MAX_SHORT_TEXT characters."""
    if len(text) > MAX_SHORT_TEXT or not text.isprintable():
        raise ValueError("not a short printable text")
    return text


def _path(text: str) -> str:
    """A path on the server: printable, at most MAX_PATH characters (the view reads it only where allowed)."""
    if len(text) > MAX_PATH or not text.isprintable():
        raise ValueError(f"not a printable path of at most {MAX_PATH} characters")
    return text


def _tokens(text: str) -> int:
    """A corpus's tokens: a multiple of GQK_TOKEN_STEP from GQK_MIN_TOKENS to GQK_MAX_TOKENS."""
    value = int(text) if re.fullmatch(r"\d{1,6}", text) else -1
    if not GQK_MIN_TOKENS <= value <= GQK_MAX_TOKENS or value % GQK_TOKEN_STEP:
        raise ValueError(f"not a multiple of {GQK_TOKEN_STEP:,} from {GQK_MIN_TOKENS:,} to {GQK_MAX_TOKENS:,}")
    return value


def _target(text: str) -> str:
    if len(text) > MAX_TARGET_CHARS:
        raise ValueError(f"longer than {MAX_TARGET_CHARS:,} characters")
    return text


def _choice(options: dict[str, str]) -> tuple[Callable[[Any], str], Callable[[str], Any]]:
    """URL word <-> the label a widget shows."""
    words = {label: word for word, label in options.items()}

    def read(text: str) -> str:
        if text not in options:
            raise ValueError("not one of " + ", ".join(options))
        return options[text]

    return words.__getitem__, read


def _words(options: dict[str, str]) -> tuple[Callable[[Any], str], Callable[[str], Any]]:
    """A widget that keeps the URL's word itself (and shows `options`' label for it)."""
    return _choice({word: word for word in options})


@dataclass(frozen=True)
class Param:
    key: str  # session-state key, the widget's key
    name: str  # in the URL
    label: str  # for notices and the report
    default: Any  # not written to the URL (unless `always`); None: no default
    write: Callable[[Any], str]
    read: Callable[[str], Any]  # raises ValueError for a value it cannot take
    always: bool = False  # written even at its default (which views read it: ui/page/registry.py)
    bounds: tuple[float, float] | None = None  # a number from the link outside them is clamped, with a notice


def _param(key, name, label, default, codec, always=False, bounds=None) -> Param:
    write, read = codec if isinstance(codec, tuple) else (str, codec)
    return Param(key, name, label, default, write, read, always, bounds)


def _short(value: float) -> str:
    """0.7 -> "0.7", 2.0 -> "2": a decimal as a link writes it."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


_FLAG = (lambda v: "1" if v else "0", _flag)
_LIST = (lambda v: ",".join(map(str, v)), _numbers)
_PAIRS = (lambda v: ",".join(f"{layer}.{head}" for layer, head in v), _heads)
_PICKS = (lambda v: ",".join(f"{k}.{t}" for k, t in v), _picks)
_SPAN = (lambda v: f"{v[0]}-{v[1]}", _span)
