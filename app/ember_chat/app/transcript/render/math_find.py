"""Finding the LaTeX formulas in a message's Markdown: `$…$` and `\\(…\\)` inline, `$$…$$` and `\\[…\\]`
on their own (display). Code is never math: fenced code blocks and inline code spans are skipped.

Dollar amounts in prose are not math (the rule pandoc uses): an opening `$` has no space after it, a
closing `$` has none before it and no digit after it, and an inline formula holds no other `$` and no
blank line; so "costs $5 and $10" stays text. `\\$` is a literal dollar sign.

`protect` hides each formula behind one private-use character before Qt reads the Markdown (which
would take `_`, `*` and `\\` in a formula for emphasis and escapes); the writer then puts the typeset
formula where that character landed."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[^\n]*$", re.M)  # (indented too: a fence in a list item)
_BACKTICKS = re.compile(r"`+")
_OPENING = re.compile(r"[\\$]")  # what may open a formula or escape a character
_PLACEHOLDER_FIRST = 0xE000  # the Unicode private use area (6,400 characters)
_PLACEHOLDER_LAST = 0xF8FF


@dataclass(frozen=True)
class MathSpan:
    start: int  # where the formula starts in the text, its opening delimiter included
    end: int  # just after its closing delimiter
    latex: str  # what is between the delimiters
    display: bool  # $$…$$ or \[…\]

    def source(self, text: str) -> str:
        """The formula as written, delimiters included (what a copy gives)."""
        return text[self.start : self.end]


def _code_ranges(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks (an unclosed one runs to the end) and inline code spans."""
    ranges: list[tuple[int, int]] = []
    pos = 0
    while (m := _FENCE.search(text, pos)) is not None:
        fence = m.group(1)
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M).search(text, m.end())
        end = close.end() if close else len(text)
        ranges.append((m.start(), end))
        pos = end
    spans: list[tuple[int, int]] = []
    fences = iter(ranges)
    fence_range = next(fences, None)
    pos = 0
    while (m := _BACKTICKS.search(text, pos)) is not None:
        while fence_range is not None and fence_range[1] <= m.start():
            fence_range = next(fences, None)
        if fence_range is not None and fence_range[0] <= m.start():
            pos = fence_range[1]
            continue
        if m.start() > 0 and text[m.start() - 1] == "\\":  # an escaped backtick opens nothing
            pos = m.start() + 1
            continue
        run = m.group(0)
        close = re.compile(rf"(?<!`){run}(?!`)").search(text, m.end())
        if close is None:
            pos = m.end()
            continue
        spans.append((m.start(), close.end()))
        pos = close.end()
    return sorted(ranges + spans)


def find_math(text: str) -> list[MathSpan]:
    """The formulas in a Markdown text, in order."""
    if "$" not in text and "\\" not in text:  # (most messages: nothing can open a formula)
        return []
    code = _code_ranges(text)
    found: list[MathSpan] = []
    i, n, k = 0, len(text), 0
    while i < n:
        while k < len(code) and code[k][1] <= i:
            k += 1
        if k < len(code) and code[k][0] <= i:
            i = code[k][1]
            continue
        limit = code[k][0] if k < len(code) else n  # a formula never runs into code
        opening = _OPENING.search(text, i, limit)  # (the characters between open nothing: skipped at C speed)
        if opening is None:
            i = limit
            continue
        i = opening.start()
        ch = text[i]
        if ch == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt in ("(", "["):
                closer = "\\)" if nxt == "(" else "\\]"
                end = text.find(closer, i + 2, limit)
                if end > i + 2 and text[i + 2 : end].strip() and (nxt == "[" or "\n\n" not in text[i + 2 : end]):
                    found.append(MathSpan(i, end + 2, text[i + 2 : end].strip(), nxt == "["))
                    i = end + 2
                    continue
            i += 2  # an escape: \$ is a dollar sign, \\ a backslash
            continue
        if ch == "$":
            span = _display(text, i, limit) if text.startswith("$$", i) else _inline(text, i, limit)
            if span is not None:
                found.append(span)
                i = span.end
                continue
            i += 2 if text.startswith("$$", i) else 1
            continue
        i += 1
    return found


def _display(text: str, i: int, limit: int) -> MathSpan | None:
    j = i + 2
    while True:
        end = text.find("$$", j, limit)
        if end < 0:
            return None
        if text[end - 1] == "\\":
            j = end + 1
            continue
        latex = text[i + 2 : end].strip()
        return MathSpan(i, end + 2, latex, True) if latex else None


def _inline(text: str, i: int, limit: int) -> MathSpan | None:
    if i + 1 >= limit or text[i + 1].isspace():
        return None
    j = i + 1
    while j < limit:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "\n" and text[j + 1 : j + 2] == "\n":
            return None  # a formula never spans a blank line
        if ch == "$":
            before = text[j - 1]
            after = text[j + 1 : j + 2]
            if j > i + 1 and not before.isspace() and not after.isdigit() and after != "$":
                return MathSpan(i, j + 1, text[i + 1 : j], False)
            return None  # another dollar first: this one was no opening (a price)
        j += 1
    return None


def protect(text: str) -> tuple[str, list[tuple[str, MathSpan]]]:
    """The text with each formula replaced by one private-use character (one the text does not
    contain), and each formula with its character, in order."""
    spans = find_math(text)
    if not spans:
        return text, []
    used = {ord(c) for c in text if _PLACEHOLDER_FIRST <= ord(c) <= _PLACEHOLDER_LAST}
    free = (cp for cp in range(_PLACEHOLDER_FIRST, _PLACEHOLDER_LAST + 1) if cp not in used)
    out: list[str] = []
    kept: list[tuple[str, MathSpan]] = []
    pos = 0
    for span in spans:
        cp = next(free, None)
        if cp is None:  # (thousands of formulas in one chunk: the rest stay text)
            break
        out.append(text[pos : span.start])
        out.append(chr(cp))
        kept.append((chr(cp), span))
        pos = span.end
    out.append(text[pos:])
    return "".join(out), kept
