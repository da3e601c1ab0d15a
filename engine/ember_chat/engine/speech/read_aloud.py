"""Text to read aloud from an answer's Markdown: what a voice should say, sentence by sentence, while
the answer still streams (issue 33). Pure text work, no Qt: the window's speaker (app/voice/) says the
sentences through the system's voices.

What is said: the answer's words without Markdown's marks (headings, emphasis, links' addresses,
list bullets, table pipes, HTML tags); a fenced code block is not read but announced as
"Code block." (a listener knows something was skipped); inline code and formulas are read as their
text (a formula's LaTeX commands as words: `\\alpha` is "alpha"); the model's thinking is not read.

`SentenceStream` takes the answer as it streams and gives each sentence once it is finished: at a
full stop, question or exclamation mark followed by a space, at the end of a heading or list item,
at a blank line, and at a code fence. A sentence is never given while a code block, an inline code
span or a formula that may hold a full stop is still open."""

from __future__ import annotations

import re

from ember_chat.engine.core.reasoning import CLOSE, OPEN

CODE_BLOCK = "Code block."  # said in place of a fenced code block
MAX_SENTENCE_CHARS = 600  # a run-on "sentence" (a long line without stops) is said in pieces of this size
MAX_PENDING_CHARS = 100_000  # a code block or thinking never closed: what is held is bounded

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_QUOTE = re.compile(r"^\s{0,3}(?:>\s?)+")
_RULE = re.compile(r"^\s{0,3}(?:[-*_]\s*){3,}$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~)")
_UNDERSCORE_EMPHASIS = re.compile(r"(?<![A-Za-z0-9])_(?=\S)(.+?)(?<=\S)_(?![A-Za-z0-9])")
_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|(?<![\\$])\$(?!\s)([^$\n]+?)(?<!\s)\$(?!\d)", re.S)
_LATEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
_SPACES = re.compile(r"\s+")
# A sentence ends at . ! ? … (closing quotes or brackets may follow) and then a space.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "Mr.", "Mrs.", "Dr.", "Prof.", "St.", "cf.")
_LATEX_WORDS = {
    "frac": " over ",
    "cdot": " times ",
    "times": " times ",
    "le": " less than or equal to ",
    "leq": " less than or equal to ",
    "ge": " greater than or equal to ",
    "geq": " greater than or equal to ",
    "neq": " not equal to ",
    "approx": " approximately ",
    "sqrt": " square root of ",
    "sum": " sum ",
    "int": " integral ",
    "infty": " infinity ",
    "to": " to ",
    "rightarrow": " to ",
    "left": " ",
    "right": " ",
    "mathrm": " ",
    "text": " ",
    "mathbf": " ",
}


def formula_text(latex: str) -> str:
    """A formula read as its text: LaTeX commands as words (`\\alpha` → alpha, `\\frac` → over),
    braces and layout marks gone, `^` as "to the power", `=` as "equals"."""
    text = re.sub(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r" \1 over \2 ", latex)  # (a fraction: its two parts)
    text = _LATEX_COMMAND.sub(lambda m: _LATEX_WORDS.get(m.group(1), f" {m.group(1)} "), text)
    text = text.replace("^", " to the power ").replace("=", " equals ").replace("_", " ")
    text = re.sub(r"[{}&\\]", " ", text)
    return _SPACES.sub(" ", text).strip()


def inline_text(markdown: str) -> str:
    """One line (or a part of one) of Markdown as words: links as their text, images as their
    description, emphasis and code marks gone, formulas read as their text, HTML tags dropped."""
    text = _MATH.sub(lambda m: " " + formula_text(next(g for g in m.groups() if g is not None)) + " ", markdown)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _HTML_TAG.sub(" ", text)
    text = text.replace("`", "")
    text = _EMPHASIS.sub("", text)
    text = _UNDERSCORE_EMPHASIS.sub(r"\1", text)
    text = text.replace("|", ", ") if text.count("|") >= 2 else text  # a table row: its cells, in a row
    return _SPACES.sub(" ", text).replace(" ,", ",").strip(" ,")


def _line_text(line: str) -> tuple[str, bool]:
    """A whole line's words and whether the line ends its sentence by itself (a heading, a list item,
    a table row)."""
    if _RULE.match(line) or _TABLE_RULE.match(line):
        return "", True
    ends = False
    for mark in (_HEADING, _QUOTE, _BULLET):
        stripped = mark.sub("", line, count=1)
        if stripped != line:
            ends = ends or mark is not _QUOTE
            line = stripped
    if line.strip().startswith("|"):
        ends = True
    return inline_text(line), ends


def _open_span(raw: str) -> bool:
    """Whether `raw` (a part of a line) leaves an inline code span or a formula open (a full stop in it
    is not a sentence's end)."""
    if raw.count("`") % 2:
        return True
    dollars = len(re.findall(r"(?<!\\)\$(?!\d)", raw))  # ($5 is money, not a formula)
    return dollars % 2 == 1 or raw.count("\\(") > raw.count("\\)") or raw.count("\\[") > raw.count("\\]")


def _split_finished(text: str) -> tuple[list[str], str]:
    """The finished sentences of `text` and the unfinished rest."""
    out = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        candidate = text[start : m.end()].strip()
        if candidate.endswith(_ABBREVIATIONS) or re.search(r"(?:^|\s)\d{1,3}\.$", candidate):
            continue  # "e.g. " or "3. " is no sentence's end
        out.append(candidate)
        start = m.end()
    rest = text[start:]
    while len(rest) > MAX_SENTENCE_CHARS:  # a run-on line: said in pieces, cut at a space
        cut = rest.rfind(" ", 0, MAX_SENTENCE_CHARS)
        cut = cut if cut > 0 else MAX_SENTENCE_CHARS
        out.append(rest[:cut].strip())
        rest = rest[cut:]
    return [s for s in out if _has_words(s)], rest


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


class SentenceStream:
    """Sentences to say from an answer streaming in: `feed` each piece of text as it comes and say what
    it gives; `finish` at the end gives the rest. The model's thinking (at the answer's start) is skipped."""

    def __init__(self) -> None:
        self._raw = ""  # text fed and not consumed yet (a partial line, or a line of an open block)
        self._line_start = True  # whether _raw starts at the start of a line
        self._pending = ""  # words of finished lines whose sentence is not finished yet
        self._in_fence = False
        self._thinking: bool | None = None  # None: not known yet whether the answer opens with thinking

    def feed(self, text: str) -> list[str]:
        self._raw += text
        if not self._skip_thinking():
            return []
        out: list[str] = []
        while (newline := self._raw.find("\n")) >= 0:
            line, self._raw = self._raw[:newline], self._raw[newline + 1 :]
            out += self._line(line, self._line_start)
            self._line_start = True
        out += self._partial()
        return out

    def finish(self) -> list[str]:
        """The sentences left at the answer's end (a last sentence without its full stop)."""
        out = self.feed("\n") if self._raw else []
        if self._in_fence:  # a code block never closed: it was still a code block
            self._in_fence = False
            out.append(CODE_BLOCK)
        return out + self._flush()

    def _skip_thinking(self) -> bool:
        """Drop the thinking at the answer's start; False while it is not known whether there is any
        or it has not ended."""
        if self._thinking is False:
            return True
        head = self._raw.lstrip()
        if self._thinking is None:
            if len(head) < len(OPEN) and OPEN.startswith(head):
                return False  # (maybe the opening tag, not all here yet)
            self._thinking = head.startswith(OPEN)
            if not self._thinking:
                return True
        end = self._raw.find(CLOSE)
        if end < 0:
            self._raw = self._raw[-len(CLOSE) :] if len(self._raw) > MAX_PENDING_CHARS else self._raw
            return False
        self._raw = self._raw[end + len(CLOSE) :].lstrip("\n")
        self._thinking = False
        return True

    def _line(self, line: str, at_start: bool) -> list[str]:
        """A finished line (`at_start`: from its start; else its start was said already)."""
        if at_start and _FENCE.match(line):
            if self._in_fence:
                self._in_fence = False
                return [CODE_BLOCK]
            self._in_fence = True
            return self._flush()
        if self._in_fence:
            return []
        if not line.strip():
            return self._flush()  # a paragraph ends
        _words, ends = _line_text(line) if at_start else ("", False)
        if ends:  # (a heading, a list item or a table row is a sentence of its own)
            self._add(_line_text(line)[0])
            return self._flush()
        sentences, rest = self._cut(line + " ", at_start)  # (a stop at the line's end ends a sentence too)
        self._add(inline_text(rest))
        return sentences

    def _add(self, words: str) -> None:
        self._pending = f"{self._pending} {words}" if self._pending and words else self._pending or words

    def _cut(self, raw: str, at_start: bool) -> tuple[list[str], str]:
        """The sentences that end in `raw` (a line or a part of one; the words pending before it start
        the first), cut where the raw text ends a sentence outside code and formulas; and the raw rest."""
        out: list[str] = []
        start = 0
        for m in _SENTENCE_END.finditer(raw):
            if _open_span(raw[: m.start()]):
                continue
            piece = raw[start : m.end()]
            words = _line_text(piece)[0] if at_start and start == 0 else inline_text(piece)
            candidate = f"{self._pending} {words}".strip() if self._pending else words
            if candidate.endswith(_ABBREVIATIONS) or re.search(r"(?:^|\s)\d{1,3}\.$", candidate):
                continue  # "e.g. " or "3. " is no sentence's end
            if _has_words(candidate):
                out.append(candidate)
            self._pending = ""
            start = m.end()
        rest = raw[start:]
        if at_start and start == 0:
            rest = _BULLET.sub("", _HEADING.sub("", _QUOTE.sub("", rest, count=1), count=1), count=1)
        return out, rest

    def _partial(self) -> list[str]:
        """Sentences already finished in the line still streaming: said now, not at its newline."""
        if self._in_fence or not self._raw or (self._line_start and _FENCE.match(self._raw + "`")):
            return []
        sentences, rest = self._cut(self._raw, self._line_start)
        if sentences:  # (else the line is read again, from its start, when more comes)
            self._raw, self._line_start = rest, False
        return sentences

    def _flush(self) -> list[str]:
        text, self._pending = self._pending.strip(), ""
        sentences, rest = _split_finished(text + " ")
        rest = rest.strip()
        return sentences + ([rest] if _has_words(rest) else [])


def speakable_sentences(markdown: str) -> list[str]:
    """A whole answer's sentences, as said aloud (the speaker action on an answer)."""
    stream = SentenceStream()
    return stream.feed(markdown) + stream.finish()
