"""Single newlines are line breaks in chat text (a poem, an address, a list without markers), as in
the chat apps people use, and as the answer looked while it streamed. Markdown would join such lines
into one paragraph, so before Qt reads a Markdown chunk each line that continues a paragraph gets a
marker at its end, and after Qt has written it each marker becomes a line separator (U+2028: a new
line in the same paragraph, so the spacing is the streamed text's). Code, tables, headings and lists
stay what Markdown makes of them.

The marker is a punctuation character (so `**bold.**` at the end of a line still closes: emphasis
rules look at the characters around a delimiter), one the text does not contain."""

from __future__ import annotations

import re

from PySide6.QtGui import QTextCursor, QTextDocument

LINE_SEPARATOR = "\u2028"
_MARKERS = ("\u2042", "\u2051", "\u2e19", "\u2e0e")  # ⁂ ⁑ ⸙ ⸎ (Unicode punctuation, rare in text)
_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)\s*$")  # a setext heading's underline
_RULE = re.compile(r"^ {0,3}((\*\s*){3,}|(-\s*){3,}|(_\s*){3,})$")  # a thematic break
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:")
_ODD_BACKSLASHES = re.compile(r"(?<!\\)\\(?:\\\\)*$")  # a line ending in a backslash that is not escaped


def mark_line_breaks(markdown: str) -> tuple[str, str | None]:
    """The text with a marker at the end of each line that the next line continues, and the marker
    (None when every candidate occurs in the text: then nothing is marked)."""
    marker = next((m for m in _MARKERS if m not in markdown), None)
    if marker is None or "\n" not in markdown:
        return markdown, None
    lines = markdown.split("\n")
    for i, line in enumerate(lines[:-1]):
        following = lines[i + 1]
        if not line.strip() or not following.strip() or not _breaks_after(line, following):
            continue
        # Markdown's own hard breaks (two spaces, a backslash) become the same kind of line break
        if line.endswith("  "):
            line = line.rstrip(" ")
        elif _ODD_BACKSLASHES.search(line):
            line = line[:-1]
        lines[i] = line + marker
    return "\n".join(lines), marker


def _breaks_after(line: str, following: str) -> bool:
    """Whether a marker may end `line`: not a table row, a rule, a heading's underline (or the text
    above one) or a link definition, where a character at the end would change what it is."""
    if "|" in line or _UNDERLINE.match(line) or _RULE.match(line) or _LINK_DEFINITION.match(line):
        return False
    return not _UNDERLINE.match(following)


def apply_line_breaks(document: QTextDocument, start: int, end: QTextCursor, marker: str) -> None:
    """Turn the markers between `start` and `end` (a cursor, it moves with the edits) into line
    separators where the line went on in the same paragraph, and drop the others (at the end of a
    paragraph or a list item, inside a code span where a newline is a space)."""
    pos = start
    while True:
        c = document.find(marker, pos)
        if c.isNull() or c.selectionStart() >= end.position():
            return
        pos = c.selectionStart()
        fmt = c.charFormat()  # the marker's own format (the character before the cursor)
        if document.characterAt(pos + 1) == " " and not fmt.fontFixedPitch():
            c.setPosition(pos + 2, QTextCursor.MoveMode.KeepAnchor)  # the marker and Qt's soft-break space
            c.insertText(LINE_SEPARATOR, fmt)
        else:
            c.removeSelectedText()
