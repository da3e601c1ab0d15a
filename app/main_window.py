"""The main window: conversations on the left, the transcript and composer in the centre, the model
bar on top, the side panel (parameters, live metrics) on the right, and the menus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QDesktopServices, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.bridge import EngineBridge
from app.chat_controller import ChatController
from app.side_panel import SidePanel
from app.theme import apply_theme
from app.transcript import TranscriptView
from app.widgets import Composer, ConversationList
from engine import __version__
from engine.download_queue import DownloadQueue
from engine.errors import EmberError
from engine.gguf_inspect import ModelInfo
from engine.library import ModelLibrary
from engine.params import LoadConfig, SamplingParams
from engine.secrets import TokenStore
from engine.settings import Settings, SettingsFile
from engine.store import ConversationStore

if TYPE_CHECKING:
    from app.model_manager import ModelManager


class MainWindow(QMainWindow):
    model_state_changed = Signal(str)  # none, loading, ready (GUI thread)

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
    ) -> None:
        super().__init__()
        self.downloads = downloads
        self.hub_endpoint = hub_endpoint
        self.tokens = tokens or TokenStore()
        self._manager: ModelManager | None = None  # created on first use: keeps the Hub client off startup
        self.setWindowTitle("Ember")
        self.store = store
        self.bridge = bridge
        self.library = library
        self.settings_file = settings_file
        self.settings: Settings = settings_file.load()
        self.window_state = window_state
        self.model_info: ModelInfo | None = None
        self._loading_name: str | None = None

        self.conversations = ConversationList()
        self.transcript = TranscriptView()
        self.composer = Composer()
        self.side = SidePanel()
        self.banner = QLabel()
        self.banner.setWordWrap(True)
        self.banner.setTextFormat(Qt.TextFormat.RichText)
        self.banner.linkActivated.connect(lambda _: self.banner.hide())
        self.banner.hide()
        self.banner.setAccessibleName("Message banner")

        centre = QWidget()
        cl = QVBoxLayout(centre)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self._build_model_bar())
        cl.addWidget(self.banner)
        cl.addWidget(self.transcript, 1)
        cl.addWidget(self.composer)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(centre)
        self.splitter.addWidget(self.side)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([230, 700, 320])
        self.setCentralWidget(self.splitter)

        self.controller = ChatController(store, bridge, self.transcript, self.side.metrics, self._current_params)
        self._wire()
        self._build_menus()
        self._apply_settings_defaults()
        self.reload_models()
        self.reload_conversations()
        self._restore_state()
        self.set_model_state("none")

    # ----- construction
    def _build_model_bar(self) -> QWidget:
        bar = QWidget()
        bar.setObjectName("modelBar")
        row = QHBoxLayout(bar)
        row.setContentsMargins(10, 6, 10, 6)
        row.addWidget(QLabel("Model"))
        self.model_picker = QComboBox()
        self.model_picker.setAccessibleName("Model picker")
        self.model_picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_picker.setMinimumContentsLength(22)
        self.model_picker.activated.connect(self._on_pick)
        row.addWidget(self.model_picker)
        self.load_progress = QProgressBar()
        self.load_progress.setRange(0, 100)
        self.load_progress.setMaximumWidth(120)
        self.load_progress.setAccessibleName("Model load progress")
        row.addWidget(self.load_progress)
        self.model_status = QLabel()
        self.model_status.setAccessibleName("Model status")
        row.addWidget(self.model_status)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setAccessibleName("Unload model")
        self.unload_button.clicked.connect(self.unload_model)
        row.addWidget(self.unload_button)
        row.addStretch(1)
        self.backend_badge = QLabel()
        self.backend_badge.setObjectName("backendBadge")
        self.backend_badge.setAccessibleName("Backend")
        row.addWidget(self.backend_badge)
        return bar

    def _wire(self) -> None:
        w = self.bridge.worker
        # Bound methods of GUI-thread objects only: a lambda would run in the engine thread.
        w.load_progress.connect(self._on_load_progress)
        w.loaded.connect(self._on_loaded)
        w.load_failed.connect(self._on_load_failed)
        w.unloaded.connect(self._on_unloaded)
        c = self.controller
        c.generating_changed.connect(self.composer.set_generating)
        c.generating_changed.connect(self._on_generating)
        c.error.connect(self.show_error)
        c.notice.connect(self.show_notice)
        c.conversations_changed.connect(self.reload_conversations)
        c.edit_requested.connect(self._on_edit)
        self.composer.send.connect(self._on_send)
        self.composer.stop.connect(self.stop)
        self.composer.cancel_edit.connect(self._cancel_edit)
        self.conversations.new_button.clicked.connect(self.new_chat)
        self.conversations.selected.connect(self._open_conversation)
        self.conversations.search_hit.connect(self._open_hit)
        self.conversations.search_changed.connect(self._on_search)
        self.conversations.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.conversations.list.customContextMenuRequested.connect(self._conversation_menu)
        self.side.params.changed.connect(self._save_params)

    def _build_menus(self) -> None:
        mb = self.menuBar()
        file = mb.addMenu("&File")
        self._action(file, "&New chat", self.new_chat, QKeySequence.StandardKey.New)
        file.addSeparator()
        self._action(file, "Export chat as &Markdown…", lambda: self.export_dialog("md"), "Ctrl+E")
        self._action(file, "Export chat as &JSON…", lambda: self.export_dialog("json"))
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)

        chat = mb.addMenu("&Chat")
        self._action(chat, "&Stop answer", self.stop, "Esc")
        self._action(chat, "&Regenerate last answer", self.controller.regenerate, "Ctrl+R")
        self._action(chat, "Re&name chat…", self.rename_current, "F2")
        self._action(chat, "&Delete chat…", self.delete_current, "Ctrl+Shift+Backspace")
        self._action(
            chat,
            "&Find in chats",
            lambda: self.conversations.search.setFocus(),
            QKeySequence.StandardKey.Find,
        )

        self.models_menu = mb.addMenu("&Models")
        self.models_menu.aboutToShow.connect(self._fill_models_menu)

        view = mb.addMenu("&View")
        self.side_action = self._action(view, "&Side panel", self.toggle_side_panel, "Ctrl+Shift+S")
        self.side_action.setCheckable(True)
        self.side_action.setChecked(True)
        theme = view.addMenu("&Theme")
        group = QActionGroup(self)
        for name in ("light", "dark", "system"):
            a = theme.addAction(name.capitalize())
            a.setCheckable(True)
            a.setChecked(self.settings.theme == name)
            a.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            group.addAction(a)

        help_menu = mb.addMenu("&Help")
        self._action(help_menu, "&About Ember", self.show_about)

    def _action(self, menu: QMenu, text: str, slot: object, shortcut: object = None) -> QAction:
        a = menu.addAction(text)
        a.triggered.connect(slot)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
        return a

    # ----- settings and state
    def _apply_settings_defaults(self) -> None:
        s = self.settings
        params = SamplingParams(
            temperature=s.temperature,
            top_k=s.top_k,
            top_p=s.top_p,
            min_p=s.min_p,
            repeat_penalty=s.repeat_penalty,
            max_tokens=s.max_tokens,
        )
        self.side.params.set_params(params, s.system_prompt, s.context_length)
        apply_theme(QApplication.instance(), s.theme)

    def _restore_state(self) -> None:
        st = self.window_state
        if st.value("geometry"):
            self.restoreGeometry(st.value("geometry"))
        else:
            self.resize(1280, 800)
        if st.value("splitter"):
            self.splitter.restoreState(st.value("splitter"))
        visible = st.value("side_panel", True, type=bool)
        self.side.setVisible(visible)
        self.side_action.setChecked(visible)

    def save_state(self) -> None:
        self.window_state.setValue("geometry", self.saveGeometry())
        self.window_state.setValue("splitter", self.splitter.saveState())
        self.window_state.setValue("side_panel", self.side.isVisible())
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

    # ----- models
    def reload_models(self) -> None:
        current = self.model_picker.currentData()
        self.model_picker.clear()
        self.model_picker.addItem("Choose a model…", None)
        for e in self.library.entries():
            label = "Gemma 3 270M (starter)" if e.is_starter else e.name
            self.model_picker.addItem(label, e.name)
            self.model_picker.setItemData(
                self.model_picker.count() - 1, f"{e.size / 1e6:,.0f} MB", Qt.ItemDataRole.ToolTipRole
            )
        idx = self.model_picker.findData(current)
        self.model_picker.setCurrentIndex(max(0, idx))

    def model_manager(self) -> ModelManager:
        """The Model Manager window (created on first use, then kept so downloads stay visible)."""
        if self._manager is None:
            from app.model_manager import ModelManager
            from engine.hub import HubClient

            assert self.downloads is not None
            endpoint = self.hub_endpoint or self.settings.hf_endpoint
            self._manager = ModelManager(
                self.library,
                self.downloads,
                lambda: HubClient(endpoint, self.tokens.get()),
                self.tokens,
                self.side.params.context.value,
                self,
            )
            self._manager.library_changed.connect(self.reload_models)
            self._manager.load_requested.connect(self.load_model)
        return self._manager

    def open_model_manager(self) -> None:
        mm = self.model_manager()
        mm.show()
        mm.raise_()
        mm.activateWindow()

    def _fill_models_menu(self) -> None:
        m = self.models_menu
        m.clear()
        manager = m.addAction("Model &Manager…")
        manager.setShortcut(QKeySequence("Ctrl+M"))
        manager.triggered.connect(self.open_model_manager)
        manager.setEnabled(self.downloads is not None)
        m.addSeparator()
        group = QActionGroup(m)
        loaded = self.model_info is not None and self._loaded_name
        for e in self.library.entries():
            a = m.addAction("Gemma 3 270M (starter)" if e.is_starter else e.name)
            a.setCheckable(True)
            a.setChecked(bool(loaded) and self._loaded_name == e.name)
            a.triggered.connect(lambda _=False, n=e.name: self.load_model(n))
            group.addAction(a)
        if not group.actions():
            none = m.addAction("No models yet — import or download one")
            none.setEnabled(False)
        m.addSeparator()
        unload = m.addAction("&Unload model")
        unload.setEnabled(self.model_info is not None)
        unload.triggered.connect(self.unload_model)
        m.addAction("Open &models folder", self.open_models_folder)
        m.addAction("&Refresh list", self.reload_models)

    _loaded_name: str | None = None

    def _on_pick(self, index: int) -> None:
        name = self.model_picker.itemData(index)
        if name:
            self.load_model(name)

    def load_model(self, name: str) -> None:
        def act() -> None:
            try:
                path = self.library.resolve(name)
            except EmberError as exc:
                self.show_error(str(exc))
                return
            try:
                config = LoadConfig(
                    path,
                    n_ctx=self.side.params.context.value(),
                    threads=self.settings.threads,
                    gpu_layers=self.settings.gpu_layers,
                    flash_attn=self.settings.flash_attention,
                )
            except EmberError as exc:
                self.show_error(str(exc))
                return
            self._loading_name = name
            self.set_model_state("loading")
            self.bridge.load(config)

        self.controller.after_stop(act)

    def unload_model(self) -> None:
        def act() -> None:
            self.bridge.unload()
            self.model_info = None
            self._loaded_name = None

        if self._loading_name is not None:
            self.bridge.cancel_load()
            return
        self.controller.after_stop(act)

    @Slot(float)
    def _on_load_progress(self, fraction: float) -> None:
        self.load_progress.setValue(int(fraction * 100))

    @Slot()
    def _on_unloaded(self) -> None:
        self.set_model_state("none")

    @Slot(object)
    def _on_loaded(self, info: ModelInfo) -> None:
        self.model_info = info
        self._loaded_name = self._loading_name
        self._loading_name = None
        self.settings = self.settings.with_changes(last_model=self._loaded_name or "")
        self.settings_file.save(self.settings)
        idx = self.model_picker.findData(self._loaded_name)
        if idx >= 0:
            self.model_picker.setCurrentIndex(idx)
        self.set_model_state("ready")

    @Slot(str)
    def _on_load_failed(self, message: str) -> None:
        self._loading_name = None
        self.model_info = None
        self.set_model_state("none")
        self.show_error(message)

    def set_model_state(self, state: str) -> None:
        self.controller.model_ready = state == "ready"
        self.load_progress.setVisible(state == "loading")
        if state == "loading":
            self.load_progress.setValue(0)
            self.model_status.setText("Loading…")
            self.unload_button.setText("Cancel")
            self.unload_button.setEnabled(True)
        elif state == "ready" and self.model_info is not None:
            i = self.model_info
            self.model_status.setText(f"{i.quantization} · {i.parameter_count / 1e6:,.0f}M params")
            self.unload_button.setText("Unload")
            self.unload_button.setEnabled(True)
        else:
            self.model_status.setText("No model loaded")
            self.unload_button.setText("Unload")
            self.unload_button.setEnabled(False)
            self.model_picker.setCurrentIndex(0)
        s = self.settings
        backend = "CPU" if s.gpu_layers == 0 or state != "ready" else "GPU"
        self.backend_badge.setText(f"{backend} · {s.threads} threads · {s.gpu_layers} GPU layers")
        self.backend_badge.setToolTip("Inference backend, CPU threads and layers offloaded to the GPU")
        self.model_state_changed.emit(state)

    def open_models_folder(self) -> None:
        self.library.models_dir.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.library.models_dir)))

    # ----- conversations
    def reload_conversations(self) -> None:
        if self.conversations.search.text().strip():
            self._on_search(self.conversations.search.text())
            return
        self.conversations.show_conversations(self.store.conversations(), self.controller.conversation_id)

    def new_chat(self) -> None:
        def act() -> None:
            self.controller.conversation_id = None
            self.controller.cancel_edit()
            self.composer.set_editing(False)
            self._apply_settings_defaults()
            self.controller.refresh()
            self.reload_conversations()
            self.composer.editor.setFocus()

        self.controller.after_stop(act)

    def _open_conversation(self, cid: int, jump_to: int | None = None) -> None:
        def act() -> None:
            conv = self.store.conversation(cid)
            params = {k: v for k, v in conv.params.items() if k != "context_length"}
            try:
                sp = SamplingParams.from_dict(params) if params else self.side.params.params()
            except EmberError:
                sp = SamplingParams()
            ctx = int(conv.params.get("context_length", self.side.params.context.value()))
            self.side.params.set_params(sp, conv.system_prompt, ctx)
            self.composer.set_editing(False)

        self.controller.after_stop(act)
        self.controller.open_conversation(cid, jump_to)

    def _open_hit(self, cid: int, mid: int) -> None:
        conv = self.store.conversation(cid)
        leaf = self.controller._newest_leaf(mid)
        if conv.active_leaf != leaf and mid not in [m.id for m in self.store.thread(cid)]:
            self.store.update_conversation(cid, active_leaf=leaf)
        self._open_conversation(cid, jump_to=mid)

    def _on_search(self, text: str) -> None:
        if text.strip():
            self.conversations.show_hits(self.store.search(text))
        else:
            self.conversations.show_conversations(self.store.conversations(), self.controller.conversation_id)

    def _conversation_menu(self, pos: object) -> None:
        cid = self.conversations.current_id()
        if cid is None:
            return
        menu = QMenu(self)
        menu.addAction("Rename…", self.rename_current)
        menu.addAction("Delete…", self.delete_current)
        menu.exec(self.conversations.list.mapToGlobal(pos))

    def rename_current(self, title: str | None = None) -> None:
        cid = self.controller.conversation_id or self.conversations.current_id()
        if cid is None:
            return
        if not title:
            title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=self.store.conversation(cid).title)
            if not ok or not title.strip():
                return
        self.store.update_conversation(cid, title=title.strip())
        self.reload_conversations()

    def delete_current(self, confirmed: bool = False) -> None:
        cid = self.controller.conversation_id or self.conversations.current_id()
        if cid is None:
            return
        if not confirmed:
            title = self.store.conversation(cid).title
            answer = QMessageBox.question(self, "Delete chat", f"Delete “{title}” and all its messages?")
            if answer != QMessageBox.StandardButton.Yes:
                return
        self.controller.delete_conversation(cid)

    # ----- composer
    def _on_send(self, text: str) -> None:
        self.banner.hide()
        self.composer.set_editing(False)
        self.controller.send(text)

    def _on_edit(self, message_id: int) -> None:
        def act() -> None:
            self.composer.editor.setPlainText(self.controller.start_edit(message_id))
            self.composer.set_editing(True)
            self.composer.editor.setFocus()

        self.controller.after_stop(act)

    def _cancel_edit(self) -> None:
        self.controller.cancel_edit()
        self.composer.set_editing(False)
        self.composer.editor.clear()

    def stop(self) -> None:
        if self._loading_name is not None:
            self.bridge.cancel_load()
        self.controller.stop()

    def _on_generating(self, on: bool) -> None:
        self.model_picker.setEnabled(True)
        self.statusBar().showMessage("Generating…" if on else "Ready", 0 if on else 3000)

    # ----- messages to the user
    def show_error(self, message: str) -> None:
        self.banner.setStyleSheet("background:#fde2e1;color:#7f1d1d;padding:8px;")
        self.banner.setText(f"{message}&nbsp;&nbsp;<a href='#'>Dismiss</a>")
        self.banner.show()

    def show_notice(self, message: str) -> None:
        self.banner.setStyleSheet("background:#fef3c7;color:#78350f;padding:8px;")
        self.banner.setText(f"{message}&nbsp;&nbsp;<a href='#'>Dismiss</a>")
        self.banner.show()

    # ----- view
    def toggle_side_panel(self) -> None:
        self.side.setVisible(not self.side.isVisible())
        self.side_action.setChecked(self.side.isVisible())

    def set_theme(self, name: str) -> None:
        self.settings = self.settings.with_changes(theme=name)
        self.settings_file.save(self.settings)
        apply_theme(QApplication.instance(), name)

    def show_about(self) -> None:
        QMessageBox.about(self, "About Ember", about_text())

    # ----- export
    def export_dialog(self, kind: str) -> None:
        if self.controller.conversation_id is None:
            self.show_error("Open a chat to export it.")
            return
        suffix = "Markdown (*.md)" if kind == "md" else "JSON (*.json)"
        path, _ = QFileDialog.getSaveFileName(self, "Export chat", f"chat.{kind}", suffix)
        if path:
            self.export(Path(path), kind)

    def export(self, path: Path, kind: str) -> None:
        cid = self.controller.conversation_id
        if cid is None:
            return
        conv = self.store.conversation(cid)
        thread = self.store.thread(cid)
        try:
            if kind == "json":
                data = {
                    "title": conv.title,
                    "system_prompt": conv.system_prompt,
                    "params": conv.params,
                    "messages": [{"role": m.role, "content": m.content, "metrics": m.metrics} for m in thread],
                }
                path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
            else:
                parts = [f"# {conv.title}\n"]
                for m in thread:
                    parts.append(f"## {'You' if m.role == 'user' else 'Ember'}\n\n{m.content}\n")
                path.write_text("\n".join(parts), encoding="utf-8")
        except OSError as exc:
            self.show_error(f"Could not export to {path}: {exc.strerror or exc}.")

    # ----- shutdown
    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_state()
        self.bridge.close()
        event.accept()


def about_text() -> str:
    import PySide6
    from PySide6.QtCore import qVersion

    try:
        import llama_cpp

        from engine.runtime import system_info

        llama = f"llama-cpp-python {llama_cpp.__version__}<br><small>{system_info()}</small>"
    except ImportError:
        llama = "llama-cpp-python not installed"
    return (
        f"<h3>Ember {__version__}</h3><p>Private AI chat with local models.</p>"
        f"<p>{llama}</p><p>Qt {qVersion()} · PySide6 {PySide6.__version__}</p>"
        "<p>No telemetry. Your chats and models stay on this computer.</p>"
    )


def clipboard_text() -> str:
    return QGuiApplication.clipboard().text()
