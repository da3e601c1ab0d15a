"""The main window: conversations on the left, the transcript and composer in the centre, the model
bar on top, the side panel (parameters, live metrics) on the right, and the menus. Its frame only: the
features are built and wired by shell/compose.py (the composition root), under the names below."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QSettings, QUrl, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QApplication, QMainWindow

from ember_chat.app.chat_list.view import ConversationList
from ember_chat.app.context import AppContext
from ember_chat.app.conversation.composer import Composer
from ember_chat.app.models.model_bar import ModelBar
from ember_chat.app.shell.banner import Banner
from ember_chat.app.shell.centre import CentrePages, centre_column
from ember_chat.app.shell.loading_panel import LoadingPanel
from ember_chat.app.shell.navigation import focus_pane
from ember_chat.app.shell.side_fit import SidePanelFit, WindowSplitter
from ember_chat.app.shell.welcome import WelcomePanel
from ember_chat.app.shell.window_state import relayout, restore_window, save_window
from ember_chat.app.side_panel.panel import SidePanel
from ember_chat.app.style.theme import app_icon, apply_theme
from ember_chat.app.transcript.view import TranscriptView
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.models.download_queue import DownloadQueue
from ember_chat.engine.models.starter import starter_available
from ember_chat.engine.storage.settings import Settings

if TYPE_CHECKING:  # the features, set by shell/compose.py
    from ember_chat.app.backups.dialog import WindowBackups
    from ember_chat.app.chat_list.actions import ChatActions
    from ember_chat.app.chat_list.undo import UndoActions
    from ember_chat.app.compare.actions import CompareActions
    from ember_chat.app.conversation.attach import WindowAttachments
    from ember_chat.app.conversation.compose import ComposerActions
    from ember_chat.app.conversation.controller import ChatController
    from ember_chat.app.importing.dialog import ImportChats
    from ember_chat.app.models.actions import ModelActions
    from ember_chat.app.models.kv_caches import WindowKvCaches
    from ember_chat.app.presets.actions import WindowPresets
    from ember_chat.app.projects.actions import WindowProjects
    from ember_chat.app.server.api_control import ApiServerControl
    from ember_chat.app.tools.actions import WindowTools
    from ember_chat.app.transcript.font_size import TranscriptFontSize
    from ember_chat.app.voice.conversation import VoiceConversation
    from ember_chat.app.voice.dictation import DictationControl
    from ember_chat.app.voice.read_aloud import ReadAloud


class Parts(Protocol):
    """What the window asks of its features together (shell/compose.py's Composition)."""

    def stop(self) -> None: ...
    def set_theme(self, name: str) -> None: ...
    def shutdown(self) -> None: ...
    def close(self) -> None: ...  # after the window closed
    def join_background(self, timeout: float) -> bool: ...


class MainWindow(QMainWindow):
    """The window's model actions are `self.models` (models/actions.py), its chat actions `self.chats`
    (chat_list/actions.py), its message box's `self.compose` (conversation/compose.py): shell/compose.py
    builds them; what callers reach on the window is delegated to them below."""

    model_state_changed = Signal(str)  # a ModelState (GUI thread)
    models_listed = Signal()  # the picker shows the models just listed (GUI thread)
    load_settings_opened = Signal()  # the ⚙ dialog is open, as self.models.load_settings (GUI thread)

    # the features (shell/compose.py builds them, after the frame)
    parts: Parts
    models: ModelActions
    font_size: TranscriptFontSize
    controller: ChatController
    undo: UndoActions
    attach: WindowAttachments
    chats: ChatActions
    compose: ComposerActions
    tools: WindowTools
    presets: WindowPresets
    projects: WindowProjects
    compare: CompareActions
    read_aloud: ReadAloud
    dictation: DictationControl
    voice: VoiceConversation
    api: ApiServerControl
    backups: WindowBackups
    kv_caches: WindowKvCaches
    importer: ImportChats
    side_fit: SidePanelFit

    def __init__(self, ctx: AppContext, window_state: QSettings, downloads: DownloadQueue | None = None) -> None:
        """`ctx`: what every feature is built from (compose.app_context); the window's own names for its
        parts below."""
        super().__init__()
        self._unasked = False  # end_session: the close asks nothing
        self.downloads = downloads
        self.setWindowTitle(self.tr("Ember"))
        self.setWindowIcon(app_icon())
        self.ctx = ctx
        ctx.tasks.setParent(self)  # (they live as long as the window)
        ctx.notifier.setParent(self)
        self.store = ctx.store
        self.bridge = ctx.bridge
        self.library = ctx.library
        self.settings_file = ctx.settings_file
        self.window_state = window_state
        self.connections = self.ctx.connections
        self.data_dir = self.ctx.data_dir
        self.model_settings = self.ctx.model_settings
        self.tasks = self.ctx.tasks
        self.model_bar = ModelBar()
        self.model_picker = self.model_bar.picker
        self.model_status = self.model_bar.status

        self.colors = apply_theme(QApplication.instance(), self.settings.theme)
        self.conversations = ConversationList()
        self.transcript = TranscriptView(self.colors)
        self.composer = Composer()
        self.side = SidePanel()
        self.banner = Banner(self.colors)

        self.welcome = WelcomePanel(starter_available())
        self.loading_panel = LoadingPanel()  # which model loads, while no chat is open
        self.centre_stack = CentrePages(self.transcript, self.welcome, self.loading_panel)  # (shell/centre.py)
        self.greeting = self.centre_stack.greeting
        centre = centre_column(self.model_bar, self.banner, self.centre_stack, self.composer)
        self.splitter = WindowSplitter(self.conversations, centre, self.side)  # (side_fit.py)
        self.setCentralWidget(self.splitter)

    @property
    def settings(self) -> Settings:
        """The settings now (the context's: a feature that changes one replaces them there)."""
        return self.ctx.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.ctx.settings = value

    @property
    def model(self) -> ModelDescription | None:
        """The model loaded (the model actions' own; None while none is)."""
        return self.models.model

    @property
    def url_opener(self) -> Callable[[QUrl], object]:
        return self.ctx.url_opener

    @url_opener.setter
    def url_opener(self, value: Callable[[QUrl], object]) -> None:
        self.ctx.url_opener = value

    # ----- window state
    def restore_state(self) -> None:
        restore_window(self, self.window_state, self.splitter, self.side, self.side_fit)

    def save_state(self) -> None:
        save_window(self, self.window_state, self.splitter, self.side_fit, self.controller.conversation_id)

    def show_error(self, message: str, cause: str = "") -> None:
        """In the banner, as any feature's error (see Composition.show_error)."""
        self.ctx.notifier.show_error(message, cause)

    # ----- the menus' entries (shell/menus.py)
    def stop(self) -> None:
        """Chat ▸ Stop answer, the message box's Stop (see Composition.stop)."""
        self.parts.stop()

    def toggle_side_panel(self) -> None:
        """View ▸ Side panel: on a narrow window too, where it hid by itself (side_fit.py)."""
        self.side_fit.toggle()
        relayout(self.splitter)  # the window's minimum size follows at once

    def set_theme(self, name: str) -> None:
        """View ▸ Theme (see Composition.set_theme)."""
        self.parts.set_theme(name)

    def show_shortcuts(self) -> None:
        from ember_chat.app.shell.shortcuts_dialog import ShortcutsDialog

        self._shortcuts = ShortcutsDialog(self.menuBar(), self)  # kept for tests and while open
        self._shortcuts.open()

    def focus_pane(self, pane: str) -> None:
        """View ▸ Go to: move the keyboard focus to a part of the window."""
        focus_pane(self, pane)

    # ----- close
    def shutdown(self) -> None:
        """Every feature stopped (see Composition.shutdown). Idempotent."""
        self.parts.shutdown()

    def end_session(self) -> None:
        """The system asks Ember to end (a logout, `kill`: qt/session_end.py): the window closes as it does
        when closed, but asks nothing — no one is there to answer — and keeps what is saved (a project's
        settings not saved are left as they were, the API server stops)."""
        self._unasked = True
        self.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # Qt override
        asks = not self._unasked
        if asks and self.projects.ask_before_quit(self.close):  # a project's settings have changes not saved
            event.ignore()
            return
        if asks and self.api.ask_before_quit(self.close):  # the API server runs: other programs may use it
            event.ignore()
            return
        self.save_state()
        self.hide()  # (what follows may wait: the answer in progress stopped, caches written to disk)
        self.parts.close()  # (see Composition.close)
        event.accept()

    def join_background(self, timeout: float) -> bool:
        """Wait until every background thread the window started has ended (tests, after close)."""
        return self.parts.join_background(timeout)
