"""Attachments in the transcript (a part of the view, `view.attachments`): on a sent message its chips
(name, kind, size) and its images as thumbnails, a click shows one at full size; under an answer
made with attachments, how each was read (whole, or the passages used) and its **Sources** (file,
page, passage), a click shows that passage.

What a message has is asked of `lookup` (the window's attachment store) once per message and kept:
a message's attachments never change once sent, and an answer's plan is written when its request is
planned (`forget` makes the view ask again)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QSize, Qt, QUrl
from PySide6.QtGui import (
    QColor,
    QImage,
    QPixmap,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextImageFormat,
)
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QScrollArea, QVBoxLayout

from ember_chat.app.chat.attachment_chips import human_size, kind_label, mode_words
from ember_chat.app.chat.message_render import inline_image, sign
from ember_chat.app.style.icons import icon_image
from ember_chat.engine.attachments import PlannedAttachment, Source, StoredAttachment

if TYPE_CHECKING:
    from ember_chat.app.chat.transcript import TranscriptView

THUMB_HEIGHT = 96  # px, logical: a thumbnail's height in the transcript (narrower images keep their width)
THUMB_WIDTH = 240
CHIP_ICON = 12


def tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


@dataclass(frozen=True)
class MessageAttachments:
    """What the transcript shows of a message's attachments: its files, and for an answer the plan it
    was made with (`items`: how each file was read; `sources`: the passages used)."""

    attachments: tuple[StoredAttachment, ...] = ()
    items: tuple[PlannedAttachment, ...] = ()
    sources: tuple[Source, ...] = ()
    images: dict[str, bytes] = field(default_factory=dict, compare=False)  # sha256 → the image's bytes


Lookup = Callable[[list[int]], dict[int, MessageAttachments]]


def source_label(source: Source) -> str:
    where = tr("p. {page}").format(page=source.page) if source.page else ""
    passage = tr("passage {n}").format(n=source.chunk + 1)
    return " · ".join(p for p in (source.name, where, passage) if p)


class TranscriptAttachments:
    def __init__(self, view: TranscriptView) -> None:
        self.view = view
        self.lookup: Lookup = lambda ids: {}
        self._known: dict[int, MessageAttachments] = {}
        self._thumbs: dict[str, QImage] = {}  # sha256 → thumbnail (at the view's pixel ratio)
        self.dialog: QDialog | None = None  # the passage or image shown, while open

    # ----- what a message has
    def prefetch(self, ids: Iterable[int]) -> None:
        """Ask for the messages not known yet in one go (before a thread is compared or written)."""
        missing = [i for i in ids if i not in self._known]
        if missing:
            found = self.lookup(missing)
            for i in missing:
                self._known[i] = found.get(i, MessageAttachments())

    def of(self, message_id: int) -> MessageAttachments:
        if message_id not in self._known:
            self.prefetch([message_id])
        return self._known[message_id]

    def forget(self, message_id: int) -> None:
        self._known.pop(message_id, None)

    def key(self, message_id: int) -> tuple:
        """Part of a message's look: a message whose attachments or plan changed is written again."""
        m = self.of(message_id)
        return (m.attachments, m.items, m.sources)

    # ----- writing
    def write_chips(self, c: QTextCursor, message_id: int) -> None:
        """A sent message's attachments, below its text: its images as thumbnails on a line of their
        own, then a chip per file (name, kind, size)."""
        m = self.of(message_id)
        if not m.attachments:
            return
        writer = self.view.writer
        fmt = QTextBlockFormat()
        fmt.setTopMargin(6)
        images = [(i, a) for i, a in enumerate(m.attachments) if a.is_image and a.sha256 in m.images]
        if images:
            writer.fresh_block(c, fmt)
            for n, (index, att) in enumerate(images):
                if n:
                    c.insertText("  ", writer.small_secondary)
                self._thumbnail(c, message_id, index, att, m.images[att.sha256])
        writer.fresh_block(c, fmt)
        icon = self._attach_icon()
        chip = QTextCharFormat(writer.small_secondary)
        chip.setBackground(QColor(writer.colors.base))
        for index, att in enumerate(m.attachments):
            if index:
                c.insertText("   ", writer.small_secondary)
            words = " · ".join((att.name, kind_label(att.kind), human_size(att.size)))
            chip.setToolTip(words)
            c.insertImage(icon)
            c.insertText("\u00a0" + words.replace(" ", "\u00a0") + "\u00a0", chip)  # a chip is not broken
        c.setCharFormat(QTextCharFormat())

    def _attach_icon(self) -> QTextImageFormat:
        """The 📎 of the icon set, in the theme's secondary colour (made once per colours and density)."""
        writer = self.view.writer
        name = "icon:attach-chip"
        if name not in writer.images:
            image = icon_image("attach", writer.colors.secondary, CHIP_ICON, writer.ratio)
            writer.images[name] = image
        self.view.document().addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), writer.images[name])
        return inline_image(name, CHIP_ICON)

    def _thumbnail(self, c: QTextCursor, message_id: int, index: int, att: StoredAttachment, data: bytes) -> None:
        ratio = self.view.devicePixelRatioF()
        thumb = self._thumbs.get(att.sha256)
        if thumb is None or thumb.devicePixelRatio() != ratio:
            image = QImage.fromData(data)
            if image.isNull():
                return
            box = QSize(round(THUMB_WIDTH * ratio), round(THUMB_HEIGHT * ratio))
            thumb = image.scaled(box, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
            thumb.setDevicePixelRatio(ratio)
            self._thumbs[att.sha256] = thumb
        name = f"thumb:{att.sha256}"
        self.view.document().addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), thumb)
        img = QTextImageFormat()
        img.setName(name)
        img.setWidth(thumb.width() / ratio)
        img.setHeight(thumb.height() / ratio)
        img.setAnchor(True)
        img.setAnchorHref(f"ember:image/{message_id}/{index}")
        img.setToolTip(tr("{name}: click to see it at full size").format(name=att.name))
        sign(img)
        c.insertImage(img)

    def write_plan(self, c: QTextCursor, message_id: int) -> None:
        """Under an answer made with attachments: how each was read, then its Sources."""
        m = self.of(message_id)
        writer = self.view.writer
        if m.items:
            fmt = QTextBlockFormat()
            fmt.setTopMargin(8)
            writer.fresh_block(c, fmt)
            read = []
            for item in m.items:
                tokens = tr("{n} tokens").format(n=f"{item.tokens:,}") if item.tokens else ""
                how = mode_words(item.mode, item.used, item.total)
                read.append(f"{item.name} ({', '.join(p for p in (tokens, how) if p)})")
            c.insertText(tr("Read: ") + "; ".join(read), writer.small_secondary)
        if m.sources:
            fmt = QTextBlockFormat()
            fmt.setTopMargin(4)
            writer.fresh_block(c, fmt)
            bold = QTextCharFormat(writer.small_secondary)
            bold.setFontWeight(600)
            c.insertText(tr("Sources") + "  ", bold)
            for index, source in enumerate(m.sources):
                if index:
                    c.insertText("  ·  ", writer.small_secondary)
                link = QTextCharFormat(writer.small_secondary)
                link.setForeground(QColor(writer.colors.link))
                link.setAnchor(True)
                link.setAnchorHref(f"ember:source/{message_id}/{index}")
                link.setToolTip(tr("Show this passage"))
                sign(link)
                c.insertText(source_label(source), link)
        c.setCharFormat(QTextCharFormat())

    # ----- clicks
    def on_action(self, verb: str, message_id: int, arg: int) -> None:
        """A link in the transcript (the view's `action` signal): a source or an image."""
        m = self._known.get(message_id)
        if m is None:
            return
        if verb == "source" and arg < len(m.sources):
            self.show_source(m.sources[arg])
        elif verb == "image" and arg < len(m.attachments):
            att = m.attachments[arg]
            if att.sha256 in m.images:
                self.show_image(att.name, m.images[att.sha256])

    def _dialog(self, title: str) -> tuple[QDialog, QVBoxLayout]:
        if self.dialog is not None:
            self.dialog.close()
        dialog = QDialog(self.view.window())
        dialog.setWindowTitle(title)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda _o=None, d=dialog: self._closed(d))
        layout = QVBoxLayout(dialog)
        self.dialog = dialog
        return dialog, layout

    def _closed(self, dialog: QDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None

    def _finish(self, dialog: QDialog, layout: QVBoxLayout) -> None:
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(dialog.close)
        layout.addWidget(buttons)
        dialog.show()

    def show_source(self, source: Source) -> QDialog:
        """The passage an answer used, in a small window of its own."""
        dialog, layout = self._dialog(source_label(source))
        text = QPlainTextEdit(source.text)
        text.setReadOnly(True)
        text.setAccessibleName(tr("Passage"))
        text.setObjectName("sourceText")
        layout.addWidget(QLabel(source_label(source)))
        layout.addWidget(text, 1)
        dialog.resize(560, 360)
        self._finish(dialog, layout)
        return dialog

    def show_image(self, name: str, data: bytes) -> QDialog:
        """An attached image at full size (scrolled when larger than the screen allows)."""
        dialog, layout = self._dialog(name)
        label = QLabel()
        label.setObjectName("fullImage")
        label.setAccessibleName(name)
        pixmap = QPixmap()
        pixmap.loadFromData(data)
        label.setPixmap(pixmap)
        scroll = QScrollArea()
        scroll.setWidget(label)
        scroll.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(scroll, 1)
        screen = self.view.screen().availableGeometry()
        dialog.resize(min(pixmap.width() + 40, screen.width() - 80), min(pixmap.height() + 80, screen.height() - 80))
        self._finish(dialog, layout)
        return dialog
