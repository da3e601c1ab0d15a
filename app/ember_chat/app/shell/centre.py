"""The centre of the window, under the model bar and the banner: the transcript, or in its place the
welcome panel (no model loaded, no chat open) or the loading panel (a model loads, no chat open), and
the greeting over the transcript (an empty chat with a model loaded); the message box below."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QStackedWidget, QVBoxLayout, QWidget

from ember_chat.app.engine_link.model_names import model_label
from ember_chat.app.shell.loading_panel import LoadingPanel
from ember_chat.app.shell.welcome import ChatGreeting, WelcomePanel, greets_as_chat
from ember_chat.app.transcript.view import TranscriptView
from ember_chat.engine.inference.backend import ModelDescription


class CentrePages(QStackedWidget):
    def __init__(self, transcript: TranscriptView, welcome: WelcomePanel, loading_panel: LoadingPanel) -> None:
        super().__init__()
        self.transcript = transcript
        self.welcome = welcome
        self.loading_panel = loading_panel
        # an empty chat with a model loaded: its greeting over the transcript (not a page of its own, so
        # the transcript stays where the chat is read and the keyboard goes)
        self.greeting = ChatGreeting(transcript.viewport())
        self.greeting.hide()
        transcript.viewport().installEventFilter(self)  # (it covers the viewport: resized with it)
        self.addWidget(transcript)
        self.addWidget(welcome)
        self.addWidget(loading_panel)

    def show_for(self, no_chat: bool, model: ModelDescription | None, loading: bool, loading_name: str | None) -> None:
        """With no chat open: the welcome panel while no model is loaded, the loading panel while one
        loads. The transcript otherwise."""
        first_run = model is None and not loading and no_chat
        page = self.loading_panel if no_chat and loading_name is not None else self.transcript
        self.setCurrentWidget(self.welcome if first_run else page)
        greet = model is not None and no_chat and not loading and page is self.transcript
        if greet and model is not None:
            self.greeting.show_model(model_label(model.name), greets_as_chat(model))
            self.greeting.setGeometry(self.transcript.viewport().rect())
        self.greeting.setVisible(greet)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.transcript.viewport() and event.type() == QEvent.Type.Resize:
            self.greeting.setGeometry(self.transcript.viewport().rect())
        return super().eventFilter(watched, event)


def centre_column(model_bar: QWidget, banner: QWidget, pages: CentrePages, composer: QWidget) -> QWidget:
    """The window's centre column, top to bottom: the model bar, the banner, the pages, the message box."""
    centre = QWidget()
    column = QVBoxLayout(centre)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(0)
    column.addWidget(model_bar)
    column.addWidget(banner)
    column.addWidget(pages, 1)
    column.addWidget(composer)
    return centre
