"""The window's model: the picker and load/unload, the Model Manager, the models folder, per-model
load settings, the benchmark lab and remote connections (`window.models`). It owns the model loading
and the one loaded (its description, and the name it was picked by) and the dialogs it opened.

Built from the app's context and the widgets it drives (the model bar, the widget its dialogs stay
over), never the window; what it asks of other features comes as typed callables (stop the answer
first, the context length the parameters panel sets, the local API server's address, a new benchmark
dialog) and what it tells them goes out as signals that the shell's composition connects
(shell/compose.py): the model's state (the window shows it), the load's progress, whether the
loaded model can turn its thinking on and off, a pick dropped (a message queued for it stays in the
box), the models listed, the load settings open.

What would make the GUI thread wait (listing the models folder, reading a GGUF header, nvidia-smi
for "auto" GPU layers, the keychain for a remote model's key) runs on the context's task runner; a
newer request of the same kind (a second pick, a second ⚙) supersedes the one still out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFileDialog, QWidget

from ember_chat.app.context import AppContext
from ember_chat.app.engine_link.api_models import ApiModels
from ember_chat.app.engine_link.model_names import model_label
from ember_chat.app.models.model_bar import ModelBar
from ember_chat.app.qt.settings_page import show_settings_page
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.inference.backend import ModelDescription
from ember_chat.engine.inference.service.resolver import model_ref
from ember_chat.engine.models.download_queue import DownloadQueue
from ember_chat.engine.models.gguf_inspect import ModelInfo, inspect_gguf
from ember_chat.engine.models.library import ModelEntry
from ember_chat.engine.storage.connections import Connection, parse_remote_model_name
from ember_chat.engine.storage.model_settings import ModelLoadSettings
from ember_chat.engine.storage.secrets import TokenStore
from ember_chat.engine.storage.settings import Settings

if TYPE_CHECKING:
    from ember_chat.app.models.connections_dialog import ConnectionsDialog
    from ember_chat.app.models.load_panel import LoadSettingsDialog
    from ember_chat.app.models.manager.dialog import ModelManager
    from ember_chat.app.models.remote_switch import RemoteSwitchQuestion


class BenchmarkWindow(Protocol):
    """The benchmark lab's dialog (lab/benchmark_dialog.py, a feature above this one: the composition
    makes it), as much as Models ▸ Benchmark… asks of it: one run at a time."""

    @property
    def running(self) -> bool: ...

    def close(self) -> bool: ...  # (stops its run and joins its worker)

    def show(self) -> None: ...

    def raise_(self) -> None: ...

    def activateWindow(self) -> None: ...


class ModelActions(QObject):
    state_changed = Signal(object)  # a ModelState: loading, ready or none (the window shows it)
    progress = Signal(int)  # how much of the model is loaded, in percent (the loading panel's bar)
    thinking_switch = Signal(bool, str)  # the loaded model can turn its thinking on and off; if not, why
    pick_dropped = Signal()  # a pick dropped or refused: a message sent for it stays in the box
    listed = Signal()  # the picker shows the models just listed
    load_settings_opened = Signal()  # the ⚙ dialog is open, as self.load_settings

    def __init__(
        self,
        ctx: AppContext,
        *,
        model_bar: ModelBar,
        after_stop: Callable[[Callable[[], None]], None],
        context_length: Callable[[], int],
        api_url: Callable[[], str | None],
        benchmark: Callable[[], BenchmarkWindow],
        tokens: TokenStore,
        downloads: DownloadQueue | None,
        hub_endpoint: str | None,
        dialog_parent: QWidget,
    ) -> None:
        """`after_stop(action)`: runs `action` once the answer streaming (if any) has stopped;
        `context_length()`: the context the parameters panel sets (a model without saved load settings
        loads with it); `api_url()`: the local API server's address while it runs (the remote switch
        says it serves the remote model then); `benchmark()`: a new benchmark dialog; `tokens`,
        `downloads`, `hub_endpoint`: the Model Manager's (no downloads: no Model Manager);
        `dialog_parent`: what the dialogs stay over (the window's Settings window shows Connections)."""
        super().__init__(dialog_parent)
        self.ctx = ctx
        self.model_bar = model_bar
        self.picker = model_bar.picker
        self._after_stop = after_stop
        self._context_length = context_length
        self._api_url = api_url
        self._new_benchmark = benchmark
        self.tokens = tokens
        self.downloads = downloads
        self.hub_endpoint = hub_endpoint
        self.dialog_parent = dialog_parent
        self.model: ModelDescription | None = None  # the model loaded (None while none is)
        self.loading_name: str | None = None  # the pick being loaded
        self.loaded_name: str | None = None  # the pick loaded last (a name, not a file)
        self.manager: ModelManager | None = None  # created on first use: keeps the Hub client off startup
        self.api: ApiModels | None = None  # the local API server's models loaded for requests (watch_api)
        # the dialogs opened, kept while open (and for tests)
        self.remote_question: RemoteSwitchQuestion | None = None
        self.load_settings: LoadSettingsDialog | None = None
        self.benchmark: BenchmarkWindow | None = None
        self.connections_dialog: ConnectionsDialog | None = None
        self.picker.activated.connect(self.on_pick)
        model_bar.unload.clicked.connect(self.unload_model)
        model_bar.tune.clicked.connect(lambda: self.open_load_settings())

    @property
    def loading(self) -> bool:
        """A model pick is being worked out or loaded."""
        return self.loading_name is not None or self.ctx.tasks.pending("load")

    # ----- shutdown (the window's)
    def shutdown_dialogs(self) -> None:
        """Interrupt what the dialogs still do in the background, never waiting for it."""
        if self.connections_dialog is not None:
            self.connections_dialog.tasks.shutdown()  # a connection test still out is interrupted
        if self.load_settings is not None:
            self.load_settings.tasks.shutdown()
        if self.benchmark is not None:
            self.benchmark.close()  # stops its run and joins its worker

    def close_manager(self) -> None:
        if self.manager is not None:
            self.manager.shutdown()
            self.manager.close()

    def joins(self) -> list[Callable[[float], bool]]:
        """How to wait for the background threads of the dialogs and the Model Manager (tests)."""
        joins = [owner.tasks.join for owner in (self.connections_dialog, self.load_settings) if owner is not None]
        return joins + ([self.manager.join] if self.manager is not None else [])

    # ----- the engine's answers to a load (GUI thread)
    @Slot(float)
    def on_load_progress(self, fraction: float) -> None:
        self.model_bar.progress.setValue(int(fraction * 100))
        self.progress.emit(int(fraction * 100))

    @Slot()
    def on_unloaded(self) -> None:
        self.ctx.save_settings(
            self.ctx.settings.with_changes(last_model="")
        )  # unloaded by hand: none at the next start
        self.thinking_switch.emit(False, self.tr("No model is loaded."))
        self.state_changed.emit(ModelState.NONE)

    @Slot(object)
    def on_loaded(self, model: ModelDescription) -> None:
        self.model = model
        self.loaded_name = self.loading_name
        self.loading_name = None
        self.thinking_switch.emit(model.thinking_switch, "")
        self.ctx.save_settings(self.ctx.settings.with_changes(last_model=self.loaded_name or ""))
        idx = self.picker.findData(self.loaded_name)
        if idx >= 0:
            self.picker.setCurrentIndex(idx)
        self.state_changed.emit(ModelState.READY)
        if self.manager is not None:
            self.manager.load_succeeded()
        if model.draft_refused:  # (the model loaded and runs without its draft model: said, not failed)
            self.ctx.notifier.show_notice(model.draft_refused, cause="model")

    @Slot(str)
    def on_load_failed(self, message: str) -> None:
        self.loading_name = None
        self.model = None
        self.state_changed.emit(ModelState.NONE)
        self.ctx.notifier.show_error(message, cause="model")
        self._tell_manager(message)

    def _tell_manager(self, message: str) -> None:
        """A load error, said in the Model Manager too while it is open (it hid the window's banner)."""
        if self.manager is not None and self.manager.isVisible():
            self.manager.show_load_error(message)

    def cancel_load(self) -> bool:
        """Drop a pick still being worked out, and cancel a load in progress (True if there was one); a
        message sent meanwhile stays in the box."""
        self.ctx.tasks.cancel("load")
        self.pick_dropped.emit()
        if self.loading_name is None:
            return False
        self.ctx.bridge.cancel_load()
        return True

    # ----- picks
    def reload_models(self) -> None:
        """List the models again (off the GUI thread); the picker follows when the list is known."""
        library, connections = self.ctx.library, self.ctx.connections

        def listed() -> tuple[list[ModelEntry], list[Connection], set[str]]:
            entries = library.entries()  # (and which are vision models without their projector: headers read)
            return entries, connections.list(), {e.name for e in entries if e.vision_needs_projector}

        self.ctx.tasks.run(listed, self._show_models, self.ctx.notifier.show_error, key="models")

    def _show_models(self, found: tuple[list[ModelEntry], list[Connection], set[str]]) -> None:
        self.model_bar.set_models(*found)
        if self.picker.currentIndex() <= 0:  # the first list: show the model loaded (or loading)
            shown = self.loading_name or self.loaded_name
            if shown is not None and self.picker.findData(shown) >= 0:
                self.picker.setCurrentIndex(self.picker.findData(shown))
        self.listed.emit()

    def model_manager(self) -> ModelManager:
        """The Model Manager window (created on first use, then kept so downloads stay visible)."""
        if self.manager is None:
            from ember_chat.app.models.manager.dialog import ModelManager
            from ember_chat.engine.models.hub import HubClient

            assert self.downloads is not None
            endpoint = self.hub_endpoint or self.ctx.settings.hf_endpoint
            tokens = self.tokens
            self.manager = ModelManager(
                self.ctx.library,
                self.downloads,
                lambda: HubClient(endpoint, tokens.get()),
                tokens,
                self._context_length,
                self.dialog_parent,
                lambda: (self.ctx.settings.gpu_layers, self.ctx.settings.kv_cache_type),
                lambda: self.loaded_name if self.model is not None else None,
                api=self.api,
            )
            self.manager.library_changed.connect(self.reload_models)
            self.manager.load_requested.connect(self.load_model)
            # (after the window has shown the state: the composition connected it first)
            self.state_changed.connect(self.manager.show_loaded)
        return self.manager

    def watch_api(self, api: ApiModels) -> None:
        """The local API server's models loaded for requests: the model bar counts them (read again
        whenever they change), its count opens them in the Model Manager, which says and unloads them."""
        self.api = api
        api.pool_changed.connect(self._read_api_models)
        self.model_bar.api_models.clicked.connect(self.open_api_models)

    def _read_api_models(self) -> None:
        if self.api is not None:
            self.api.read_pool(lambda rows: self.model_bar.show_api_models([model_label(r.name) for r in rows]))

    def open_api_models(self) -> None:
        """The Model Manager's Installed tab, where the models the API loaded are said (and unloaded)."""
        self.open_model_manager()
        assert self.manager is not None
        self.manager.tabs.setCurrentIndex(1)

    def open_model_manager(self) -> None:
        mm = self.model_manager()
        mm.show()
        mm.raise_()
        mm.activateWindow()

    def on_pick(self, index: int) -> None:
        name = self.picker.itemData(index)
        if name:
            self.load_model(name)

    def load_model(self, name: str) -> None:
        """Load a library model (a name, 'starter', a path) or a remote one (remote:<connection>/<id>).
        What to load is worked out and checked off the GUI thread first (the file, its saved settings,
        "auto" GPU layers from the header and nvidia-smi, a remote model's key from the keychain, the
        remote server's answer); a later pick made meanwhile wins. A remote model in place of a local
        one is then asked about (it unloads the local model, and the local API server serves the
        remote one instead)."""
        library, connections, model_settings = self.ctx.library, self.ctx.connections, self.ctx.model_settings
        server_id = self.ctx.bridge.service.server_id  # a connection back to this engine's API server is refused

        def act() -> None:
            defaults = self._load_defaults()
            self.ctx.tasks.run(
                lambda: model_ref(name, library, connections, model_settings, defaults, server_id),
                lambda found: self._confirm_load(name, *found),
                self._load_refused,
                key="load",
            )

        self._after_stop(act)

    def _confirm_load(self, name: str, ref: ModelRef, alias: str) -> None:
        remote = parse_remote_model_name(name)
        if remote is None or self.model is None or self.model.is_remote:
            self._start_load(name, ref, alias)
            return
        from ember_chat.app.models.remote_switch import RemoteSwitchQuestion

        def cancelled() -> None:  # the picker shows what is still loaded
            index = self.picker.findData(self.loaded_name)
            if index >= 0:
                self.picker.setCurrentIndex(index)

        loaded = model_label(self.loaded_name) if self.loaded_name else self.model.name
        self.remote_question = RemoteSwitchQuestion(  # kept while open (and for tests)
            self.dialog_parent,
            loaded,
            remote[1],
            remote[0],
            self._api_url(),
            lambda: self._start_load(name, ref, alias),
            cancelled,
        )

    def _load_refused(self, message: str) -> None:
        """The pick could not be worked out (a damaged file, an unknown connection): nothing was
        unloaded, so say what is still loaded and show it in the picker again."""
        loaded = self.loaded_name if self.model is not None else None
        if loaded is not None:
            shown = model_label(loaded)  # (as the picker names it)
            message += " " + self.tr("{model} is still loaded.").format(model=shown)
        index = self.picker.findData(loaded) if loaded is not None else 0
        self.picker.setCurrentIndex(max(index, 0))  # not a pick: picks are `activated`
        self.ctx.notifier.show_error(message, cause="model")  # ends when a model loads
        self._tell_manager(message)
        self.pick_dropped.emit()  # (a message sent meanwhile stays in the box)

    def restore_last_model(self, crashed: str | None = None) -> None:
        """At start: load the model of the last session, unless it was in use when Ember crashed
        (`crashed`: it may be what crashed; the user picks it again if they want it)."""
        last = self.ctx.settings.last_model
        if not last:
            return
        if last == crashed:
            self.ctx.notifier.show_notice(
                self.tr(
                    "Ember did not load {model} by itself: the last run crashed while it was in use. "
                    "Pick it in the model list to load it again."
                ).format(model=last),
                cause="model",
            )
            return
        self.load_model(last)

    @property
    def model_in_use(self) -> str | None:
        """The model loading, else the one loaded (what a crash may be blamed on)."""
        return self.loading_name or (self.loaded_name if self.model is not None else None)

    def _start_load(self, name: str, ref: ModelRef, alias: str) -> None:
        if self.loading_name is not None:
            # a new pick replaces the load in progress: it is cancelled, and what it still says
            # is dropped by the bridge (only the last load asked for is reported)
            self.ctx.bridge.cancel_load()
        self.loading_name = name
        self.state_changed.emit(ModelState.LOADING)
        self.ctx.bridge.load(ref, alias)

    def _load_defaults(self) -> Settings:
        """How a model without its own load settings is loaded: the settings, at the panel's context."""
        return self.ctx.settings.with_changes(context_length=self._context_length())

    def unload_model(self) -> None:
        def act() -> None:
            self.ctx.bridge.unload()
            self.model = None
            self.loaded_name = None

        if self.cancel_load():  # (a pick still being worked out is dropped too)
            return
        self._after_stop(act)

    def import_model_file(self) -> None:
        mm = self.model_manager()
        mm.show()
        mm.import_dialog()

    def change_models_folder(self, folder: Path | None = None) -> None:
        """Use another folder for models (downloads go there too). Files are not moved."""
        library, downloads, notifier = self.ctx.library, self.downloads, self.ctx.notifier
        if folder is None:
            chosen = QFileDialog.getExistingDirectory(
                self.dialog_parent, self.tr("Models folder"), str(library.models_dir)
            )
            if not chosen:
                return
            folder = Path(chosen)
        if downloads is not None and any(j.state == "downloading" for j in downloads.snapshot()):
            notifier.show_error(self.tr("Pause or finish the running downloads before changing the models folder."))
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            notifier.show_error(
                self.tr("Cannot use {folder} as the models folder: {reason}.").format(
                    folder=folder, reason=exc.strerror or exc
                )
            )
            return
        self.ctx.save_settings(self.ctx.settings.with_changes(models_dir=str(folder)))
        library.models_dir = folder
        if downloads is not None:
            downloads.models_dir = folder
        if self.manager is not None:
            self.manager.refresh_installed()
        self.reload_models()
        notifier.show_notice(self.tr("Models folder: {folder}").format(folder=folder))

    def open_models_folder(self) -> None:
        self.ctx.library.models_dir.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.ctx.library.models_dir)))

    def open_load_settings(self, name: str | None = None) -> None:
        """The ⚙ beside the model picker: this local model's own load settings (the dialog opens once
        the model's header is read, off the GUI thread)."""
        name = name or self.picker.currentData()
        if not name or parse_remote_model_name(name) is not None:
            text = self.tr("Choose a model on this computer in the list first (remote models load remotely).")
            self.ctx.notifier.show_error(text)
            return
        library, model_settings, defaults = self.ctx.library, self.ctx.model_settings, self._load_defaults()

        def read() -> tuple[ModelInfo, ModelLoadSettings]:  # the header and the saved settings: disk
            return inspect_gguf(library.resolve(name)), model_settings.effective(name, defaults)

        def shown(found: tuple[ModelInfo, ModelLoadSettings]) -> None:
            self._show_load_settings(name, *found)

        self.ctx.tasks.run(read, shown, self.ctx.notifier.show_error, key="load-settings")

    def _show_load_settings(self, name: str, info: ModelInfo, current: ModelLoadSettings) -> None:
        from ember_chat.app.models.load_panel import LoadSettingsDialog

        # it asks nvidia-smi off the GUI thread
        dialog = LoadSettingsDialog(name, info, current, self.dialog_parent)

        model_settings = self.ctx.model_settings

        def saved(settings: ModelLoadSettings, load_now: bool) -> None:
            self.ctx.tasks.run(
                lambda: model_settings.save(name, settings),
                lambda _: self.load_model(name) if load_now else None,
                self.ctx.notifier.show_error,
                key=f"save-load-settings:{name}",
            )

        dialog.saved.connect(saved)
        self.load_settings = dialog  # kept for tests and while open
        dialog.open()
        self.load_settings_opened.emit()

    def open_benchmark(self) -> None:
        """Models ▸ Benchmark…: the running one if a run is on (one at a time), else a fresh one (with
        today's models and connections)."""
        current = self.benchmark
        if current is None or not current.running:
            if current is not None:
                current.close()
            current = self._new_benchmark()
            self.benchmark = current  # kept while open
        current.show()
        current.raise_()
        current.activateWindow()

    def open_connections(self) -> None:
        """Models ▸ Connections…: the Settings window at its Connections page (made once, listed anew)."""
        from ember_chat.app.models.connections_dialog import ConnectionsDialog

        dialog = self.connections_dialog
        if dialog is None:
            own_server = self.ctx.bridge.service.server_id
            dialog = ConnectionsDialog(self.ctx.connections, self.dialog_parent, own_server_id=own_server)
            dialog.changed.connect(self.reload_models)
            dialog.use_model.connect(self.load_model)
            self.connections_dialog = dialog
        else:
            current = dialog.list.currentItem()
            dialog.reload(select=current.text() if current is not None else None)
        show_settings_page(self.dialog_parent, "connections", dialog)
