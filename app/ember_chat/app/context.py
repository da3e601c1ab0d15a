"""What every feature of the window is built from (`AppContext`): the chat store, the link to the
engine, the settings (read and saved), the background task runner, the notifier that puts an error
or a notice in the window's banner, the model library and the stores beside it. A feature's
controller takes the context and the widgets it drives — never the main window — and talks to other
features by signals wired in one place (the shell's composition, shell/compose.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QUrl, Signal

from ember_chat.app.engine_link.bridge import EngineBridge
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.connections import ConnectionStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.model_settings import ModelSettingsStore
from ember_chat.engine.storage.settings import Settings, SettingsFile


class Notifier(QObject):
    """An error or a notice for the window's banner, from any feature (GUI thread). `cause`: what ends
    the message (see shell/banner.Banner.end); without one it stays until dismissed."""

    error = Signal(str, str)  # message, cause
    notice = Signal(str, str)

    def show_error(self, message: str, cause: str = "") -> None:
        self.error.emit(message, cause)

    def show_notice(self, message: str, cause: str = "") -> None:
        self.notice.emit(message, cause)


@dataclass
class AppContext:
    store: ConversationStore
    bridge: EngineBridge
    library: ModelLibrary
    settings_file: SettingsFile
    settings: Settings  # the settings now (a feature that changes one replaces it, then saves the file)
    tasks: TaskRunner
    notifier: Notifier
    connections: ConnectionStore
    model_settings: ModelSettingsStore
    data_dir: Path
    # the system browser (tests put a recorder here)
    url_opener: Callable[[QUrl], object] = field(default=lambda url: False)

    def save_settings(self, settings: Settings) -> None:
        """Make `settings` the settings now and write them to their file."""
        self.settings = settings
        self.settings_file.save(settings)
