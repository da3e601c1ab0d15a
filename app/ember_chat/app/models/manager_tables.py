"""Small builders shared by the Model Manager's tabs: sizes for people, read-only tables with accessible
names, table items carrying data, rows of buttons."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QPushButton, QTableWidget, QTableWidgetItem


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
