"""Text from a chat or a chat file shown as written: a terminal (or a label) must not act on it."""

from __future__ import annotations


def terminal_text(text: str) -> str:
    """`text` safe to print: control characters (an escape sequence that would recolour, move the cursor
    or retitle the terminal) left out, tabs and line breaks as spaces."""
    return "".join(ch if ch.isprintable() else " " if ch in "\t\n\r" else "" for ch in text)
