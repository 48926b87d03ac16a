"""Make user text safe to show in plotly labels and hover text, and a tokenizer's pieces readable."""

import html
import re
from collections.abc import Iterable, Sequence

POSITION_MARK = "·"  # joins a token and its position: "it·10"
# characters a label cannot show, as signs that can be seen
VISIBLE = {"\n": "↵", "\r": "↵", "\t": "⇥"}
SPACE_MARKS = ("Ġ", "▁")  # a piece that starts a word: byte-level BPE's, SentencePiece's
BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback


def _byte_chars() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2's bytes_to_unicode), read backwards: each character → the byte it stands
    for. Printable bytes stand for themselves; the rest (spaces, controls, 127–160, 173) are shifted to U+0100 on."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + n): b for n, b in enumerate(shifted)}


BYTE_CHARS = _byte_chars()


def readable(token: str) -> str:
    """A piece as the text it stands for: byte-level BPE's "Ġthe" as " the" and "Ã¼" as "ü", SentencePiece's
    "▁the" as " the" and "<0x0A>" as a new line, a newline or tab as a visible sign (↵, ⇥). A byte-level piece
    that is not whole UTF-8 (half a character) keeps its letters, its "Ġ" shown as a space; WordPiece's pieces
    are their own text. The raw piece is for hovers."""
    text = str(token).replace("</w>", "")
    byte_piece = BYTE_PIECE.fullmatch(text)
    if byte_piece and int(byte_piece.group(1), 16) < 0x80:
        text = chr(int(byte_piece.group(1), 16))
    elif all(c in BYTE_CHARS for c in text):
        try:
            text = bytes(BYTE_CHARS[c] for c in text).decode("utf-8")
        except UnicodeDecodeError:
            pass
    for mark in SPACE_MARKS:
        text = text.replace(mark, " ")
    return "".join(VISIBLE.get(c, c) for c in text)


def numbered(position: int, token: str) -> str:
    """A position and its piece as a select box offers it: "3: the"."""
    return f"{position}: {readable(token)}"


def readable_all(tokens: Iterable[str]) -> list[str]:
    """Every piece of ``tokens`` as ``readable`` shows it."""
    return [readable(t) for t in tokens]


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so plotly shows tags as typed, not rendered."""
    return html.escape(str(text), quote=False)


def escape_all(texts: Iterable[str]) -> list[str]:
    """Escape every string of ``texts``."""
    return [escape(t) for t in texts]


def position_labels(escaped_tokens: Sequence[str]) -> list[str]:
    """One unique label per position, "token·i", for categorical axes.

    Repeated tokens get distinct labels, so each keeps its own row or
    column, and hover text built from the label names both the token and
    where it is. The position follows the last mark, so the labels are
    unique even when a token contains the mark itself.
    """
    return [f"{token}{POSITION_MARK}{i}" for i, token in enumerate(escaped_tokens)]


def head_label(layer: int, head: int) -> str:
    """How every figure names one head: "L3 H1"."""
    return f"L{layer} H{head}"
