"""An answer's project sources in the transcript (issue 34), written by the attachments' part of the
view (attachments.py: the same lookup, Sources line and passage window): under an answer made with a
project's knowledge, **Sources** with each passage (file, page) as a link, and how many passages found
did not fit the context (never a silent cut); in the answer's text each [n] marker that has a source
becomes a link to it (a marker without one stays plain text, and so does one in code). A click opens the
passage in a window of its own with the question's words marked and an *Open file* button, offered only
when the window's check (`why_not_open`: the file is in the chat's project's index and on disk) allows;
the path opened is the source's, never one from a model's text. Only a document is opened (PDF, Word,
Markdown, plain text: `opens_as_document`); for any other file the button shows its folder instead, since
a code file's own program may run it (a .bat, .ps1 or .js on Windows)."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import PurePath

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QColor, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit, QVBoxLayout

from ember_chat.app.transcript.attachment_preview import plain_label
from ember_chat.app.transcript.render.message import MessageWriter, sign
from ember_chat.engine.attachments.extract import kind_by_name
from ember_chat.engine.attachments.kinds import AttachmentKind
from ember_chat.engine.attachments.store import fts_query
from ember_chat.engine.projects.citations import MARKER, ProjectSource, distinct_labels

CITE = "cite"  # the verb of a source's link: ember:cite/<answer id>/<n>
_NUMBER = re.compile(r"\d{1,3}")
# the kinds of file whose default program shows them (a code file's, HTML's, may run it instead)
_DOCUMENT_KINDS = frozenset({AttachmentKind.PDF, AttachmentKind.DOCX, AttachmentKind.MARKDOWN, AttachmentKind.TEXT})


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


def left_out_words(left_out: int) -> str:
    if left_out == 1:
        return tr("1 more passage found did not fit the context.")
    return tr("{n} more passages found did not fit the context.").format(n=left_out)


def write_sources(
    writer: MessageWriter,
    c: QTextCursor,
    message_id: int,
    sources: Sequence[ProjectSource],
    left_out: int,
    used: Collection[int] = (),
) -> None:
    """The answer's Sources line ([n] file, page — each a link to its passage; those the answer `used`,
    citing them or with their words (`answer_uses`), in bold) and what did not fit."""
    if not sources and not left_out:
        return
    fmt = QTextBlockFormat()
    fmt.setTopMargin(6)
    writer.fresh_block(c, fmt)
    bold = QTextCharFormat(writer.small_secondary)
    bold.setFontWeight(600)
    c.insertText(tr("Sources") + "  ", bold)
    labels = distinct_labels(sources)  # (passages of one file told apart: 'notes.md §3')
    for index, source in enumerate(sources):
        if index:
            c.insertText("  ·  ", writer.small_secondary)
        c.insertText(f"[{source.n}]\u00a0", writer.small_secondary)
        c.insertText(labels[source.n], _link(writer, message_id, source, labels[source.n], source.n in used))
    if left_out:
        c.insertText(("  ·  " if sources else "") + left_out_words(left_out), writer.small_secondary)
    c.setCharFormat(QTextCharFormat())


def _source_tip(source: ProjectSource, label: str) -> str:
    """The label a tooltip names a source by: 'notes.md', or where it was told apart from another source
    (another passage of its file, a file of its name in another folder), with its whole path and its
    position in the file: 'a/notes.md §3 (passage 3 of /d/a/notes.md)'."""
    if label == source.label():
        return label
    return tr("{label} (passage {k} of {path})").format(label=label, k=source.seq + 1, path=source.file_path)


def _link(writer: MessageWriter, message_id: int, source: ProjectSource, label: str, used: bool) -> QTextCharFormat:
    link = QTextCharFormat(writer.small_secondary)
    link.setForeground(QColor(writer.colors.link))
    link.setAnchor(True)
    link.setAnchorHref(f"ember:{CITE}/{message_id}/{source.n}")
    tip = tr("Show passage {n}: {label}").format(n=source.n, label=_source_tip(source, label))
    if used:
        link.setFontWeight(600)
        tip = tr("{tip} (the answer uses this passage)").format(tip=tip)
    link.setToolTip(tip)
    sign(link)
    return link


def link_markers(
    document: QTextDocument, start: int, end: int, message_id: int, sources: Sequence[ProjectSource], link: QColor
) -> int:
    """Each [n] (or each number of [n, m]) in the answer's text between `start` and `end` that has a
    source becomes a link to it; code and text already a link stay as they are. Returns how many."""
    by_n = {s.n: s for s in sources}
    if not by_n:
        return 0
    labels = distinct_labels(sources)
    spans: list[tuple[int, int, ProjectSource]] = []
    block = document.findBlock(start)
    while block.isValid() and block.position() <= end:
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            at = fragment.position()
            if (
                at < end
                and at + fragment.length() > start
                and not (fmt.isAnchor() or fmt.fontFixedPitch() or fmt.isImageFormat())
            ):
                text = fragment.text()
                for marker in MARKER.finditer(text):
                    for number in _NUMBER.finditer(marker.group(1)):
                        source = by_n.get(int(number.group()))
                        if source is not None:
                            first = at + marker.start(1) + number.start()
                            spans.append((first, first + len(number.group()), source))
            it += 1
        block = block.next()
    for first, last, source in spans:  # (after the walk: a format merged re-cuts the fragments)
        fmt = QTextCharFormat()
        fmt.setForeground(link)
        fmt.setAnchor(True)
        fmt.setAnchorHref(f"ember:{CITE}/{message_id}/{source.n}")
        fmt.setToolTip(tr("Source {n}: {label}").format(n=source.n, label=_source_tip(source, labels[source.n])))
        sign(fmt)
        c = QTextCursor(document)
        c.setPosition(first)
        c.setPosition(last, QTextCursor.MoveMode.KeepAnchor)
        c.mergeCharFormat(fmt)
    return len(spans)


def opens_as_document(path: str) -> bool:
    """Whether a source's file is a document Ember opens with its default program (its kind by name: PDF,
    Word, Markdown, plain text); False for a code or web file (its program may run it) and for a Word file
    with macros (.docm)."""
    name = PurePath(path).name
    return kind_by_name(name) in _DOCUMENT_KINDS and not name.lower().endswith(".docm")


def open_target(path: str) -> str:
    """What a source's button opens: the file itself when it is a document, else the folder holding it."""
    return path if opens_as_document(path) else str(PurePath(path).parent)


def question_words(question: str) -> list[str]:
    """The words of the question retrieval searched for (attachments' fts_query: no stop words)."""
    return re.findall(r'"(\w+)"', fts_query(question))


def add_passage_view(
    layout: QVBoxLayout, source: ProjectSource, question: str, mark: QColor, why_not_open: str | None
) -> QPlainTextEdit:
    """The passage window's parts, in `layout`: where it comes from, the passage (the question's words
    marked in `mark`: a word's forms too, "river" marks "rivers"), and why the file cannot be opened."""
    where = tr("Passage {n} · {label} · {path}").format(n=source.n, label=source.label(), path=source.file_path)
    layout.addWidget(plain_label(where, "sourceLabel"))  # (a path from a chat's record: plain text)
    text = QPlainTextEdit(source.text)
    text.setReadOnly(True)
    text.setPlaceholderText(tr("The passage's text was not exported with this chat: only its file and page."))
    text.setTextInteractionFlags(
        Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
    )
    text.setAccessibleName(tr("Passage"))
    text.setObjectName("sourceText")
    text.setExtraSelections(_marks(text, question_words(question), mark))
    layout.addWidget(text, 1)
    if why_not_open:
        layout.addWidget(plain_label(why_not_open, "sourceMissing"))
    return text


def _marks(view: QPlainTextEdit, words: Sequence[str], colour: QColor) -> list[QTextEdit.ExtraSelection]:
    if not words:
        return []
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\w*", re.IGNORECASE)
    fmt = QTextCharFormat()
    fmt.setBackground(colour)
    text = view.toPlainText()
    marks = []
    for found in pattern.finditer(text):
        # (the document counts UTF-16 units: a character past U+FFFF, an emoji, is two of them)
        first = len(text[: found.start()].encode("utf-16-le")) // 2
        c = QTextCursor(view.document())
        c.setPosition(first)
        c.setPosition(first + len(found.group().encode("utf-16-le")) // 2, QTextCursor.MoveMode.KeepAnchor)
        selection = QTextEdit.ExtraSelection()
        selection.cursor = c
        selection.format = fmt
        marks.append(selection)
    return marks


__all__ = [
    "CITE",
    "add_passage_view",
    "left_out_words",
    "link_markers",
    "open_target",
    "opens_as_document",
    "question_words",
    "write_sources",
]
