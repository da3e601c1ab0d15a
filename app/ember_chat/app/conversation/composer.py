"""Small widgets: the composer (the conversations sidebar is chat_list/view.py's)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QIcon, QKeyEvent, QKeySequence, QTextCursor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.conversation.attachments_bar import AttachmentsBar, gives_attachment
from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import Colors


class ComposerEdit(QPlainTextEdit):
    submit = Signal()
    escape = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setViewportMargins(1, 1, 1, 1)  # room inside the frame for the whole focus ring
        self.attach_mime: Callable[[QMimeData], bool] | None = None  # files and images pasted or dropped here

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # Qt override
        return gives_attachment(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # Qt override
        """Files and a clipboard image are attached (not pasted as their paths); text is pasted."""
        if gives_attachment(source) and self.attach_mime is not None and self.attach_mime(source):
            return
        super().insertFromMimeData(source)

    def event(self, event: QEvent) -> bool:  # Qt override
        """Ctrl+Z in an empty box with no typing left to undo (after a send) is the window's: Chat ▸ Undo
        (a chat moved to the Trash, a message deleted) — the box's own while it holds text or typing."""
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.matches(QKeySequence.StandardKey.Undo)
            and not self.document().isUndoAvailable()
            and not self.toPlainText()
        ):
            event.ignore()
            return False
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submit.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    """Multi-line input: Enter sends, Shift+Enter is a newline; Send becomes Stop while generating. The
    📎 button, a paste or a drop attaches files, shown as chips above the box (`attachments`)."""

    send = Signal(str)
    stop = Signal()
    cancel_edit = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(8, 4, 8, 8)
        self.edit_banner = QLabel()
        self.edit_banner.setTextFormat(Qt.TextFormat.RichText)
        self.edit_banner.linkActivated.connect(lambda _: self.cancel_edit.emit())
        self.edit_banner.hide()
        outer.addWidget(self.edit_banner)
        self.attachments = AttachmentsBar()
        self.attachments.changed.connect(self._chain_chips)
        outer.addWidget(self.attachments)
        row = QHBoxLayout()
        self.attach_button = QToolButton()
        self.attach_button.setAccessibleName(self.tr("Attach files"))
        self.attach_button.setToolTip(
            self.tr("Attach files or images (or drop them on the window, or paste them into the message box)")
        )
        self.attach_button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.attach_button.setAutoRaise(True)
        self.attach_button.setIconSize(QSize(20, 20))
        self.attach_button.clicked.connect(self.attachments.open_dialog)
        self.editor = ComposerEdit()
        self.show_project("")
        self.editor.setAccessibleName(self.tr("Message"))
        self.editor.setAccessibleDescription(self.tr("Enter sends, Shift+Enter starts a new line, Esc stops an answer"))
        self.editor.setTabChangesFocus(True)
        self.editor.setMaximumHeight(84)
        self.editor.submit.connect(self.submit)
        self.editor.escape.connect(self.stop)
        self.editor.attach_mime = self.attachments.attach_mime
        self.button = QPushButton(self.tr("Send"))
        self.button.setAccessibleName(self.tr("Send"))
        self.button.setToolTip(self.tr("Send (Enter)"))
        self.button.setMinimumWidth(80)
        self.button.clicked.connect(self._on_button)
        row.addWidget(self.editor, 1)
        row.addWidget(self.attach_button)
        row.addWidget(self.button)
        outer.addLayout(row)
        self.row = row  # (the microphone goes in it: voice/dictation.py)
        self._generating = False
        self._icons: dict[str, QIcon] = {}

    def set_colors(self, colors: Colors) -> None:
        self._icons = {name: themed_icon(name, colors) for name in ("send", "stop")}
        self.button.setIcon(self._icons["stop" if self._generating else "send"])
        self.attach_button.setIcon(themed_icon("attach", colors))
        self.attachments.set_colors(colors)

    def replace_draft(self, text: str) -> None:
        """`text` in the box in place of what it held (the greeting's example prompt clicked), to send or
        change."""
        editor = self.editor
        cursor = editor.textCursor()  # an edit, not setPlainText: Ctrl+Z brings back a draft it replaced
        cursor.select(QTextCursor.SelectionType.Document)
        cursor.insertText(text)
        editor.setTextCursor(cursor)
        editor.setFocus()

    def attach_paths(self, paths: list[Path]) -> None:
        """Attach these files, as the 📎 button's dialog does once files are chosen."""
        self.attachments.attach_paths(paths)

    def _chain_chips(self) -> None:
        """Tab walks from the message box to each chip's ✕, then the 📎 button and Send."""
        chain = [self.editor, *(i.chip.close_button for i in self.attachments.items), self.attach_button]
        for a, b in pairwise(chain):
            QWidget.setTabOrder(a, b)

    def set_generating(self, on: bool) -> None:
        self._generating = on
        self.button.setText(self.tr("Stop") if on else self.tr("Send"))
        self.button.setAccessibleName(self.tr("Stop") if on else self.tr("Send"))
        self.button.setToolTip(self.tr("Stop the answer (Esc)") if on else self.tr("Send (Enter)"))
        if self._icons:
            self.button.setIcon(self._icons["stop" if on else "send"])

    def set_editing(self, on: bool) -> None:
        self.edit_banner.setText(
            self.tr('Editing an earlier message — sending creates a new branch. <a href="#">Cancel</a>')
        )
        self.edit_banner.setVisible(on)

    def _on_button(self) -> None:
        if self._generating:
            self.stop.emit()
        else:
            self.submit()

    def show_project(self, name: str) -> None:
        """The empty message box says where the new chat goes: into the project `name` ("": none)."""
        if name:
            text = self.tr("Message Ember in the project “{name}”…  (Enter to send, Shift+Enter for a new line)")
        else:
            text = self.tr("Message Ember…  (Enter to send, Shift+Enter for a new line)")
        self.editor.setPlaceholderText(text.format(name=name))

    def submit(self) -> None:
        """Send what the box holds (Enter, the Send button; while an answer streams, Enter: the window
        keeps the message until the answer ends, and the box is free for the next one)."""
        text = self.editor.toPlainText().strip()
        if text or self.attachments.items:  # (attachments may go without a word)
            self.editor.clear()
            self.send.emit(text)


__all__ = ["Composer", "ComposerEdit"]
