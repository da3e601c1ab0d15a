"""The main window: conversations on the left, the transcript and composer in the centre, the model
bar on top, the side panel (parameters, live metrics) on the right, and the menus."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSettings, QSize, QUrl, Signal, Slot
from PySide6.QtGui import QCloseEvent, QDesktopServices, QTextCursor
from PySide6.QtWidgets import (
    QApplication,
    QMainWindow,
    QMessageBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.backups.dialog import WindowBackups
from ember_chat.app.chat_list.actions import ChatActions
from ember_chat.app.chat_list.undo import UndoActions
from ember_chat.app.compare.actions import CompareActions
from ember_chat.app.context import AppContext, Notifier
from ember_chat.app.conversation.attach import WindowAttachments
from ember_chat.app.conversation.compose import ComposerActions
from ember_chat.app.conversation.composer import Composer, ConversationList
from ember_chat.app.conversation.controller import ChatController
from ember_chat.app.engine_link.bridge import EngineBridge
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.importing.dialog import ImportChats
from ember_chat.app.models.actions import BenchmarkWindow, ModelActions
from ember_chat.app.models.kv_caches import WindowKvCaches
from ember_chat.app.models.model_bar import ModelBar
from ember_chat.app.models.starter_names import model_label
from ember_chat.app.presets.actions import WindowPresets
from ember_chat.app.server.api_control import ApiServerControl
from ember_chat.app.shell.banner import Banner
from ember_chat.app.shell.loading_panel import LoadingPanel
from ember_chat.app.shell.menus import about_text, build_menus
from ember_chat.app.shell.navigation import focus_pane, set_tab_order
from ember_chat.app.shell.side_fit import SidePanelFit, WindowSplitter
from ember_chat.app.shell.store_watch import StoreWatch
from ember_chat.app.shell.welcome import ChatGreeting, WelcomePanel, greets_as_chat
from ember_chat.app.shell.window_size import default_geometry, default_splitter_sizes, grows_back
from ember_chat.app.side_panel.panel import SidePanel
from ember_chat.app.style.icons import themed_icon
from ember_chat.app.style.theme import app_icon, apply_theme
from ember_chat.app.tools.actions import WindowTools
from ember_chat.app.tools.choices import ComposerRow
from ember_chat.app.transcript.font_size import TranscriptFontSize
from ember_chat.app.transcript.view import TranscriptView
from ember_chat.engine.core.params import SamplingParams
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.models.download_queue import DownloadQueue
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.models.starter import STARTER_ALIAS, starter_available
from ember_chat.engine.storage.connections import ConnectionStore
from ember_chat.engine.storage.conversations import ConversationStore
from ember_chat.engine.storage.model_settings import ModelSettingsStore
from ember_chat.engine.storage.secrets import TokenStore
from ember_chat.engine.storage.settings import Settings, SettingsFile


class MainWindow(QMainWindow):
    """The window's model actions are `self.models` (models/actions.py), its chat actions `self.chats`
    (chat_list/actions.py), its message box's `self.compose` (conversation/compose.py); what callers reach on the
    window is delegated to them below."""

    model_state_changed = Signal(str)  # a ModelState (GUI thread)
    models_listed = Signal()  # the picker shows the models just listed (GUI thread)
    load_settings_opened = Signal()  # the ⚙ dialog is open, as self.models.load_settings (GUI thread)

    def __init__(
        self,
        store: ConversationStore,
        bridge: EngineBridge,
        library: ModelLibrary,
        settings_file: SettingsFile,
        window_state: QSettings,
        downloads: DownloadQueue | None = None,
        hub_endpoint: str | None = None,
        tokens: TokenStore | None = None,
        connections: ConnectionStore | None = None,
        startup_errors: list[str] | None = None,
        data_dir: Path | None = None,
        model_settings: ModelSettingsStore | None = None,
    ) -> None:
        """`startup_errors`: what went wrong while starting (a damaged chat database), for the banner."""
        super().__init__()
        self.downloads = downloads
        self.hub_endpoint = hub_endpoint
        self.tokens = tokens or TokenStore()
        self.setWindowTitle(self.tr("Ember"))
        self.setWindowIcon(app_icon())
        # what every feature is built from (context.py); the window's own names for its parts below
        self.ctx = AppContext(
            store=store,
            bridge=bridge,
            library=library,
            settings_file=settings_file,
            settings=settings_file.load(),
            tasks=TaskRunner(self),  # what the GUI thread must not wait on (see engine_link/tasks.py)
            notifier=Notifier(self),
            connections=connections or ConnectionStore(Path(settings_file.path).parent / "connections.json"),
            model_settings=model_settings
            or ModelSettingsStore(Path(settings_file.path).parent / "model_settings.json"),
            data_dir=data_dir or Path(settings_file.path).parent,
            url_opener=QDesktopServices.openUrl,  # the system browser (tests put a recorder here)
        )
        self.ctx.notifier.error.connect(self.show_error)
        self.ctx.notifier.notice.connect(self.show_notice)
        self.store = store
        self.bridge = bridge
        self.library = library
        self.settings_file = settings_file
        self.window_state = window_state
        self.connections = self.ctx.connections
        self.data_dir = self.ctx.data_dir
        self.model_settings = self.ctx.model_settings
        self.tasks = self.ctx.tasks
        self.model_bar = ModelBar()  # (laid out in _build_model_bar)
        self.models = ModelActions(  # the model loaded, the picker, the model dialogs (models/actions.py)
            self.ctx,
            model_bar=self.model_bar,
            after_stop=lambda action: self.controller.after_stop(action),  # (the parts below are built after it)
            context_length=lambda: self.side.params.context.value(),
            api_url=lambda: self.api.server.url if self.api.server is not None else None,
            benchmark=self._benchmark_dialog,
            tokens=self.tokens,
            downloads=downloads,
            hub_endpoint=hub_endpoint,
            dialog_parent=self,
        )

        self.colors = apply_theme(QApplication.instance(), self.settings.theme)
        self.conversations = ConversationList()
        self.transcript = TranscriptView(self.colors)
        self.font_size = TranscriptFontSize(self.ctx, self.transcript)  # View ▸ Bigger text / Smaller text
        self.transcript.writer.math.use_tasks(self.tasks)  # formulas: the typesetter imported off the GUI thread
        self.composer = Composer()
        self.side = SidePanel()
        self.banner = Banner(self.colors)

        centre = QWidget()
        cl = QVBoxLayout(centre)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self._build_model_bar())
        cl.addWidget(self.banner)
        self.welcome = WelcomePanel(starter_available())
        self.welcome.load_starter.connect(lambda: self.models.load_model(STARTER_ALIAS))
        self.welcome.open_manager.connect(self.models.open_model_manager)
        self.welcome.import_file.connect(self.models.import_model_file)
        # an empty chat with a model loaded: its greeting over the transcript (not a page of its own, so
        # the transcript stays where the chat is read and the keyboard goes)
        self.greeting = ChatGreeting(self.transcript.viewport())
        self.greeting.prompt_chosen.connect(self._use_example)
        self.greeting.hide()
        self.transcript.viewport().installEventFilter(self)  # (it covers the viewport: resized with it)
        self.centre_stack = QStackedWidget()
        self.centre_stack.addWidget(self.transcript)
        self.centre_stack.addWidget(self.welcome)
        self.loading_panel = LoadingPanel()  # which model loads, while no chat is open
        self.loading_panel.cancel.clicked.connect(self.models.unload_model)  # (cancels the load)
        self.model_bar.loading_shown.connect(self.loading_panel.title.setText)
        self.centre_stack.addWidget(self.loading_panel)
        cl.addWidget(self.centre_stack, 1)
        cl.addWidget(self.composer)

        self.splitter = WindowSplitter()  # (its minimum leaves the side panel out: side_fit.py)
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(centre)
        self.splitter.addWidget(self.side)
        # a wider or narrower window changes the chat list and the centre in proportion to their widths
        # (the chat list stayed ~200 px at 1920); the side panel keeps its own
        self.splitter.setStretchFactor(0, 1)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([200, 790, 290])  # (until the saved or default sizes: window_size.py)
        self.setCentralWidget(self.splitter)

        self.controller = ChatController(store, bridge, self._current_params)
        # the undo stack of the chat list's changes and the banner's Undo link (chat_list/undo.py)
        self.undo = UndoActions(self.ctx, self.controller, parent=self)
        self.attach = WindowAttachments(  # files and images in the chat (conversation/attach.py)
            self.ctx,
            Path(settings_file.path).parent,
            self.composer,
            self.side.params,
            self.controller,
            self.transcript,
            self.banner,
            model=lambda: self.model,
            drop_target=self,  # (files dropped anywhere on the window)
            drop_area=self.centre_stack,
        )
        self.chats = ChatActions(  # the chat list: open, search, organise, export (chat_list/actions.py)
            self.ctx,
            self.conversations,
            self.controller,
            self.undo,
            self.side.params,
            self.attach.store,
            dialog_parent=self,
            parent=self,
        )
        self.model_state_changed.connect(self.attach.on_model_state)  # (the chips counted with its tokenizer)
        self.compose = ComposerActions(  # sending and editing from the message box (conversation/compose.py)
            self.ctx,
            self.composer,
            self.controller,
            self.attach,
            self.banner,
            loading=lambda: self.models.loading,
            parent=self,
        )
        self.tools = WindowTools(  # MCP servers, built-in tools, the Tools button and each chat's choices
            self.ctx,
            Path(settings_file.path).parent,
            self,
            ComposerRow(self.composer, self.composer.attach_button, self.composer.editor, self.composer.button),
            shown_chat=lambda: self.controller.conversation_id,
        )
        self.controller.tool_session_for = self.tools.session_for  # a chat's tools, asked before each answer
        self.controller.chat_created.connect(self.tools.choices.on_chat_created)  # (a new chat's go with it)
        self.controller.thread_shown.connect(self.tools.choices.on_thread_shown)
        self.presets = WindowPresets(  # presets.json, new-chat defaults, `/`
            self.ctx,
            Path(settings_file.path).parent,
            self.side.params,
            self.composer.editor,
            loaded_name=lambda: self.models.loaded_name if self.model is not None else None,
            open_chat=lambda: self.controller.conversation_id,
            generating=lambda: self.controller.generating,
            parent=self,
        )
        self.model_state_changed.connect(self.presets.on_model_state)
        self.controller.thread_shown.connect(self.presets.on_thread_shown)  # (before the transcript shows it)
        self.compare = CompareActions(  # Compare… on a message (compare/actions.py)
            self.ctx,
            chat=self.controller,
            models=self.models,
            model=lambda: self.model,
            params=self.side.params,
            choices=self.model_bar.choices,
            colors=lambda: self.colors,  # (a theme switch replaces them)
            dialog_parent=self,
        )
        self.transcript.action.connect(self.compare.on_action)
        self.api = ApiServerControl(self.ctx, self.statusBar(), self, preset=self.presets.for_api)  # the API server
        # the daily backup (a worker thread) and Settings ▸ Backups…
        self.backups = WindowBackups(self.ctx, self, self.controller.after_stop, self._show_restored_chats)
        self.backups.restoring.connect(self.compare.forget)  # (a comparison writes its answers by id)
        self.kv_caches = WindowKvCaches(self.ctx, self)  # Settings ▸ Conversation caches… (saved KV snapshots)
        self.controller.generating_changed.connect(self.kv_caches.on_generating)  # its problems: said after an answer
        self.importer = ImportChats(self.ctx, self.attach.store, self, self.banner.set_action)  # File ▸ Import chats…
        self.importer.chats_added.connect(self.chats.reload_conversations)
        self.importer.reveal.connect(self.chats.reveal)  # (the banner's Open and Show Archived)
        self.importer.show_view.connect(self.chats.show_view)
        self._wire()
        build_menus(self)
        self.side_fit = SidePanelFit(self, self.splitter, self.side, self.side_action)  # hides it on a narrow window
        set_tab_order(self)
        self.apply_icons()
        self._apply_settings_defaults()
        self.chats.reload_conversations()
        self._restore_state()
        self.chats.reopen(self.window_state.value("open_chat"))  # the chat open when Ember quit
        self.set_model_state(ModelState.NONE)
        if self.settings.api_server:
            self.api.apply()
        errors = startup_errors or []
        problems = [  # damaged files set aside, bad entries kept aside in their file
            *settings_file.take_problems(),
            *self.connections.take_problems(),
            *self.model_settings.take_problems(),
            *self.tools.take_problems(),
            *self.presets.take_problems(),
        ]
        if errors:
            self.show_error(" ".join(errors + problems))
        elif problems:
            self.show_notice(" ".join(problems))
        self.models.reload_models()  # after the stores have said what was wrong: it reads them on another thread

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

    # ----- construction
    def _build_model_bar(self) -> QWidget:
        self.model_picker = self.model_bar.picker
        self.load_progress = self.model_bar.progress
        self.model_status = self.model_bar.status
        return self.model_bar

    def _benchmark_dialog(self) -> BenchmarkWindow:
        """Models ▸ Benchmark…: a new benchmark dialog, with today's models and connections."""
        from ember_chat.app.lab.benchmark_dialog import BenchmarkDialog

        ctx = self.ctx
        return BenchmarkDialog(
            ctx.library,
            ctx.settings,
            ctx.data_dir,
            ctx.connections,
            ctx.model_settings,
            self,
            service=ctx.bridge.service,  # each model measured with the engine to itself
        )

    def _wire(self) -> None:
        w = self.bridge
        # Bound methods of GUI-thread objects only: a lambda would run in the engine thread.
        m = self.models
        w.load_progress.connect(m.on_load_progress)
        w.loaded.connect(m.on_loaded)
        w.load_failed.connect(m.on_load_failed)
        w.unloaded.connect(m.on_unloaded)
        m.state_changed.connect(self.set_model_state)  # (first: the Model Manager follows what the window shows)
        m.progress.connect(self.loading_panel.progress.setValue)
        m.thinking_switch.connect(self.side.params.set_thinking_switch)
        m.pick_dropped.connect(self.compose.drop_queued)  # (a message sent meanwhile stays in the box)
        m.listed.connect(self.models_listed)
        m.load_settings_opened.connect(self.load_settings_opened)
        c = self.controller
        c.generating_changed.connect(self.composer.set_generating)
        c.generating_changed.connect(self._on_generating)
        c.error.connect(self._on_chat_error)
        c.streamed.connect(self._on_streamed)
        c.notice.connect(self.show_notice)
        c.retrying.connect(self._on_retrying)
        c.conversations_changed.connect(self.chats.on_conversations_changed)  # (only the open chat read again)
        c.delete_requested.connect(self.chats.organise.delete_message)  # (undoable)
        c.edit_requested.connect(self.compose.edit_message)
        self.font_size.resized.connect(c.refresh)  # View ▸ Bigger text: the thread written again at its size
        t, m = self.transcript, self.side.metrics  # what the controller says the views show
        c.thread_shown.connect(t.show_thread)
        c.jump_requested.connect(t.jump_to)
        c.thinking_toggled.connect(t.toggle_thinking)
        c.stream_began.connect(t.begin_stream)
        c.stream_resumed.connect(t.resume_stream)
        c.stream_rejoined.connect(t.rejoin_stream)
        c.stream_appended.connect(t.append_stream)
        c.call_streamed.connect(t.streaming.show_call)
        c.stream_ended.connect(t.end_stream)
        c.metrics_began.connect(m.begin)
        c.metrics_live.connect(m.update_live)
        c.metrics_prefill.connect(m.show_prefill)
        c.metrics_prefill.connect(t.streaming.show_prefill)  # (and in the answer's card)
        c.metrics_finished.connect(m.finish)
        t.action.connect(c._on_action)
        self.composer.send.connect(self.compose.send)
        self.model_state_changed.connect(self.compose.load_ended)  # (a message sent while a model loads)
        c.generating_changed.connect(self.compose.answer_ended)  # (and one sent while an answer streams)
        self.composer.attachments.settled.connect(self.compose.attachments_settled)  # (and its files counted)
        self.composer.stop.connect(self.stop)
        self.composer.cancel_edit.connect(self.compose.end_edit)
        ch = self.chats  # what showing another chat (or a new one, or none) does to the rest of the window
        ch.switching.connect(self.side.metrics.reset)  # "Current answer" was the other chat's
        ch.edit_ends.connect(self.compose.end_edit)
        ch.leaving.connect(self.banner.leave_chat)
        ch.new_chat_opening.connect(self._apply_settings_defaults)
        ch.new_chat_opened.connect(lambda: self.composer.editor.setFocus())
        ch.shown_changed.connect(self.update_welcome)
        ch.deleting_all.connect(self.compare.forget)  # (a comparison writes its answers by id)
        # chats changed by another process (`ember-chat chats import`, a second window): the list reloads
        self.store_watch = StoreWatch(self, self.store, self.chats.changed_elsewhere)
        self.undo.attach_banner(self.banner)
        self.side.params.changed.connect(self._save_params)
        self.transcript.open_link.connect(self._open_link)  # only ever after the user's click
        self.transcript.link_hovered.connect(self._on_link_hovered)

    # ----- settings and state
    def _apply_settings_defaults(self) -> None:
        self.presets.apply_new_chat()  # the loaded model's default preset, else the default one, over the settings

    def _restore_state(self) -> None:
        st = self.window_state
        # first: a hidden panel sets no minimum height
        self.side_fit.restore(st.value("side_panel", True, type=bool))
        self._relayout()
        available = self.screen().availableGeometry()
        default = default_geometry(available, self.minimumSizeHint())  # 1280×800, less on a smaller screen
        if st.value("geometry"):
            self.restoreGeometry(st.value("geometry"))
            saved_screen = st.value("screen")
            if grows_back(self.size(), saved_screen if isinstance(saved_screen, QSize) else None, default):
                self.setGeometry(default)  # (kept small by a smaller screen: this one has room)
        else:  # the status bar stays on the screen
            self.setGeometry(default)
        self.side_fit.fit()  # (narrow: the side panel hides)
        if st.value("splitter"):
            self.splitter.restoreState(st.value("splitter"))
        side = self.side.minimumSizeHint().width()
        if not st.value("splitter") or (not self.side.isHidden() and self.splitter.sizes()[2] < side):
            # (a panel saved hidden for the width has no width of its own to come back to)
            self.splitter.setSizes(default_splitter_sizes(self.width(), side))

    def _relayout(self) -> None:
        self.splitter.updateGeometry()
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)

    def save_state(self) -> None:
        self.window_state.setValue("geometry", self.saveGeometry())
        self.window_state.setValue("splitter", self.splitter.saveState())
        self.window_state.setValue("side_panel", self.side_fit.wanted)  # (the user's, not the width's)
        self.window_state.setValue("screen", self.screen().availableGeometry().size())  # (see grows_back)
        self.window_state.setValue("open_chat", self.controller.conversation_id or 0)  # 0: a new chat
        self.window_state.sync()

    def _current_params(self) -> tuple[SamplingParams, str]:
        return self.side.params.params(), self.side.params.system_prompt.toPlainText()

    def _save_params(self) -> None:
        cid = self.controller.conversation_id
        if cid is not None:
            self.store.update_conversation(
                cid,
                params=self.side.params.to_dict(),
                system_prompt=self.side.params.system_prompt.toPlainText(),
            )

    def _show_restored_chats(self) -> bool:
        """A backup was restored: no chat from before it stays on screen, the message being written loses
        its files; says whether it had any (files kept in the database set aside: their ids name others
        here)."""
        self.undo.stack.clear()  # what the undo stack would reverse is in the chats set aside, not these
        self.undo.banner_replaced()
        if self.controller.conversation_id is not None:
            self.side.metrics.reset()
        self.controller.conversation_id = None
        self.compose.end_edit()
        chips = self.composer.attachments
        attached = bool(chips.items)
        chips.clear()
        self._apply_settings_defaults()
        self.controller.refresh()
        self.chats.reload_conversations()
        self.update_welcome()
        return attached

    def update_welcome(self) -> None:
        """With no chat open: the welcome panel while no model is loaded, the loading panel while one
        loads. The transcript otherwise."""
        no_chat = self.controller.conversation_id is None
        first_run = self.model is None and not self.models.loading and no_chat
        page = self.loading_panel if no_chat and self.models.loading_name is not None else self.transcript
        self.centre_stack.setCurrentWidget(self.welcome if first_run else page)
        greet = self.model is not None and no_chat and not self.models.loading and page is self.transcript
        if greet and self.model is not None:
            self.greeting.show_model(model_label(self.model.name), greets_as_chat(self.model))
            self.greeting.setGeometry(self.transcript.viewport().rect())
        self.greeting.setVisible(greet)

    def _use_example(self, text: str) -> None:
        """An example prompt of the greeting clicked: in the message box, to send or change."""
        editor = self.composer.editor
        cursor = editor.textCursor()  # an edit, not setPlainText: Ctrl+Z brings back a draft it replaced
        cursor.select(QTextCursor.SelectionType.Document)
        cursor.insertText(text)
        editor.setTextCursor(cursor)
        editor.setFocus()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # Qt override
        if watched is self.transcript.viewport() and event.type() == QEvent.Type.Resize:
            self.greeting.setGeometry(self.transcript.viewport().rect())
        return super().eventFilter(watched, event)

    def set_model_state(self, state: ModelState) -> None:
        self.controller.model_ready = state is ModelState.READY
        if state is ModelState.READY and self.model is not None:
            self.controller.model_name = self.model.name  # (an answer's header: the engine's display name)
        if state is not ModelState.NONE:
            self.banner.end("model")  # "no model is loaded", or the last pick's error: over
        self.update_welcome()
        self.loading_panel.progress.setValue(0)
        self.model_bar.show_state(state, self.model if state is ModelState.READY else None, self.models.loading_name)
        local = self.model if state is ModelState.READY and self.model and not self.model.is_remote else None
        self.side.params.show_loaded_context(local.n_ctx if local else None)  # (said when the chat's differs)
        self.model_state_changed.emit(state)

    # ----- composer (sending and editing: window_chats.py)
    def stop(self) -> None:
        self.models.cancel_load()  # a pick still being worked out, a load in progress
        self.controller.stop()

    @Slot(str, float, int, int)
    def _on_retrying(self, reason: str, delay_s: float, attempt: int, attempts: int) -> None:
        self.banner.count_down(reason, delay_s, attempt, attempts, lambda: self.controller.generating)

    def _on_generating(self, on: bool) -> None:
        if on:
            self.banner.end("answer")  # the last answer's error: this one is on its way
        else:
            self.banner.stop_countdown()
        self.model_picker.setEnabled(True)
        self.statusBar().showMessage(self.tr("Generating…") if on else self.tr("Ready"), 0 if on else 3000)

    def _open_link(self, url: QUrl) -> None:
        self.url_opener(url)

    def _on_link_hovered(self, url: str) -> None:
        if url.startswith(("http:", "https:", "mailto:")):
            self.statusBar().showMessage(self.tr("Opens in your browser: {url}").format(url=url))
        else:
            self.statusBar().clearMessage()

    def _on_streamed(self, _tokens: int) -> None:
        self.banner.end("retry")  # the request retried is answering

    def _on_chat_error(self, message: str) -> None:
        self.show_error(message, cause="answer" if self.controller.model_ready else "model")

    # ----- messages to the user
    def show_error(self, message: str, cause: str = "") -> None:
        """`cause`: what ends the message (see Banner.end); without one it stays until dismissed."""
        self.undo.banner_replaced()
        self.banner.show_error(message, cause)

    def show_notice(self, message: str, cause: str = "") -> None:
        self.undo.banner_replaced()
        self.banner.show_notice(message, cause)

    # ----- view
    def toggle_side_panel(self) -> None:
        """View ▸ Side panel: on a narrow window too, where it hid by itself (side_fit.py)."""
        self.side_fit.toggle()
        self._relayout()  # the window's minimum size follows at once (a hidden panel sets none)

    def set_theme(self, name: str) -> None:
        self.settings = self.settings.with_changes(theme=name)
        self.settings_file.save(self.settings)
        self.colors = apply_theme(QApplication.instance(), name)
        self.transcript.set_colors(self.colors)
        self.controller.refresh()
        self.apply_icons()

    def apply_icons(self) -> None:
        """Icons in the theme's colours (the window's own set, resources/icons/ui)."""
        self.banner.set_colors(self.colors)
        self.composer.set_colors(self.colors)
        self.conversations.set_colors(self.colors)
        self.side.metrics.chart.set_colors(self.colors)
        self.model_bar.tune.setIcon(themed_icon("settings", self.colors))

    def show_shortcuts(self) -> None:
        from ember_chat.app.shell.shortcuts_dialog import ShortcutsDialog

        self._shortcuts = ShortcutsDialog(self.menuBar(), self)  # kept for tests and while open
        self._shortcuts.open()

    def focus_pane(self, pane: str) -> None:
        """View ▸ Go to: move the keyboard focus to a part of the window."""
        focus_pane(self, pane)

    def show_about(self) -> None:
        QMessageBox.about(self, self.tr("About Ember"), about_text())

    def bring_to_front(self) -> None:
        """Another launch of Ember asked for this window."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    # ----- shutdown
    def shutdown(self) -> None:
        """Stop the API server and a benchmark run, then the engine (cancel → join → close the model).
        Background tasks still out are dropped and interrupted, never waited for. Idempotent."""
        self.tasks.shutdown()
        self.composer.attachments.shutdown()  # files still being read: their processes killed
        self.api.shutdown()
        self.models.shutdown_dialogs()
        self.controller.tools.close()  # tool calls still running are cancelled
        self.tools.close()  # every MCP server stopped
        self.compare.close()  # a comparison still running is stopped
        self.controller.quitting()
        self.bridge.close()  # (the answer in progress ends as a stopped one: saved whole, with its metrics)
        self.kv_caches.close()  # after the service: the model has put its caches into the store

    def closeEvent(self, event: QCloseEvent) -> None:  # Qt override
        if self.api.ask_before_quit(self.close):  # the API server runs: other programs may use it
            event.ignore()
            return
        self.save_state()
        self.hide()  # (what follows may wait: the answer in progress stopped, caches written to disk)
        self.shutdown()
        self.conversations.cancel_pending_search()  # the chat store is closed after the window
        self.transcript.slices.drop()  # (its background rendering reads the store too)
        self.models.close_manager()
        if self.downloads is not None:
            # running downloads pause (they come back next time); one stuck in a read is not waited for
            self.downloads.close(wait=False)
        event.accept()

    def join_background(self, timeout: float) -> bool:
        """Wait until every background thread the window started has ended (tests, after close)."""
        joins = [self.tasks.join, self.api.join, self.side.params.json_answer.tasks.join, *self.models.joins()]
        joins.append(self.composer.attachments.readers.join)
        joins += [self.tools.join, self.controller.tools.tasks.join]
        joins.append(self.compare.join)
        if self.downloads is not None:
            joins.append(self.downloads.wait_idle)
        return all([join(timeout) for join in joins])
