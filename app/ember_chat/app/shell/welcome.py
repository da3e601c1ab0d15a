"""The welcome panel: what the window shows instead of an empty transcript while no model is
loaded and no chat is open — load the starter model, open the Model Manager, or import a file."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget


def base_model_note() -> str:
    """The note under the starter button (translated when called, not at import)."""
    return QCoreApplication.translate(
        "WelcomePanel",
        "Gemma 3 270M is a small <i>base</i> model: it continues text rather than following instructions, so "
        "its chat answers are odd. For real conversations, download an instruct model in the Model Manager.",
    )


class WelcomePanel(QWidget):
    load_starter = Signal()
    open_manager = Signal()
    import_file = Signal()

    def __init__(self, starter_available: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        self.setAccessibleName(self.tr("Welcome"))
        outer = QVBoxLayout(self)
        outer.addStretch(1)
        column = QVBoxLayout()
        column.setSpacing(12)
        title = QLabel(self.tr("Welcome to Ember"))
        big = title.font()  # relative to the system font, so it scales with it
        big.setPointSizeF(big.pointSizeF() * 1.6)
        big.setBold(True)
        title.setFont(big)
        title.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        intro = QLabel(
            self.tr("Ember runs language models on this computer: nothing you write leaves it. Pick a model to start.")
        )
        intro.setWordWrap(True)
        intro.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        column.addWidget(title)
        column.addWidget(intro)
        self.starter = QPushButton(self.tr("Load the starter model (Gemma 3 270M, 250 MB, no download)"))
        self.starter.setAccessibleName(self.tr("Load the starter model"))
        self.starter.setToolTip(self.tr("Load the small model that comes with Ember"))
        self.starter.clicked.connect(self.load_starter)
        self.starter.setVisible(starter_available)
        self.note = QLabel(base_model_note())
        self.note.setWordWrap(True)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.note.setVisible(starter_available)
        self.manager = QPushButton(self.tr("Find and download a model… (Model Manager)"))
        self.manager.setAccessibleName(self.tr("Open the Model Manager"))
        self.manager.setToolTip(self.tr("Search Hugging Face for models and download one"))
        self.manager.clicked.connect(self.open_manager)
        self.importer = QPushButton(self.tr("Import a .gguf file from this computer…"))
        self.importer.setAccessibleName(self.tr("Import a model file"))
        self.importer.setToolTip(self.tr("Use a model file you already have"))
        self.importer.clicked.connect(self.import_file)
        for w in (self.starter, self.note, self.manager, self.importer):
            column.addWidget(w)
        holder = QWidget()
        holder.setLayout(column)
        holder.setMaximumWidth(560)  # narrower on a small screen: the labels wrap
        holder.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        # centred by stretches, not an alignment flag: so the wrapped labels get the height they need
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(holder)
        row.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)
