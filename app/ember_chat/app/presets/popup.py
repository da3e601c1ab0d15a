"""The saved prompts popup: `/` typed in an empty message box opens it above the box. Typing filters
(name or text), ↑/↓ choose, Enter inserts the prompt's text into the box. Closed without inserting one
(Esc, a click elsewhere, Enter with no prompt matching), what was typed — the `/` and the filter —
goes into the box: a message may start with `/`. The prompts are the presets' system prompts
(Settings ▸ Presets…)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeyEvent
from PySide6.QtWidgets import QFrame, QLabel, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from ember_chat.engine.storage.presets import Preset

TRIGGER = "/"  # typed in an empty message box, it opens the popup
PREVIEW_CHARS = 70
POPUP_WIDTH = 420
POPUP_HEIGHT = 260


def _preview(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


class PromptPopup(QFrame):
    inserted = Signal(str)  # the prompt's text, to insert at the cursor
    dismissed = Signal(str)  # closed without inserting: what was typed ("/" and the filter's text)
    closed = Signal()

    def __init__(self, prompts: list[Preset], parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName(self.tr("Saved prompts"))
        self.prompts = prompts
        self._anchor: QWidget | None = None
        self._inserted = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText(self.tr("Filter saved prompts…  (Enter inserts, Esc closes)"))
        self.filter.setAccessibleName(self.tr("Filter saved prompts"))
        self.filter.textChanged.connect(self._refilter)
        self.filter.installEventFilter(self)
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Saved prompts"))
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the filter keeps the keyboard; ↑/↓ move here
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)  # (the whole prompt is in the tooltip)
        self.list.itemActivated.connect(lambda _item: self.insert_current())
        self.list.itemClicked.connect(lambda _item: self.insert_current())
        self.empty = QLabel()
        self.empty.setWordWrap(True)
        self.empty.setAccessibleName(self.tr("No saved prompts"))
        layout.addWidget(self.filter)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty)
        self.resize(POPUP_WIDTH, POPUP_HEIGHT)
        self._refilter("")

    def shown_names(self) -> list[str]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole + 1) for i in range(self.list.count())]

    def _refilter(self, text: str) -> None:
        needle = text.strip().casefold()
        self.list.clear()
        for preset in self.prompts:
            if needle in preset.name.casefold() or needle in preset.system_prompt.casefold():
                item = QListWidgetItem(f"{preset.name} — {_preview(preset.system_prompt)}")
                item.setData(Qt.ItemDataRole.UserRole, preset.system_prompt)
                item.setData(Qt.ItemDataRole.UserRole + 1, preset.name)
                item.setToolTip(preset.system_prompt)
                self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(0)
        if not self.prompts:
            self.empty.setText(
                self.tr("No saved prompts yet. Save one in Settings ▸ Presets… (a preset's system prompt).")
            )
        elif not self.list.count():
            self.empty.setText(self.tr("No saved prompt matches “{text}”.").format(text=text.strip()))
        self.empty.setVisible(not self.list.count())
        self.list.setVisible(bool(self.list.count()))

    def insert_current(self) -> None:
        item = self.list.currentItem()
        if item is None:
            self.close()  # (nothing matches: what was typed goes into the box)
            return
        text = item.data(Qt.ItemDataRole.UserRole)
        self._inserted = True
        self.close()
        self.inserted.emit(text)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.filter and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            key = event.key()
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                self.insert_current()
                return True
            if key == Qt.Key.Key_Escape:
                self.close()
                return True
            if key in (Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
                step = {Qt.Key.Key_Up: -1, Qt.Key.Key_Down: 1, Qt.Key.Key_PageUp: -5, Qt.Key.Key_PageDown: 5}[key]
                if self.list.count():
                    row = min(max(self.list.currentRow() + step, 0), self.list.count() - 1)
                    self.list.setCurrentRow(row)
                return True
        return super().eventFilter(watched, event)

    def show_above(self, anchor: QWidget) -> None:
        """Over the message box's top edge, as wide as fits in the window, as tall as its rows need,
        focused on the filter."""
        width = max(260, min(POPUP_WIDTH, anchor.window().width() - 40))
        rows = max(1, min(self.list.count(), 8))
        needed = self.filter.sizeHint().height() + rows * max(self.list.sizeHintForRow(0), 18) + 24
        self.resize(width, min(POPUP_HEIGHT, needed) if self.list.count() else self.sizeHint().height())
        top_left = anchor.mapToGlobal(QPoint(0, 0))
        y = top_left.y() - self.height()
        screen = anchor.screen().availableGeometry()
        if y < screen.top():
            y = top_left.y() + anchor.height()  # no room above: below
        self._anchor = anchor
        self.move(max(screen.left(), min(top_left.x(), screen.right() - width)), y)
        self.show()
        self.filter.setFocus()

    def closeEvent(self, event: QCloseEvent) -> None:  # Qt override
        if self._anchor is not None:
            self._anchor.setFocus()  # back to the message box, as it was
        super().closeEvent(event)
        if not self._inserted:
            self._inserted = True  # (once)
            self.dismissed.emit(TRIGGER + self.filter.text())
        self.closed.emit()
