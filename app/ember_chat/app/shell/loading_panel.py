"""What the centre of the window shows while a model loads and no chat is open: which model, how big,
how far along, and a way to cancel (instead of an empty transcript)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from ember_chat.app.qt.centred import centre_column


class LoadingPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("loadingPanel")
        self.setAccessibleName(self.tr("Loading a model"))
        column = QVBoxLayout()
        column.setSpacing(12)
        self.title = QLabel()
        big = self.title.font()  # relative to the system font, so it scales with it
        big.setPointSizeF(big.pointSizeF() * 1.3)
        big.setBold(True)
        self.title.setFont(big)
        self.title.setWordWrap(True)
        self.title.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        self.note = QLabel(
            self.tr(
                "Ember reads the model into memory: a few seconds for a small model, a minute or more for a "
                "large one. You can write and send your message meanwhile: it goes as soon as the model is ready."
            )
        )
        self.note.setWordWrap(True)
        self.note.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setAccessibleName(self.tr("Model load progress"))
        self.cancel = QPushButton(self.tr("Cancel loading"))
        self.cancel.setAccessibleName(self.tr("Cancel loading"))
        self.cancel.setToolTip(self.tr("Stop loading the model"))
        self.setFocusProxy(self.cancel)
        for w in (self.title, self.note, self.progress):
            column.addWidget(w)
        column.addWidget(self.cancel, 0, Qt.AlignmentFlag.AlignHCenter)
        centre_column(self, column)

    def show_model(self, text: str) -> None:
        """`text`: what is loading ("Loading NAME (SIZE)…")."""
        self.title.setText(text)
        self.progress.setValue(0)
