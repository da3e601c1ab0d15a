"""Small widgets: the composer and the conversations sidebar."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from PySide6.QtCore import QMimeData, QModelIndex, QPersistentModelIndex, QPoint, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QIcon, QKeyEvent, QMouseEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.chat.attachments_bar import AttachmentsBar, gives_attachment
from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import Colors
from ember_chat.engine.storage.conversations import Conversation, SearchHit


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
        self.editor.setPlaceholderText(self.tr("Message Ember…  (Enter to send, Shift+Enter for a new line)"))
        self.editor.setAccessibleName(self.tr("Message"))
        self.editor.setAccessibleDescription(self.tr("Enter sends, Shift+Enter starts a new line, Esc stops an answer"))
        self.editor.setTabChangesFocus(True)
        self.editor.setMaximumHeight(84)
        self.editor.submit.connect(self._on_submit)
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
        self._generating = False
        self._icons: dict[str, QIcon] = {}

    def set_colors(self, colors: Colors) -> None:
        self._icons = {name: themed_icon(name, colors) for name in ("send", "stop")}
        self.button.setIcon(self._icons["stop" if self._generating else "send"])
        self.attach_button.setIcon(themed_icon("attach", colors))
        self.attachments.set_colors(colors)

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
            self._on_submit()

    def _on_submit(self) -> None:
        if self._generating:
            return
        text = self.editor.toPlainText().strip()
        if text or self.attachments.items:  # (attachments may go without a word)
            self.editor.clear()
            self.send.emit(text)


class ChatListWidget(QListWidget):
    """A right click leaves the selection alone: it stays on the open chat, and the context menu
    acts on the row under the pointer."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setViewportMargins(1, 1, 1, 1)  # room inside the frame for the whole focus ring

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.RightButton:
            event.accept()
            return
        super().mousePressEvent(event)


class OneLineRows(QStyledItemDelegate):
    """Rows as wide as the list, not as their text: a long title is elided to fit (a list view in
    list mode makes every row as wide as its widest text, and clips rather than elides)."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        return QSize(1, super().sizeHint(option, index).height())


class ConversationList(QWidget):
    """Newest first; the search box runs full-text search across every chat. The selected chat is the
    open one: selecting a row (click, arrow keys) opens its chat, opening a chat selects its row."""

    selected = Signal(int)
    search_hit = Signal(int, int)  # conversation id, message id
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 0, 8)
        self.new_button = QPushButton(self.tr("New chat"))
        self.new_button.setAccessibleName(self.tr("New chat"))
        self.new_button.setToolTip(self.tr("Start a new chat (Ctrl+N)"))
        layout.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setPlaceholderText(self.tr("Search all chats"))
        self.search.setAccessibleName(self.tr("Search all chats"))
        self.search.setToolTip(self.tr("Full-text search across every chat (Ctrl+F)"))
        self._search_icon = self.search.addAction(QIcon(), QLineEdit.ActionPosition.LeadingPosition)
        self._search_icon.setText(self.tr("Search"))
        self._search_icon.setToolTip(self.tr("Search all chats"))
        self._search_icon.triggered.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.setClearButtonEnabled(True)
        clear = self.search.findChild(QAction, "_q_qlineeditclearaction")  # Qt's own clear button: name it
        if clear is not None:
            clear.setText(self.tr("Clear search"))
            clear.setToolTip(self.tr("Clear the search and show every chat"))
        layout.addWidget(self.search)
        self.list = ChatListWidget()
        self.list.setAccessibleName(self.tr("Conversations"))
        self.list.setAccessibleDescription(self.tr("Your chats, newest first; Enter opens one"))
        self.list.setWordWrap(False)  # a title is one line, elided at its end (whole in its tooltip)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setItemDelegate(OneLineRows(self.list))
        layout.addWidget(self.list, 1)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(150)
        self._debounce.timeout.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.textChanged.connect(lambda _t: self._debounce.start())
        self.list.itemActivated.connect(self._activate)
        self.list.itemClicked.connect(self._activate)
        self.list.itemSelectionChanged.connect(self._on_selection)
        self._mode = "conversations"
        self._open: int | None = None  # the chat the window shows, as this list knows it

    def cancel_pending_search(self) -> None:
        """Drop a search still waiting for the typing to pause (the window is closing)."""
        self._debounce.stop()

    def set_colors(self, colors: Colors) -> None:
        self.new_button.setIcon(themed_icon("new-chat", colors))
        self._search_icon.setIcon(themed_icon("search", colors, colors.secondary))

    def show_conversations(self, conversations: list[Conversation], current: int | None) -> None:
        self._mode = "conversations"
        self._open = current
        self.list.blockSignals(True)
        self.list.clear()
        for c in conversations:
            item = QListWidgetItem(c.title)
            item.setData(Qt.ItemDataRole.UserRole, (c.id, None))
            item.setToolTip(c.title)
            self.list.addItem(item)
            if c.id == current:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)

    def show_hits(self, hits: list[SearchHit]) -> None:
        self._mode = "hits"
        self.list.clear()
        if not hits:
            item = QListWidgetItem(self.tr("No matches"))
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.list.addItem(item)
        for h in hits:
            item = QListWidgetItem(f"{h.conversation_title}\n{h.snippet}")
            item.setToolTip(f"{h.conversation_title}\n{h.snippet}")
            item.setData(Qt.ItemDataRole.UserRole, (h.conversation_id, h.message_id))
            self.list.addItem(item)

    def select(self, conversation_id: int) -> None:
        """Highlight this chat (opened from elsewhere: a search hit, the keyboard, a script)."""
        self._open = conversation_id
        if self._mode != "conversations":
            return
        for i in range(self.list.count()):
            data = self.list.item(i).data(Qt.ItemDataRole.UserRole)
            if data and data[0] == conversation_id:
                self.list.blockSignals(True)
                self.list.setCurrentRow(i)
                self.list.blockSignals(False)
                return

    def current_id(self) -> int | None:
        """The selected chat (a row merely current, as focus leaves the first one, is not selected)."""
        items = self.list.selectedItems()
        return self.id_of(items[0]) if items else None

    def id_at(self, pos: QPoint) -> int | None:
        """The chat of the row at `pos` (viewport coordinates), if any."""
        item = self.list.itemAt(pos)
        return self.id_of(item) if item is not None else None

    def id_of(self, item: QListWidgetItem) -> int | None:
        data = item.data(Qt.ItemDataRole.UserRole)
        return data[0] if data and self._mode == "conversations" else None

    def _on_selection(self) -> None:
        cid = self.current_id()
        if cid is not None and cid != self._open:
            self._open = cid
            self.selected.emit(cid)

    def _activate(self, item: QListWidgetItem) -> None:
        data = item.data(Qt.ItemDataRole.UserRole)
        if not data:
            return
        cid, mid = data
        if mid is None:
            if cid != self._open:  # (a click has selected, and so opened, it already)
                self._open = cid
                self.selected.emit(cid)
        else:
            self.search_hit.emit(cid, mid)
