"""The welcome panel: what the window shows instead of an empty transcript while no model is
loaded and no chat is open — load the starter model, open the Model Manager, or import a file."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

BASE_MODEL_NOTE = (
    "Gemma 3 270M is a small <i>base</i> model: it continues text rather than following instructions, so "
    "its chat answers are odd. For real conversations, download an instruct model in the Model Manager."
)


class WelcomePanel(QWidget):
    load_starter = Signal()
    open_manager = Signal()
    import_file = Signal()

    def __init__(self, starter_available: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        self.setAccessibleName("Welcome")
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        column = QVBoxLayout()
        column.setSpacing(12)
        title = QLabel("<h2>Welcome to Ember</h2>")
        title.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        intro = QLabel(
            "Ember runs language models on this computer: nothing you write leaves it. Pick a model to start."
        )
        intro.setWordWrap(True)
        intro.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        column.addWidget(title)
        column.addWidget(intro)
        self.starter = QPushButton("Load the starter model (Gemma 3 270M, 250 MB, no download)")
        self.starter.setAccessibleName("Load the starter model")
        self.starter.clicked.connect(self.load_starter)
        self.starter.setVisible(starter_available)
        self.note = QLabel(BASE_MODEL_NOTE)
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: palette(placeholder-text);")
        self.note.setVisible(starter_available)
        self.manager = QPushButton("Find and download a model… (Model Manager)")
        self.manager.setAccessibleName("Open the Model Manager")
        self.manager.clicked.connect(self.open_manager)
        self.importer = QPushButton("Import a .gguf file from this computer…")
        self.importer.setAccessibleName("Import a model file")
        self.importer.clicked.connect(self.import_file)
        for w in (self.starter, self.note, self.manager, self.importer):
            column.addWidget(w)
        holder = QWidget()
        holder.setLayout(column)
        holder.setFixedWidth(560)
        # centred by stretches, not an alignment flag: so the wrapped labels get the height they need
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(holder)
        row.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)
