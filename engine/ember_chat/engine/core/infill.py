"""A fill-in-the-middle request: the text before the cursor, the text after it, and other files the
model may read first. The model writes what goes between (editor autocomplete: llama-server's /infill,
the completions API's `suffix`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Infill:
    prefix: str  # the text before the middle
    suffix: str  # the text after it
    prompt: str = ""  # llama-server's: more text after the prefix (what is typed at the cursor)
    extra: tuple[tuple[str, str], ...] = ()  # (file name, text) of other files, context before the prefix
