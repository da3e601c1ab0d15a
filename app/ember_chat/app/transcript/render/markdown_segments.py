"""An answer's Markdown cut into segments for writing a step at a time: Markdown chunks of at most about
SEGMENT_CHARS (cut at blank lines) and fenced code blocks, numbered in their message (the Copy code
links name them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

SEGMENT_CHARS = 3000
_FENCE_OPEN = re.compile(r"^(```+|~~~+)[ \t]*([^\s`]*)[^\n]*$", re.M)


@dataclass(frozen=True)
class Segment:
    kind: str  # "markdown" or "code"
    text: str
    language: str = ""
    index: int = 0  # the code block's number in its message


def split_segments(markdown: str) -> list[Segment]:
    """Markdown chunks and fenced code blocks, in order. An unclosed fence (an answer that was cut)
    runs to the end of the text."""
    segments: list[Segment] = []
    pos = 0
    n_code = 0
    while True:
        m = _FENCE_OPEN.search(markdown, pos)
        if m is None:
            _add_markdown(segments, markdown[pos:])
            return segments
        _add_markdown(segments, markdown[pos : m.start()])
        fence = m.group(1)
        close = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M).search(markdown, m.end())
        body_end = close.start() if close else len(markdown)
        code = markdown[m.end() + 1 : body_end] if m.end() < len(markdown) else ""
        segments.append(Segment("code", code.rstrip("\n"), m.group(2), n_code))
        n_code += 1
        pos = close.end() if close else len(markdown)


def _add_markdown(segments: list[Segment], text: str) -> None:
    """Chunks of at most about SEGMENT_CHARS, cut at blank lines (paragraph boundaries)."""
    text = text.strip("\n")
    while text:
        if len(text) <= SEGMENT_CHARS:
            segments.append(Segment("markdown", text))
            return
        cut = text.rfind("\n\n", 0, SEGMENT_CHARS)
        if cut <= 0:
            cut = text.find("\n\n", SEGMENT_CHARS)
            if cut < 0:
                cut = len(text)
        segments.append(Segment("markdown", text[:cut]))
        text = text[cut:].strip("\n")


def code_blocks(markdown: str) -> list[str]:
    return [s.text for s in split_segments(markdown) if s.kind == "code"]
