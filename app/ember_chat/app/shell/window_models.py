"""The main window's model actions: the picker and load/unload, the Model Manager, the models folder,
per-model load settings, the benchmark lab and remote connections. Mixed into MainWindow, whose
widgets, stores and task runner they use.

What would make the GUI thread wait (listing the models folder, reading a GGUF header, nvidia-smi
for "auto" GPU layers, the keychain for a remote model's key) runs on the window's task runner; a
newer request of the same kind (a second pick, a second ⚙) supersedes the one still out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFileDialog

from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.core.states import ModelState
from ember_chat.engine.inference.resolver import model_ref
from ember_chat.engine.models.gguf_inspect import ModelInfo, inspect_gguf
from ember_chat.engine.models.library import ModelEntry
from ember_chat.engine.storage.connections import Connection, parse_remote_model_name
from ember_chat.engine.storage.model_settings import ModelLoadSettings
from ember_chat.engine.storage.settings import Settings

if TYPE_CHECKING:
    from ember_chat.app.models.manager import ModelManager


class ModelActions:
    def reload_models(self) -> None:
        """List the models again (off the GUI thread); the picker follows when the list is known."""
        library, connections = self.library, self.connections
        self.tasks.run(
            lambda: (library.entries(), connections.list()), self._show_models, self.show_error, key="models"
        )

    def _show_models(self, found: tuple[list[ModelEntry], list[Connection]]) -> None:
        self.model_bar.set_models(*found)
        if self.model_picker.currentIndex() <= 0:  # the first list: show the model loaded (or loading)
            shown = self._loading_name or self._loaded_name
            if shown is not None and self.model_picker.findData(shown) >= 0:
                self.model_picker.setCurrentIndex(self.model_picker.findData(shown))
        self.models_listed.emit()

    def model_manager(self) -> ModelManager:
        """The Model Manager window (created on first use, then kept so downloads stay visible)."""
        if self._manager is None:
            from ember_chat.app.models.manager import ModelManager
            from ember_chat.engine.models.hub import HubClient

            assert self.downloads is not None
            endpoint = self.hub_endpoint or self.settings.hf_endpoint
            self._manager = ModelManager(
                self.library,
                self.downloads,
                lambda: HubClient(endpoint, self.tokens.get()),
                self.tokens,
                self.side.params.context.value,
                self,
                lambda: (self.settings.gpu_layers, self.settings.kv_cache_type),
                lambda: self._loaded_name if self.model is not None else None,
            )
            self._manager.library_changed.connect(self.reload_models)
            self._manager.load_requested.connect(self.load_model)
            self.model_state_changed.connect(self._manager.show_loaded)
        return self._manager

    def open_model_manager(self) -> None:
        mm = self.model_manager()
        mm.show()
        mm.raise_()
        mm.activateWindow()

    def _on_pick(self, index: int) -> None:
        name = self.model_picker.itemData(index)
        if name:
            self.load_model(name)

    def load_model(self, name: str) -> None:
        """Load a library model (a name, 'starter', a path) or a remote one (remote:<connection>/<id>).
        What to load is worked out and checked off the GUI thread first (the file, its saved settings,
        "auto" GPU layers from the header and nvidia-smi, a remote model's key from the keychain, the
        remote server's answer); a later pick made meanwhile wins. A remote model in place of a local
        one is then asked about (it unloads the local model, and the local API server serves the
        remote one instead)."""
        library, connections, model_settings = self.library, self.connections, self.model_settings
        server_id = self.bridge.service.server_id  # a connection back to this engine's API server is refused

        def act() -> None:
            defaults = self._load_defaults()
            self.tasks.run(
                lambda: model_ref(name, library, connections, model_settings, defaults, server_id),
                lambda found: self._confirm_load(name, *found),
                self._load_refused,
                key="load",
            )

        self.controller.after_stop(act)

    def _confirm_load(self, name: str, ref: ModelRef, alias: str) -> None:
        remote = parse_remote_model_name(name)
        if remote is None or self.model is None or self.model.is_remote:
            self._start_load(name, ref, alias)
            return
        from ember_chat.app.shell.remote_switch import RemoteSwitchQuestion

        def cancelled() -> None:  # the picker shows what is still loaded
            index = self.model_picker.findData(self._loaded_name)
            if index >= 0:
                self.model_picker.setCurrentIndex(index)

        api_url = self.api.server.url if self.api.server is not None else None
        loaded = self._loaded_name or self.model.name
        self._remote_question = RemoteSwitchQuestion(  # kept while open (and for tests)
            self, loaded, remote[1], remote[0], api_url, lambda: self._start_load(name, ref, alias), cancelled
        )

    def _load_refused(self, message: str) -> None:
        """The pick could not be worked out (a damaged file, an unknown connection): nothing was
        unloaded, so say what is still loaded and show it in the picker again."""
        loaded = self._loaded_name if self.model is not None else None
        if loaded is not None:
            message += " " + self.tr("{model} is still loaded.").format(model=loaded)
        index = self.model_picker.findData(loaded) if loaded is not None else 0
        self.model_picker.setCurrentIndex(max(index, 0))  # not a pick: picks are `activated`
        self.show_error(message, cause="model")  # ends when a model loads

    def restore_last_model(self, crashed: str | None = None) -> None:
        """At start: load the model of the last session, unless it was in use when Ember crashed
        (`crashed`: it may be what crashed; the user picks it again if they want it)."""
        last = self.settings.last_model
        if not last:
            return
        if last == crashed:
            self.show_notice(
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
        return self._loading_name or (self._loaded_name if self.model is not None else None)

    def _start_load(self, name: str, ref: ModelRef, alias: str) -> None:
        if self._loading_name is not None:
            # a new pick replaces the load in progress: it is cancelled, and what it still says
            # is dropped by the bridge (only the last load asked for is reported)
            self.bridge.cancel_load()
        self._loading_name = name
        self.set_model_state(ModelState.LOADING)
        self.bridge.load(ref, alias)

    def _load_defaults(self) -> Settings:
        """How a model without its own load settings is loaded: the settings, at the panel's context."""
        return self.settings.with_changes(context_length=self.side.params.context.value())

    def unload_model(self) -> None:
        def act() -> None:
            self.bridge.unload()
            self.model = None
            self._loaded_name = None

        self.tasks.cancel("load")  # a pick still being worked out is dropped too
        if self._loading_name is not None:
            self.bridge.cancel_load()
            return
        self.controller.after_stop(act)

    def import_model_file(self) -> None:
        mm = self.model_manager()
        mm.show()
        mm.import_dialog()

    def change_models_folder(self, folder: Path | None = None) -> None:
        """Use another folder for models (downloads go there too). Files are not moved."""
        if folder is None:
            chosen = QFileDialog.getExistingDirectory(self, self.tr("Models folder"), str(self.library.models_dir))
            if not chosen:
                return
            folder = Path(chosen)
        if self.downloads is not None and any(j.state == "downloading" for j in self.downloads.snapshot()):
            self.show_error(self.tr("Pause or finish the running downloads before changing the models folder."))
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.show_error(
                self.tr("Cannot use {folder} as the models folder: {reason}.").format(
                    folder=folder, reason=exc.strerror or exc
                )
            )
            return
        self.settings = self.settings.with_changes(models_dir=str(folder))
        self.settings_file.save(self.settings)
        self.library.models_dir = folder
        if self.downloads is not None:
            self.downloads.models_dir = folder
        if self._manager is not None:
            self._manager.refresh_installed()
        self.reload_models()
        self.show_notice(self.tr("Models folder: {folder}").format(folder=folder))

    def open_models_folder(self) -> None:
        self.library.models_dir.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.library.models_dir)))

    def open_load_settings(self, name: str | None = None) -> None:
        """The ⚙ beside the model picker: this local model's own load settings (the dialog opens once
        the model's header is read, off the GUI thread)."""
        name = name or self.model_picker.currentData()
        if not name or parse_remote_model_name(name) is not None:
            self.show_error(self.tr("Choose a model on this computer in the list first (remote models load remotely)."))
            return
        library, model_settings, defaults = self.library, self.model_settings, self._load_defaults()

        def read() -> tuple[ModelInfo, ModelLoadSettings]:  # the header and the saved settings: disk
            return inspect_gguf(library.resolve(name)), model_settings.effective(name, defaults)

        self.tasks.run(read, lambda found: self._show_load_settings(name, *found), self.show_error, key="load-settings")

    def _show_load_settings(self, name: str, info: ModelInfo, current: ModelLoadSettings) -> None:
        from ember_chat.app.models.load_panel import LoadSettingsDialog

        dialog = LoadSettingsDialog(name, info, current, self)  # it asks nvidia-smi off the GUI thread

        model_settings = self.model_settings

        def saved(settings: ModelLoadSettings, load_now: bool) -> None:
            self.tasks.run(
                lambda: model_settings.save(name, settings),
                lambda _: self.load_model(name) if load_now else None,
                self.show_error,
                key=f"save-load-settings:{name}",
            )

        dialog.saved.connect(saved)
        self._load_settings = dialog  # kept for tests and while open
        dialog.open()
        self.load_settings_opened.emit()

    def open_benchmark(self) -> None:
        """Models ▸ Benchmark…: the running one if a run is on (one at a time), else a fresh one (with
        today's models and connections)."""
        from ember_chat.app.lab.benchmark_dialog import BenchmarkDialog

        current = getattr(self, "_benchmark", None)
        if current is None or not current.running:
            if current is not None:
                current.close()
            current = BenchmarkDialog(
                self.library,
                self.settings,
                self.data_dir,
                self.connections,
                self.model_settings,
                self,
                service=self.bridge.service,  # each model measured with the engine to itself
            )
            self._benchmark = current  # kept while open
        current.show()
        current.raise_()
        current.activateWindow()

    def open_connections(self) -> None:
        from ember_chat.app.models.connections_dialog import ConnectionsDialog

        dialog = ConnectionsDialog(self.connections, self, own_server_id=self.bridge.service.server_id)
        dialog.changed.connect(self.reload_models)
        dialog.use_model.connect(self.load_model)
        dialog.open()
        self._connections_dialog = dialog  # kept for tests and while open
