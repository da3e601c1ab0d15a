"""Settings ▸ Tools ▸ Built-in tools: Ember's own tools, each off until the user turns it on — the date
and time, a calculator (arithmetic only: nothing is evaluated as code), and reading files from folders
the user picked (read-only; nothing outside those folders)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.style.theme import active_colors
from ember_chat.engine.tools.config import BuiltinToolsConfig


class BuiltinPanel(QWidget):
    changed = Signal(object)  # BuiltinToolsConfig

    def __init__(self, config: BuiltinToolsConfig, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.config = config
        self.datetime = QCheckBox(self.tr("Current date and time"))
        self.datetime.setToolTip(self.tr("The local date, time, weekday and time zone"))
        self.calculator = QCheckBox(self.tr("Calculator"))
        self.calculator.setToolTip(self.tr("Arithmetic and math functions; nothing is run as code"))
        self.files = QCheckBox(self.tr("Read files in the folders below"))
        self.files.setToolTip(self.tr("List and read text files, only inside these folders, never change them"))
        self.folders = QListWidget()
        self.folders.setAccessibleName(self.tr("Folders the model may read"))
        self.folders.setAccessibleDescription(self.tr("Read files lists and reads files only inside these folders"))
        self.folders.currentRowChanged.connect(lambda _row: self._update_buttons())
        self.add_button = QPushButton(self.tr("Add folder…"))
        self.add_button.setToolTip(self.tr("Pick a folder whose files the model may list and read"))
        self.add_button.clicked.connect(self.pick_folder)
        self.remove_button = QPushButton(self.tr("Remove folder"))
        self.remove_button.setToolTip(self.tr("The model can no longer read the selected folder"))
        self.remove_button.clicked.connect(self.remove_folder)
        self.folder_dialog: QFileDialog | None = None
        note = QLabel(
            self.tr(
                "Built-in tools are read-only. Each chat chooses which tools it offers to the model "
                "(the Tools button by the message box)."
            )
        )
        note.setWordWrap(True)
        note.setStyleSheet(f"color:{active_colors().secondary}")
        self.hint = QLabel()
        self.hint.setWordWrap(True)
        self.hint.setAccessibleName(self.tr("About the folders"))
        buttons = QHBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        outer = QVBoxLayout(self)
        outer.addWidget(self.datetime)
        outer.addWidget(self.calculator)
        outer.addWidget(self.files)
        outer.addWidget(self.folders, 1)
        outer.addLayout(buttons)
        outer.addWidget(self.hint)
        outer.addWidget(note)
        self.set_config(config)
        for box in (self.datetime, self.calculator, self.files):
            box.toggled.connect(lambda _on: self._emit())

    def set_config(self, config: BuiltinToolsConfig) -> None:
        self.config = config
        for box, on in (
            (self.datetime, config.datetime),
            (self.calculator, config.calculator),
            (self.files, config.files),
        ):
            box.blockSignals(True)
            box.setChecked(on)
            box.blockSignals(False)
        self.folders.clear()
        self.folders.addItems(list(config.folders))
        self._update_buttons()

    def _update_buttons(self) -> None:
        self.remove_button.setEnabled(self.folders.currentRow() >= 0)
        if self.files.isChecked() and not self.config.folders:
            self.hint.setText(self.tr("Add a folder: until then there is nothing to read."))
            self.hint.setStyleSheet(f"color:{active_colors().warning}")
        else:
            self.hint.setText("")

    def _emit(self, folders: tuple[str, ...] | None = None) -> None:
        config = BuiltinToolsConfig(
            datetime=self.datetime.isChecked(),
            calculator=self.calculator.isChecked(),
            files=self.files.isChecked(),
            folders=self.config.folders if folders is None else folders,
        )
        if config != self.config:
            self.config = config
            self._update_buttons()
            self.changed.emit(config)

    def pick_folder(self) -> QFileDialog:
        """A folder picker that does not block the window; the folder chosen is added to the list."""
        dialog = QFileDialog(self, self.tr("A folder the model may read"))
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.fileSelected.connect(self.add_folder)
        self.folder_dialog = dialog
        dialog.open()
        return dialog

    def add_folder(self, folder: str) -> None:
        if not folder or folder in self.config.folders:
            return
        self.folders.addItem(folder)
        if not self.files.isChecked():  # a folder picked means reading it is wanted
            self.files.blockSignals(True)
            self.files.setChecked(True)
            self.files.blockSignals(False)
        self._emit((*self.config.folders, folder))

    def remove_folder(self) -> None:
        row = self.folders.currentRow()
        if row < 0:
            return
        folder = self.folders.takeItem(row).text()
        self._emit(tuple(f for f in self.config.folders if f != folder))
