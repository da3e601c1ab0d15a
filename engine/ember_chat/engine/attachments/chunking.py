"""Splitting a document into passages for retrieval: about `size` characters each, cut at paragraph,
then line, then sentence, then word boundaries, each with the char offset it starts at (so its PDF page
is known)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ember_chat.engine.attachments.kinds import page_at

CHUNK_CHARS = 1200
_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"(?<=[.!?;])\s+"), re.compile(r"\s+"))


@dataclass(frozen=True)
class Chunk:
    seq: int  # 0-based position in the document
    start: int  # char offset in the document's text
    page: int | None  # 1-based PDF page where it starts
    text: str


def chunk_text(text: str, pages: tuple[int, ...] | list[int] = (), size: int = CHUNK_CHARS) -> list[Chunk]:
    chunks: list[Chunk] = []
    pos, n = 0, len(text)
    while pos < n:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        end = min(n, pos + size)
        if end < n:
            end = _cut(text, pos, end, size)
        piece = text[pos:end].strip()
        if piece:
            chunks.append(Chunk(len(chunks), pos, page_at(pages, pos), piece))
        pos = end
    return chunks


def _cut(text: str, start: int, end: int, size: int) -> int:
    """The best boundary in the second half of text[start:end] (a hard cut at `end` if there is none)."""
    window = text[start + size // 2 : end]
    for pattern in _BREAKS:
        matches = list(pattern.finditer(window))
        if matches:
            last = matches[-1]
            return start + size // 2 + last.end()
    return end
