"""Splitting a document into passages for retrieval: about `size` characters each, cut at paragraph,
then line, then sentence, then word boundaries, each with the char offset it starts at and its PDF page.
A passage never runs across a page start, so that its page is the page of its text: a passage cut across
pages 1 and 2 said "p. 1" for what a reader finds on page 2. A nearly empty page (fewer than MIN_PAGE
characters besides spaces: a page number, a running header, a scan's stray marks) is no passage of its
own: its few characters end the page before it, or, on the first pages, begin the first page after them
that has text, and take that page's number."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ember_chat.engine.attachments.kinds import page_at

CHUNK_CHARS = 1200
MIN_PAGE = 12  # characters besides spaces: a page with fewer joins a neighbour (see above)
_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"(?<=[.!?;])\s+"), re.compile(r"\s+"))
_NOT_SPACE = re.compile(r"\S")


@dataclass(frozen=True)
class Chunk:
    seq: int  # 0-based position in the document
    start: int  # char offset in the document's text
    page: int | None  # 1-based PDF page its text is on (a nearly empty page's few characters aside)
    text: str


@dataclass(frozen=True)
class Span:
    """A stretch of a document's text that no passage runs out of: text[start:end], on `page`."""

    start: int
    end: int
    page: int | None


def chunk_text(text: str, pages: tuple[int, ...] | list[int] = (), size: int = CHUNK_CHARS) -> list[Chunk]:
    """`text` cut into passages of about `size` characters, within its pages (`pages`: the char offset
    where each PDF page starts, as Extracted.pages; () for a file without pages)."""
    return chunk_spans(text, page_spans(text, pages), size)


def page_spans(text: str, pages: tuple[int, ...] | list[int] = ()) -> list[Span]:
    """`text`'s pages, each a span, a nearly empty one joined to a neighbour (module docstring)."""
    if not pages:
        return [Span(0, len(text), None)]
    bounds = [0, *(at for at in pages if 0 < at < len(text)), len(text)]
    spans: list[Span] = []
    waiting: int | None = None  # (the start of the nearly empty first pages not placed yet)
    for start, end in itertools.pairwise(bounds):
        if _nearly_empty(text, start, end):
            if spans:
                spans[-1] = Span(spans[-1].start, end, spans[-1].page)
            elif waiting is None:
                waiting = start
            continue
        spans.append(Span(start if waiting is None else waiting, end, page_at(pages, start)))
        waiting = None
    if waiting is not None:  # (every page nearly empty: one span on the first)
        spans.append(Span(waiting, len(text), page_at(pages, waiting)))
    return spans


def chunk_spans(text: str, spans: Sequence[Span], size: int = CHUNK_CHARS) -> list[Chunk]:
    """`text` cut into passages of about `size` characters, none running out of its span."""
    chunks: list[Chunk] = []
    for span in spans:
        pos, n = span.start, span.end
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
                chunks.append(Chunk(len(chunks), pos, span.page, piece))
            pos = end
    return chunks


def _nearly_empty(text: str, start: int, end: int) -> bool:
    return sum(1 for _ in itertools.islice(_NOT_SPACE.finditer(text, start, end), MIN_PAGE)) < MIN_PAGE


def _cut(text: str, start: int, end: int, size: int) -> int:
    """The best boundary in the second half of text[start:end] (a hard cut at `end` if there is none)."""
    window = text[start + size // 2 : end]
    for pattern in _BREAKS:
        matches = list(pattern.finditer(window))
        if matches:
            last = matches[-1]
            return start + size // 2 + last.end()
    return end
