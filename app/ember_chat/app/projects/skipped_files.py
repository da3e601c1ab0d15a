"""The Knowledge tab's *Show skipped files…*: each file of a project's sources that is not used, with the
reason, and *Try again* for the selected ones or all (read again at once, whatever the reason). A model
over the list (a view asks only for the rows it shows), so a folder of 50,000 skipped files
opens as fast as one of ten: the list built item by item stalled the window for close to half a second
(a table view: a tree view lays out every row as it is shown). Its rows keep one line each (never
measured one by one); the chosen row's whole path and reason are under the list, wrapped (a reason
is a sentence or two: a narrow column cut it mid-text), and in each cell's tooltip."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import (
    QAbstractTableModel,
    QCoreApplication,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
)
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

from ember_chat.app.projects.knowledge_rows import shown

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
        return shown(self.rows[index.row()][index.column()])  # (Try again is given the path as it is)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> str | None:  # Qt override
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.headers[section]
        return None


def skipped_files_dialog(
    rows: Sequence[tuple[str, str]], parent: QWidget, retry: Callable[[list[str]], None]
) -> QDialog:
    """The list in a dialog of its own (deleted when closed), not yet shown. Its *Try again* gives
    `retry` the files selected (all of them when none is) and closes it: they are read again at once,
    the Knowledge tab showing the progress."""
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
    view.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # (the whole path and reason: under the list, tooltips)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)  # (both: drag the line)
    view.horizontalHeader().setStretchLastSection(True)
    view.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    view.setColumnWidth(0, 280)
    view.setAccessibleName(tr("Skipped files"))
    close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
    close.rejected.connect(dialog.reject)
    again = close.addButton(tr("Try all again"), QDialogButtonBox.ButtonRole.ActionRole)
    again.setObjectName("try-again")
    again.setAutoDefault(False)  # (Enter closes the list: reading again is asked for by its click)
    again.setToolTip(
        tr(
            "Reads these files again now, the selected ones or all of them. A file skipped for its content "
            "(a password, not text, too large) is skipped again until it changes."
        )
    )
    again.setEnabled(bool(rows))

    def chosen() -> list[str]:
        picked = sorted({i.row() for i in view.selectionModel().selectedRows()})
        return [rows[r][0] for r in picked] if picked else [path for path, _ in rows]

    def selection_changed() -> None:
        some = view.selectionModel().hasSelection()
        again.setText(tr("Try selected again") if some else tr("Try all again"))

    def try_again() -> None:
        retry(chosen())
        dialog.accept()

    whole = QLabel(dialog)  # (the chosen row's path and reason, whole: the cells cut them to one line)
    whole.setObjectName("skipped-reason")
    whole.setWordWrap(True)
    whole.setTextFormat(Qt.TextFormat.PlainText)  # (file names and reasons: never markup)
    whole.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    whole.setAccessibleName(tr("The chosen file and why it was skipped"))

    def current_changed(current: QModelIndex) -> None:
        path, reason = rows[current.row()] if current.isValid() else ("", "")
        whole.setText(f"{shown(path)}\n{shown(reason)}" if current.isValid() else "")

    view.selectionModel().selectionChanged.connect(selection_changed)
    view.selectionModel().currentChanged.connect(current_changed)
    again.clicked.connect(try_again)
    if rows:  # (the first row's reason shown at once, nothing selected: Try all again stays all)
        view.selectionModel().setCurrentIndex(view.model().index(0, 0), QItemSelectionModel.SelectionFlag.NoUpdate)
    layout = QVBoxLayout(dialog)
    layout.addWidget(QLabel(tr("These files are not used: each with the reason (the chosen one's whole, below).")))
    layout.addWidget(view, 1)
    layout.addWidget(whole)
    layout.addWidget(close)
    dialog.resize(720, 360)
    return dialog


__all__ = ["SkippedFilesModel", "skipped_files_dialog"]
