"""A new chat's title from its first message: the words of its start, cut at a word with "…" when the
message is longer (a title cut mid-word read as a typo in the list and in the window's notices)."""

from __future__ import annotations

TITLE_CHARS = 48


def title_from_message(text: str, limit: int = TITLE_CHARS) -> str:
    """The message's words on one line, at most `limit` characters ("" for a message of no words)."""
    words = " ".join(text.split())
    if len(words) <= limit:
        return words
    cut = words.rfind(" ", 0, limit)
    start = words[:cut] if cut > limit // 2 else words[: limit - 1]  # (one long word: cut inside it)
    return start.rstrip(" ,;:.-") + "…"
