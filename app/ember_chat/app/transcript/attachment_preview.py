"""The preview a sent attachment's chip opens (a click, or Enter on it in the Tab walk; issue 28): a text
file's extracted text as the model was given it, read-only, with how the answer to its message read it
(its token count; whole, or which passages retrieval used, marked in the text), or an image at full
size.

A message's attachments may come from a chat file someone else wrote (File ▸ Import chats), so what
is shown is only what Ember keeps in its own store (the text or image it kept at import, found by the
hash Ember computed), never a file a name or path in the chat names; the text is plain text in a plain
text view (no HTML or Markdown is run), the names are plain-text labels, and at most MAX_TEXT_BYTES of
the text is loaded (the rest is said, not shown)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QColor, QPixmap, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QScrollArea, QTextEdit, QVBoxLayout

from ember_chat.app.engine_link.attachment_words import kind_label, mode_words
from ember_chat.engine.attachments import WHOLE, PlannedAttachment, Source, StoredAttachment
from ember_chat.engine.attachments.kinds import human_size

MAX_TEXT_BYTES = 2 * 1024 * 1024  # of text loaded into the view: a 50 MB file would hold the window for seconds
MAX_LISTED = 12  # passages named in the reading line (all are marked in the text)


def tr(text: str) -> str:
    return QCoreApplication.translate("AttachmentPreview", text)


@dataclass(frozen=True)
class Reading:
    """How one answer read a file: its plan's item for it and the passages of it that were used."""

    item: PlannedAttachment
    sources: tuple[Source, ...]


def plain_label(text: str, name: str) -> QLabel:
    """A label that shows `text` as written (a file's name from a chat file is never rich text)."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setObjectName(name)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def header_words(att: StoredAttachment) -> str:
    parts = [att.name, kind_label(att.kind), human_size(att.size)]
    if att.pages:
        parts.append(tr("{n} pages").format(n=att.pages) if att.pages != 1 else tr("1 page"))
    return " · ".join(parts)


def passage_words(source: Source) -> str:
    passage = tr("passage {n}").format(n=source.chunk + 1)
    return tr("{passage} (p. {page})").format(passage=passage, page=source.page) if source.page else passage


def reading_words(reading: Reading | None, latest: Reading | None, answered: bool = False) -> str:
    """How the answer to the message read the file (and the newest answer, when it read it otherwise);
    `answered`: messages follow it, none with a record of how it read the file (an imported chat, an
    answer stopped or failed before its plan was kept, a chat from an older Ember)."""
    if reading is None and answered:
        return tr("How the answers read this file was not recorded: this is the text a model is given.")
    if reading is None:
        return tr("No answer has been made with this file yet: this is the text the model will be given.")
    words = tr("For the answer to this message: {how}.").format(how=_how(reading))
    if latest is not None and latest != reading:
        words += " " + tr("For the latest answer: {how}.").format(how=_how(latest))
    return words


def _how(reading: Reading) -> str:
    item = reading.item
    tokens = tr("1 token") if item.tokens == 1 else tr("{n} tokens").format(n=f"{item.tokens:,}")
    how = f"{tokens}, {mode_words(item.mode, item.used, item.total)}"
    if item.mode == WHOLE or not reading.sources:
        return how
    names = [passage_words(s) for s in reading.sources[:MAX_LISTED]]
    more = len(reading.sources) - len(names)
    if more:
        names.append(tr("{n} more").format(n=more))
    return tr("{how} (marked below): {passages}").format(how=how, passages=", ".join(names))


def add_text_preview(
    layout: QVBoxLayout,
    att: StoredAttachment,
    text: str,
    total_bytes: int,
    reading: Reading | None,
    latest: Reading | None,
    mark: QColor,
    answered: bool = False,
) -> QPlainTextEdit:
    """The text preview's parts, in `layout`: what the file is, how it was read, and its text (the
    passages `reading` used marked in `mark`, the view at the first of them)."""
    layout.addWidget(plain_label(header_words(att), "previewHeader"))
    layout.addWidget(plain_label(reading_words(reading, latest, answered), "previewReading"))
    shown = len(text.encode("utf-8"))
    if shown < total_bytes:
        cut = tr("The first {shown} of its {total} of text are shown here.")
        layout.addWidget(plain_label(cut.format(shown=human_size(shown), total=human_size(total_bytes)), "previewCut"))
    view = QPlainTextEdit()
    view.setObjectName("previewText")
    view.setReadOnly(True)
    view.setTextInteractionFlags(
        Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
    )
    view.setAccessibleName(tr("Text of {name}").format(name=att.name))
    view.setPlainText(text)  # (plain text: nothing in it is run as HTML or Markdown)
    if reading is not None and reading.item.mode != WHOLE:
        _mark_passages(view, text, reading.sources, mark)
    layout.addWidget(view, 1)
    return view


def _mark_passages(view: QPlainTextEdit, text: str, sources: Sequence[Source], colour: QColor) -> None:
    """Each passage used, found in the text in document order, gets a background; the view goes to the
    first. (A passage is the text's own words, trimmed; one not found is only named above.)"""
    fmt = QTextCharFormat()
    fmt.setBackground(colour)
    marks = []
    searched, utf16 = 0, 0  # where the next passage is looked for; the same place in UTF-16 units
    for source in sorted(sources, key=lambda s: s.chunk):
        needle = source.text.strip()
        at = text.find(needle, searched) if needle else -1
        if at < 0:
            continue
        # (the document counts UTF-16 units: a character past U+FFFF, an emoji, is two of them)
        utf16 += _utf16_len(text[searched:at])
        searched = at
        c = QTextCursor(view.document())
        c.setPosition(utf16)
        c.setPosition(utf16 + _utf16_len(needle), QTextCursor.MoveMode.KeepAnchor)
        selection = QTextEdit.ExtraSelection()
        selection.cursor = c
        selection.format = fmt
        marks.append(selection)
    view.setExtraSelections(marks)
    if marks:
        first = QTextCursor(view.document())
        first.setPosition(marks[0].cursor.selectionStart())
        view.setTextCursor(first)
        view.centerCursor()


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def add_image_preview(layout: QVBoxLayout, att: StoredAttachment, data: bytes) -> QPixmap:
    """An attached image at full size (scrolled when larger than the window), under what it is."""
    pixmap = QPixmap()
    pixmap.loadFromData(data)
    words = header_words(att)
    if not pixmap.isNull():
        words += " · " + tr("{w} × {h} pixels").format(w=pixmap.width(), h=pixmap.height())
    layout.addWidget(plain_label(words, "previewHeader"))
    label = QLabel()
    label.setObjectName("fullImage")
    label.setAccessibleName(att.name)
    label.setPixmap(pixmap)
    scroll = QScrollArea()
    scroll.setWidget(label)
    scroll.setAlignment(Qt.AlignmentFlag.AlignCenter)
    layout.addWidget(scroll, 1)
    return pixmap
