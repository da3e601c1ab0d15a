"""The main window's model actions: the picker and load/unload, the Model Manager, the models folder,
per-model load settings, the benchmark lab and remote connections. Mixed into MainWindow, whose
widgets and stores they use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFileDialog

from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.resolver import model_ref
from ember_chat.engine.models.gguf_inspect import inspect_gguf
from ember_chat.engine.storage.connections import parse_remote_model_name
from ember_chat.engine.storage.model_settings import ModelLoadSettings
from ember_chat.engine.storage.settings import Settings

if TYPE_CHECKING:
    from ember_chat.app.models.manager import ModelManager


class ModelActions:
    def reload_models(self) -> None:
        self.model_bar.set_models(self.library.entries(), self.connections.list())

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
            )
            self._manager.library_changed.connect(self.reload_models)
            self._manager.load_requested.connect(self.load_model)
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
        """Load a library model (a name, 'starter', a path) or a remote one (remote:<connection>/<id>)."""

        def act() -> None:
            try:
                ref, alias = model_ref(name, self.library, self.connections, self.model_settings, self._load_defaults())
            except EmberError as exc:
                self.show_error(str(exc))
                return
            if self._loading_name is not None:
                # a new pick replaces the load in progress: it is cancelled, and what it still says
                # is dropped by the bridge (only the last load asked for is reported)
                self.bridge.cancel_load()
            self._loading_name = name
            self.set_model_state("loading")
            self.bridge.load(ref, alias)

        self.controller.after_stop(act)

    def _load_defaults(self) -> Settings:
        """How a model without its own load settings is loaded: the settings, at the panel's context."""
        return self.settings.with_changes(context_length=self.side.params.context.value())

    def unload_model(self) -> None:
        def act() -> None:
            self.bridge.unload()
            self.model = None
            self._loaded_name = None

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
        """The ⚙ beside the model picker: this local model's own load settings."""
        from ember_chat.app.models.load_panel import LoadSettingsDialog

        name = name or self.model_picker.currentData()
        if not name or parse_remote_model_name(name) is not None:
            self.show_error(self.tr("Choose a model on this computer in the list first (remote models load remotely)."))
            return
        try:
            info = inspect_gguf(self.library.resolve(name))
        except EmberError as exc:
            self.show_error(str(exc))
            return
        current = self.model_settings.effective(name, self._load_defaults())
        dialog = LoadSettingsDialog(name, info, current, self)

        def saved(settings: ModelLoadSettings, load_now: bool) -> None:
            try:
                self.model_settings.save(name, settings)
            except EmberError as exc:
                self.show_error(str(exc))
                return
            if load_now:
                self.load_model(name)

        dialog.saved.connect(saved)
        self._load_settings = dialog  # kept for tests and while open
        dialog.open()

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

        dialog = ConnectionsDialog(self.connections, self)
        dialog.changed.connect(self.reload_models)
        dialog.use_model.connect(self.load_model)
        dialog.open()
        self._connections_dialog = dialog  # kept for tests and while open
