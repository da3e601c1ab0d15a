"""The Knowledge tab's *Show skipped files…*: each file of a project's sources that is not used, with the
reason. A model over the list (a view asks only for the rows it shows), so a folder of 50,000 skipped files
opens as fast as one of ten: the list built item by item stalled the window for close to half a second
(a table view: a tree view lays out every row as it is shown)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QAbstractTableModel, QCoreApplication, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableView,
    QVBoxLayout,
    QWidget,
)

Index = QModelIndex | QPersistentModelIndex


def tr(text: str) -> str:
    return QCoreApplication.translate("SkippedFiles", text)


class SkippedFilesModel(QAbstractTableModel):
    """(path, reason) rows: File, Why it was skipped; each cell's whole text its tooltip."""

    def __init__(self, rows: Sequence[tuple[str, str]], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.rows = rows
        self.headers = (tr("File"), tr("Why it was skipped"))

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008  (Qt override)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008  (Qt override)
        return 0 if parent.isValid() else 2

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> str | None:  # Qt override
        if not index.isValid() or role not in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return None
        return self.rows[index.row()][index.column()]

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> str | None:  # Qt override
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.headers[section]
        return None


def skipped_files_dialog(rows: Sequence[tuple[str, str]], parent: QWidget) -> QDialog:
    """The list in a dialog of its own (deleted when closed), not yet shown."""
    dialog = QDialog(parent)
    dialog.setWindowTitle(tr("Skipped files"))
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    view = QTableView(dialog)  # (a tree view lays out every row when shown: 120 ms at 20,000)
    view.setModel(SkippedFilesModel(rows, view))
    view.verticalHeader().hide()
    view.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)  # (rows never measured one by one)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 6)
    view.setShowGrid(False)
    view.setWordWrap(False)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # (the whole path and reason: their tooltips)
    view.horizontalHeader().setStretchLastSection(True)
    view.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    view.setColumnWidth(0, 280)
    view.setAccessibleName(tr("Skipped files"))
    close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    close.rejected.connect(dialog.reject)
    layout = QVBoxLayout(dialog)
    layout.addWidget(QLabel(tr("These files are not used: each with the reason.")))
    layout.addWidget(view)
    layout.addWidget(close)
    dialog.resize(720, 360)
    return dialog


__all__ = ["SkippedFilesModel", "skipped_files_dialog"]
