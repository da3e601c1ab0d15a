"""Small builders shared by the Model Manager's tabs: sizes for people, read-only tables with accessible
names, table items carrying data, rows of buttons, a banner."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def make_table(headers: list[str], name: str, description: str) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.verticalHeader().hide()
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    t.horizontalHeader().setStretchLastSection(True)
    t.setAccessibleName(name)
    t.setAccessibleDescription(description)
    return t


def table_item(text: str, data: object = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    if data is not None:
        it.setData(Qt.ItemDataRole.UserRole, data)
    return it


def note_item(text: str, table: QTableWidget, chars: int = 32) -> QTableWidgetItem:
    """A cell for a sentence (a damaged file's error): elided to about `chars` average characters, the
    whole of it in the tooltip. Columns fit their contents, so a long one pushed every other column
    out of view."""
    metrics = table.fontMetrics()
    shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, metrics.averageCharWidth() * chars)
    it = QTableWidgetItem(shown)
    it.setToolTip(text)
    return it


def button_row(*buttons: tuple[str, str, Callable[[], object]]) -> QHBoxLayout:
    """Buttons from (text, tooltip, slot); the texts and tooltips come translated."""
    row = QHBoxLayout()
    for text, tip, slot in buttons:
        b = QPushButton(text)
        b.setAccessibleName(text.replace("&", ""))
        b.setToolTip(tip)
        b.clicked.connect(slot)
        row.addWidget(b)
    row.addStretch(1)
    return row


class StatusBanner(QFrame):
    """A message across the top of a dialog, styled like the window's banner (#banner[kind=...]): an
    error or a notice in plain text, an optional action button (Retry) and a close button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setProperty("kind", "notice")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 6, 6, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # file names and server errors: never markup
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.action = QPushButton()
        self.action.setAccessibleName(self.tr("Act on the message"))  # named by show_message
        self.action.setToolTip(self.tr("Act on the message"))
        self.action.hide()
        self.close_button = QPushButton(self.tr("Dismiss"))
        self.close_button.setAccessibleName(self.tr("Dismiss message"))
        self.close_button.setToolTip(self.tr("Hide this message"))
        self.close_button.clicked.connect(self.hide)
        row.addWidget(self.label, 1)
        row.addWidget(self.action, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self._slot: Callable[[], object] | None = None
        self.action.clicked.connect(self._act)
        self.hide()

    def text(self) -> str:
        return self.label.text()

    def kind(self) -> str:
        return str(self.property("kind"))

    def show_message(
        self, text: str, error: bool = False, action: tuple[str, str, Callable[[], object]] | None = None
    ) -> None:
        """`action`: (button text, its tooltip, what it does; the banner hides first)."""
        self.setProperty("kind", "error" if error else "notice")
        self.style().unpolish(self)
        self.style().polish(self)
        self.label.setText(text)
        self._slot = action[2] if action else None
        if action:
            self.action.setText(action[0])
            self.action.setAccessibleName(action[0])
            self.action.setToolTip(action[1])
        self.action.setVisible(action is not None)
        self.setAccessibleName(text)
        self.show()

    def _act(self) -> None:
        slot = self._slot
        self.hide()
        if slot is not None:
            slot()
