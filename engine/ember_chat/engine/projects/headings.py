"""The section heading each passage of a document is under, for the knowledge index's title column
(projects/index.py): a question often names what a section is about in the words of its heading
("reverse", "checksum") while the passage's own text says it otherwise.

Headings found in plain text: Markdown's `# Title` lines (outside ``` fences), titles underlined with a
row of `=`, `-`, `*` or `.` as long as the title (Markdown's setext headings, GNU Info and reStructured
text's sections), and GNU Info's node lines ("File: x.info,  Node: ls invocation,  Next: …"). A PDF
page's first line is not taken for one: nothing marks it as a heading. A passage's heading is the last
one that starts before it or in its first lines (a passage that opens with a title is under it)."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence

from ember_chat.engine.attachments.chunking import CHUNK_CHARS, Chunk, Span, chunk_spans, page_spans

MAX_HEADING = 160  # characters: a longer line is a paragraph, not a title
MIN_SECTION = 200  # characters: a shorter section (a node line before its title) joins the next one
LEADING_LINES = 4  # a heading starting in a passage's first lines is its own (Info: node line, blank, title)
# (each pattern linear in a line's length: a title's closing #s are stripped after the match, and a title
# line is found by a lookahead, where `(.+?)[ \t#]*$` and `[^\n]*\S[^\n]*` took time quadratic in it:
# 53 s for one 130,000-character line, a minified JSON file's)
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+([^\n]+)$", re.MULTILINE)
_UNDERLINED = re.compile(r"^(?=[^\n]*\S)([^\n]*)\n([=\-*.~^])\2{2,}[ \t]*$", re.MULTILINE)
_INFO_NODE = re.compile(r"^File: [^,\n]+,[ \t]+Node: ([^,\n]+)", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)


def headings(text: str) -> list[tuple[int, str]]:
    """(offset where its line starts, heading) of every heading in `text`, in order."""
    fenced = _fenced_spans(text)
    found: dict[int, str] = {}
    for match in _ATX.finditer(text):
        if not _inside(match.start(), fenced):
            line = match.group(1)
            found[match.start()] = line.rstrip(" \t#") or line[:1]  # (a title of #s keeps one)
    for match in _UNDERLINED.finditer(text):
        title, rule = match.group(1).strip(), match.group(0).split("\n", 1)[1].strip()
        if not _inside(match.start(), fenced) and abs(len(rule) - len(title)) <= 2 and not _is_rule(title):
            found[match.start()] = title
    for match in _INFO_NODE.finditer(text):
        found[match.start()] = match.group(1)
    return [(at, " ".join(title.split())) for at, title in sorted(found.items()) if len(title) <= MAX_HEADING]


def passage_headings(text: str, chunks: Sequence[Chunk]) -> list[str]:
    """The heading each chunk of `text` (attachments/chunking.chunk_text's) is under, "" where none."""
    found = headings(text)
    result: list[str] = []
    i, current = 0, ""
    for chunk in chunks:
        lead_end = chunk.start
        for _ in range(LEADING_LINES):
            lead_end = text.find("\n", lead_end + 1)
            if lead_end < 0:
                lead_end = len(text)
                break
        lead_end = min(lead_end, chunk.start + len(chunk.text))  # (not a heading past its own end: the next page's)
        while i < len(found) and found[i][0] <= lead_end:
            current = found[i][1]
            i += 1
        result.append(current)
    return result


def section_chunks(
    text: str, pages: tuple[int, ...] | list[int] = (), size: int = CHUNK_CHARS
) -> tuple[list[Chunk], list[str]]:
    """`text` cut into passages as chunk_text cuts it (never across a page start), but also never across
    a heading (a passage is about one section), and the heading each passage is under. Sections shorter
    than MIN_SECTION characters join the next one on their page (a page start counts as a section's: a
    heading just under a page's running header opens no passage of that header alone). Measured on GNU
    coreutils' Info manual as one file (bench/retrieval_projects, porter stemming, titles weighted 8):
    BM25's recall@5 0.50 with chunks cut across sections, 0.80 within them."""
    found = [at for at, _ in headings(text)]
    sections: list[Span] = []
    i = 0
    for page in page_spans(text, pages):
        cuts = [page.start]
        while i < len(found) and found[i] < page.end:
            if found[i] - cuts[-1] >= MIN_SECTION:
                cuts.append(found[i])
            i += 1
        cuts.append(page.end)
        sections.extend(Span(start, end, page.page) for start, end in itertools.pairwise(cuts))
    chunks = chunk_spans(text, sections, size)
    return chunks, passage_headings(text, chunks)


def _fenced_spans(text: str) -> list[tuple[int, int]]:
    marks = [m.start() for m in _FENCE.finditer(text)]
    return [(marks[j], marks[j + 1]) for j in range(0, len(marks) - 1, 2)]


def _inside(at: int, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether `at` is strictly inside one of `spans` (sorted, not overlapping: a binary search, so that
    a file of many headings and many fences is not headings × fences)."""
    i = bisect.bisect_left(spans, (at, at)) - 1  # (the last span starting before `at`)
    return i >= 0 and spans[i][0] < at < spans[i][1]


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"([=\-*.~^_])\1*", line))


__all__ = ["MAX_HEADING", "headings", "passage_headings", "section_chunks"]
