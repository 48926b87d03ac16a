"""Make user text safe to show in plotly labels and hover text, and a tokenizer's pieces readable."""

import html
import re
from collections.abc import Iterable, Sequence

POSITION_MARK = "·"  # joins a token and its position: "it·10"
# characters a label cannot show, as signs that can be seen
VISIBLE = {"\n": "↵", "\r": "↵", "\t": "⇥"}
SPACE_MARKS = ("Ġ", "▁")  # a piece that starts a word: byte-level BPE's, SentencePiece's
BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback
SHOWN_BYTES = re.compile(r"<0x[0-9A-F]{2}(?: 0x[0-9A-F]{2})*>")  # what ``bytes_shown`` writes for them
HALF = re.compile("[\udc80-\udcff]+")  # bytes that are no UTF-8, as Python's surrogateescape decodes them


def _byte_chars() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2's bytes_to_unicode), read backwards: each character → the byte it stands
    for. Printable bytes stand for themselves; the rest (spaces, controls, 127–160, 173) are shifted to U+0100 on."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return {chr(b): b for b in kept} | {chr(256 + n): b for n, b in enumerate(shifted)}


BYTE_CHARS = _byte_chars()


def readable(token: str, byte_level: bool = False) -> str:
    """A piece as the text it stands for: byte-level BPE's "Ġthe" as " the" and "Ã¼" as "ü", SentencePiece's
    "▁the" as " the" and "<0x0A>" as a new line, a newline or tab as a visible sign (↵, ⇥). A piece that is not
    whole UTF-8 (half a character: byte-level BPE can cut one across pieces) shows the bytes it lacks text for,
    "ĠðŁ" as " <0xF0 0x9F>", where the tokenizer is known to be byte-level (`byte_level`); else it keeps its
    letters, its "Ġ" shown as a space (a WordPiece piece "é" is its own text, not the byte 0xE9). The raw piece
    is for hovers."""
    text = str(token).replace("</w>", "")
    byte_piece = BYTE_PIECE.fullmatch(text)
    if byte_piece and int(byte_piece.group(1), 16) < 0x80:
        text = chr(int(byte_piece.group(1), 16))
    elif all(c in BYTE_CHARS for c in text):
        raw = bytes(BYTE_CHARS[c] for c in text)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            if byte_level:
                text = bytes_shown(raw)
    for mark in SPACE_MARKS:
        text = text.replace(mark, " ")
    return "".join(VISIBLE.get(c, c) for c in text)


def bytes_shown(raw: bytes) -> str:
    """Bytes as text, each run of bytes that is not whole UTF-8 as its values: b" \\xf0\\x9f" as " <0xF0 0x9F>"."""
    text = raw.decode("utf-8", errors="surrogateescape")  # a byte that is no character: U+DC80 + the byte
    return HALF.sub(lambda run: "<" + " ".join(f"0x{ord(c) - 0xDC00:02X}" for c in run.group()) + ">", text)


def spaces_marked(text: str) -> str:
    """A piece's spaces as "␣" (a leading space is part of the token), those between bytes shown aside."""
    kept, last = [], 0
    for group in SHOWN_BYTES.finditer(text):
        kept += [text[last : group.start()].replace(" ", "␣"), group.group()]
        last = group.end()
    return "".join(kept) + text[last:].replace(" ", "␣")


def numbered(position: int, token: str, byte_level: bool = False) -> str:
    """A position and its piece as a select box offers it: "3: the", half a character of a `byte_level`
    tokenizer's as its bytes ("3: <0xF0 0x9F>"), as every figure labels it."""
    return f"{position}: {readable(token, byte_level).strip() or readable(token, byte_level)}"


def readable_all(tokens: Iterable[str], byte_level: bool = False) -> list[str]:
    """Every piece of ``tokens`` as ``readable`` shows it."""
    return [readable(t, byte_level) for t in tokens]


def shown_escaped(escaped: Iterable[str], byte_level: bool = False) -> list[str]:
    """Escaped pieces (an axis's) as ``readable`` shows them, escaped again: half a character of a `byte_level`
    tokenizer's as its bytes, " <0xF0 0x9F>", whose brackets plotly must not read as a tag."""
    return escape_all(readable(html.unescape(t), byte_level) for t in escaped)


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
