"""The welcome panel: what the window shows instead of an empty transcript while no model is
loaded and no chat is open — start chatting with the starter model, open the Model Manager, or import
a file; it says which bundled starter is which and what to download next."""

from __future__ import annotations

import html

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from ember_chat.app.models.starter_names import model_label
from ember_chat.engine.models.starter import GEMMA_ALIAS
from ember_chat.engine.models.starter import starter_available as installed


def starters_note(base_available: bool) -> str:
    """The note under the starter button: which starter is which (translated when called)."""
    chat = QCoreApplication.translate(
        "WelcomePanel",
        "The starter, SmolLM2 135M Instruct, is a tiny chat model: fine for a first try and short answers, "
        "but often wrong on facts.",
    )
    if not base_available:
        return chat
    base = QCoreApplication.translate(
        "WelcomePanel",
        "Also included: <b>{name}</b> in the model picker, a <i>base</i> model that "
        "continues text rather than answering; use it for text completion.",
    ).format(name=html.escape(model_label(GEMMA_ALIAS)))  # (as the picker lists it)
    return f"{chat} {base}"


def next_step_note() -> str:
    """What to download next (translated when called)."""
    return QCoreApplication.translate(
        "WelcomePanel",
        "<b>What to download next:</b> a bigger instruct model answers far better. Llama 3.2 3B Instruct "
        "(about 2 GB) runs well on most laptops; Qwen 2.5 1.5B Instruct (about 1 GB) if memory is short. "
        "Find them in the Model Manager.",
    )


class WelcomePanel(QWidget):
    load_starter = Signal()
    open_manager = Signal()
    import_file = Signal()

    def __init__(
        self, starter_available: bool, parent: QWidget | None = None, base_available: bool | None = None
    ) -> None:
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
        if base_available is None:
            base_available = installed(GEMMA_ALIAS)
        self.starter = QPushButton(self.tr("Start chatting with the starter model (SmolLM2 135M Instruct, 98 MB)"))
        self.starter.setAccessibleName(self.tr("Load the starter model"))
        self.starter.setToolTip(self.tr("Load the small chat model that comes with Ember: nothing to download"))
        self.starter.clicked.connect(self.load_starter)
        self.starter.setVisible(starter_available)
        self.note = self._note(starters_note(base_available))
        self.note.setVisible(starter_available)
        self.next_step = self._note(next_step_note())
        self.manager = QPushButton(self.tr("Find and download a model… (Model Manager)"))
        self.manager.setAccessibleName(self.tr("Open the Model Manager"))
        self.manager.setToolTip(self.tr("Search Hugging Face for models and download one"))
        self.manager.clicked.connect(self.open_manager)
        self.importer = QPushButton(self.tr("Import a .gguf file from this computer…"))
        self.importer.setAccessibleName(self.tr("Import a model file"))
        self.importer.setToolTip(self.tr("Use a model file you already have"))
        self.importer.clicked.connect(self.import_file)
        for w in (self.starter, self.note, self.next_step, self.manager, self.importer):
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

    @staticmethod
    def _note(text: str) -> QLabel:
        label = QLabel(text)
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setWordWrap(True)
        label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        return label
