"""Help ▸ Keyboard shortcuts: every key the window knows, read from its menus plus the fixed keys of the
message box and the transcript."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QMenuBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.shell.menus import fixed_shortcuts, menu_shortcuts


class ShortcutsDialog(QDialog):
    def __init__(self, menu_bar: QMenuBar, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Keyboard shortcuts"))
        self.setAccessibleName(self.tr("Keyboard shortcuts"))
        rows = [(key, f"{action} ({menu})") for menu, action, key in menu_shortcuts(menu_bar)]
        rows += fixed_shortcuts()
        self.table = QTableWidget(len(rows), 2)
        self.table.setAccessibleName(self.tr("Shortcuts"))
        self.table.setAccessibleDescription(self.tr("Each row: a key, and what it does"))
        self.table.setHorizontalHeaderLabels([self.tr("Keys"), self.tr("Does")])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        for i, (key, what) in enumerate(rows):
            self.table.setItem(i, 0, QTableWidgetItem(key))
            self.table.setItem(i, 1, QTableWidgetItem(what))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        close = buttons.button(QDialogButtonBox.StandardButton.Close)
        close.setToolTip(self.tr("Close this list"))
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(620, 520)

    def rows(self) -> list[tuple[str, str]]:
        return [(self.table.item(i, 0).text(), self.table.item(i, 1).text()) for i in range(self.table.rowCount())]
