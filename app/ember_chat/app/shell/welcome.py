"""The welcome panel: what the window shows instead of an empty transcript while no model is
loaded and no chat is open — start chatting with the starter model, open the Model Manager, or import
a file; it says which bundled starter is which and what to download next."""

from __future__ import annotations

import html

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from ember_chat.app.engine_link.model_names import model_label
from ember_chat.app.qt.centred import centre_column
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.models.starter import GEMMA_ALIAS, find_starter
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
        centre_column(self, column, width=560)

    @staticmethod
    def _note(text: str) -> QLabel:
        label = QLabel(text)
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setWordWrap(True)
        label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        return label


def chat_starters() -> list[str]:
    """Example prompts for a chat model: questions it answers (translated when called)."""
    return [
        QCoreApplication.translate("ChatGreeting", "Explain photosynthesis in simple words"),
        QCoreApplication.translate("ChatGreeting", "Write a short poem about the sea"),
        QCoreApplication.translate("ChatGreeting", "Give me three ideas for a rainy Sunday"),
    ]


def text_starters() -> list[str]:
    """Example prompts for a base model: sentence starts it continues (translated when called)."""
    return [
        QCoreApplication.translate("ChatGreeting", "Once upon a time, in a small village by the sea,"),
        QCoreApplication.translate("ChatGreeting", "The three most important things to know about volcanoes are"),
        QCoreApplication.translate("ChatGreeting", "Dear diary, today I finally"),
    ]


def greets_as_chat(model: ModelDescription) -> bool:
    """Whether `model` is greeted as a chat model: a starter by what it is for (the base starter's GGUF
    carries a chat template it was never tuned for), any other by whether its GGUF has a chat template."""
    starter = find_starter(model.name)
    if starter is not None:
        return starter.role.startswith("chat")
    return model.has_chat_template


class ChatGreeting(QWidget):
    """What an empty chat shows over the transcript once a model is loaded: the model's name, what it
    is good at (answering in a chat, or continuing text: a base model answers questions badly) and three
    example prompts that fill the message box. The window hides it once the chat has a message."""

    prompt_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatGreeting")
        self.setAccessibleName(self.tr("New chat"))
        self.setAutoFillBackground(True)  # over the empty transcript, in its colours
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.title = QLabel()
        big = self.title.font()
        big.setPointSizeF(big.pointSizeF() * 1.4)
        big.setBold(True)
        self.title.setFont(big)
        self.title.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        self.title.setWordWrap(True)
        self.good_at = QLabel()
        self.good_at.setWordWrap(True)
        self.good_at.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        self.good_at.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.examples: list[QPushButton] = []
        column = QVBoxLayout()
        column.setSpacing(10)
        column.addWidget(self.title)
        column.addWidget(self.good_at)
        for _ in range(3):
            button = QPushButton()
            button.setToolTip(self.tr("Put this in the message box"))
            button.setAccessibleName(self.tr("Example prompt"))  # (with its text once a model greets)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _checked=False, b=button: self.prompt_chosen.emit(b.text()))
            self.examples.append(button)
            column.addWidget(button)
        centre_column(self, column)

    def show_model(self, name: str, chat: bool) -> None:
        """Greet with the model called `name` (its display name): a chat model (`chat`) answers
        questions, a base model continues the text it is given."""
        self.title.setText(name)
        if chat:
            self.good_at.setText(self.tr("A chat model: ask it a question or give it a task. Try one of these:"))
            prompts = chat_starters()
        else:
            self.good_at.setText(
                self.tr(
                    "A base model: it continues the text you give it rather than answering. "
                    "Start a sentence and it writes on; try one of these:"
                )
            )
            prompts = text_starters()
        for button, prompt in zip(self.examples, prompts, strict=True):
            button.setText(prompt)
            button.setAccessibleName(self.tr("Example prompt: {prompt}").format(prompt=prompt))
