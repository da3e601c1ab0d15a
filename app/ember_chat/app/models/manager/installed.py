"""The Model Manager's Installed tab: the models on this computer (listed, then each header read, off
the GUI thread), the loaded one marked; load, delete, reveal, and import. A widget the ModelManager
holds (`manager.installed_tab`): it owns its table, the header reads and the import question; the
library, the task runner and the banner are the manager's, handed in.

Import checks the file first (off the GUI thread): a file that is not a GGUF model is said so in the
banner, and one identical to an installed model is pointed at, before any question; only then does
it ask whether to copy the file into Ember or use it where it is.

A vision model without its projector ("vision needs the projector file") gets a Download projector
button: its repository is listed on the Hub off the GUI thread, the projector that pairs with it is
queued to land beside it (engine.models.projector_download), and the row says "vision" once it is
there; why it cannot be done (an imported file, no projector in the repository, offline) is said in
the banner."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFont, QHideEvent, QShowEvent
from PySide6.QtWidgets import QFileDialog, QLabel, QMessageBox, QPushButton, QVBoxLayout, QWidget

from ember_chat.app.engine_link.api_models import ApiModels, idle_text
from ember_chat.app.engine_link.model_names import model_label
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.models.manager.tables import (
    StatusBanner,
    button_row,
    human_size,
    make_table,
    note_item,
    table_item,
)
from ember_chat.app.qt.plain_text import ask, plain_message
from ember_chat.engine.inference.pool.memory import mb
from ember_chat.engine.inference.pool.pool import ModelState
from ember_chat.engine.models.download_queue import DownloadQueue
from ember_chat.engine.models.downloader import DownloadSpec
from ember_chat.engine.models.gguf_inspect import ModelInfo
from ember_chat.engine.models.hub import HubClient
from ember_chat.engine.models.library import ImportCheck, ModelEntry, ModelLibrary
from ember_chat.engine.models.projector import is_vision_architecture
from ember_chat.engine.models.projector_download import ProjectorUnavailable, check_downloadable, projector_download

API_COLUMN = 10  # the logical column of what the local API server loaded (shown second)


class InstalledTab(QWidget):
    library_changed = Signal()  # a model was imported or deleted
    load_requested = Signal(str)  # the user wants to chat with this model
    installed_listed = Signal()  # the models are listed (their headers may follow)
    headers_read = Signal()  # every listed model's header has been read
    import_checked = Signal()  # a file to import was checked: the banner or the question shows
    import_started = Signal()  # a file is being checked for import (the manager shows this tab)
    projector_checked = Signal()  # Download projector has its answer: queued, or why not (in the banner)
    projector_queued = Signal()  # a model's projector was queued for download
    downloads_wanted = Signal()  # the user asked to see the Downloads tab
    api_models_shown = Signal()  # the API column shows what the local API server has loaded now (tests)

    def __init__(
        self,
        library: ModelLibrary,
        tasks: TaskRunner,
        banner: StatusBanner,
        loaded_model: Callable[[], str | None],
        parent: QWidget | None = None,
        queue: DownloadQueue | None = None,
        hub_factory: Callable[[], HubClient] | None = None,
        api: ApiModels | None = None,
    ) -> None:
        """`loaded_model()`: the library name of the model loaded in the window (see show_loaded);
        `queue` and `hub_factory` (made on a task's thread): for Download projector; `api`: the local
        API server's models loaded for requests (the API column, Unload from API)."""
        super().__init__(parent)
        self.api = api
        self._api_rows: dict[str, ModelState] = {}  # the models the API loaded, by the pool's name
        self.library = library
        self.queue = queue
        self.hub_factory = hub_factory
        self._needs_projector: set[str] = set()  # vision models without their projector (headers read)
        self._projector_coming: str | None = None  # the model whose projector is being downloaded
        self.tasks = tasks
        self.banner = banner
        self.loaded_model = loaded_model
        self.headers = TaskRunner(self, workers=1)  # the models' GGUF headers, one file at a time
        self._unread = 0  # listed models whose header is still being read
        self.import_question: QMessageBox | None = None  # the copy / use-in-place question, while it is open
        self.import_copy: QPushButton | None = None  # its buttons
        self.import_in_place: QPushButton | None = None
        v = QVBoxLayout(self)
        self.installed = make_table(
            [
                self.tr("Name"),
                self.tr("Architecture"),
                self.tr("Parameters"),
                self.tr("Quantization"),
                self.tr("Size"),
                self.tr("Context"),
                self.tr("Chat template"),
                self.tr("Source"),
                self.tr("Added"),
                self.tr("Vision"),
                self.tr("Local API server"),
            ],
            self.tr("Installed models"),
            self.tr("The models on this computer; select one to load, reveal or delete it"),
        )
        # Vision is shown third (after Architecture), where a 980-px Model Manager still shows it; the
        # logical column stays the last
        self.installed.horizontalHeader().moveSection(9, 2)
        # what the local API server loaded: beside the name, and only while it has loaded a model
        self.installed.horizontalHeader().moveSection(API_COLUMN, 1)
        self.installed.setColumnHidden(API_COLUMN, True)
        v.addWidget(self.installed, 1)
        self.installed_status = QLabel()
        self.installed_status.setTextFormat(Qt.TextFormat.PlainText)  # errors name files: never markup
        self.installed_status.setWordWrap(True)
        self.installed_status.setAccessibleName(self.tr("Installed models status"))
        v.addWidget(self.installed_status)
        buttons = button_row(
            (self.tr("Load"), self.tr("Load the selected model to chat with it"), self.load_selected),
            (
                self.tr("Download projector"),
                self.tr("Download the selected vision model's projector (mmproj) file beside it, so it sees images"),
                self.download_projector,
            ),
            (
                self.tr("Unload from API"),
                self.tr(
                    "Unload the selected model, loaded by the local API server for a request (a later one "
                    "loads it again)"
                ),
                self.unload_api_selected,
            ),
            (self.tr("Delete…"), self.tr("Delete the selected model from disk"), self.delete_selected),
            (self.tr("Show in folder"), self.tr("Open the folder that holds the selected model"), self.reveal_selected),
            (self.tr("Import .gguf…"), self.tr("Add a GGUF model file from this computer"), self.import_dialog),
            (self.tr("Refresh"), self.tr("List the installed models again"), self.refresh_installed),
        )
        self.projector_btn: QPushButton = buttons.itemAt(1).widget()
        self.projector_btn.hide()  # only for a vision model without its projector
        self.unload_api_btn: QPushButton = buttons.itemAt(2).widget()
        self.unload_api_btn.hide()  # only for a model the API loaded
        self.installed.itemSelectionChanged.connect(self._show_projector_button)
        self.installed.itemSelectionChanged.connect(self._show_unload_api_button)
        v.addLayout(buttons)
        self._api_clock = QTimer(self)  # "idle for" goes on while the tab is shown (as the API dialog's)
        self._api_clock.setInterval(10_000)
        self._api_clock.timeout.connect(self.read_api_models)
        if api is not None:
            api.pool_changed.connect(self.read_api_models)

    def refresh_installed(self) -> None:
        """List the models (off the GUI thread); each row shows as soon as the list is known, and its
        header columns fill in as each file's header is read."""
        library = self.library
        self.tasks.run(library.entries, self._show_installed, self.installed_status.setText, key="installed")

    def _show_installed(self, entries: list[ModelEntry]) -> None:
        locations = {
            "models folder": self.tr("models folder"),
            "in place": self.tr("in place"),
            "Hugging Face cache": self.tr("Hugging Face cache"),
            "bundled": self.tr("bundled"),
        }
        self.headers.cancel_all()  # the headers of an earlier listing are not wanted any more
        self.installed.setRowCount(0)
        self._unread = 0
        self._needs_projector.clear()
        for e in entries:
            r = self.installed.rowCount()
            self.installed.insertRow(r)
            date = datetime.fromtimestamp(e.modified).date().isoformat() if e.modified else "—"
            reading = self.tr("reading…")
            arch = self.tr("prepared on first load") if e.path is None else reading
            cells = [
                "",  # the name: see show_loaded
                arch,
                "—" if e.path is None else reading,
                "—",
                human_size(e.size),
                "—",
                "—",
                f"{e.source_repo or '—'} · {locations.get(e.location, e.location)}",
                date,
                self.tr("vision ({file})").format(file=e.mmproj.name) if e.mmproj is not None else "—",
            ]
            for c, text in enumerate(cells):
                self.installed.setItem(r, c, table_item(text, e if c == 0 else None))
            if e.path is not None:
                self._unread += 1
                self.headers.run(
                    e.info,
                    lambda info, e=e: self._show_header(e, info),
                    lambda error, e=e: self._show_header(e, None, error),
                )
        self.show_loaded()
        self._show_api_column()
        arrived = next((e for e in entries if e.name == self._projector_coming and e.mmproj is not None), None)
        if arrived is not None and arrived.mmproj is not None:
            self._projector_coming = None
            self.banner.show_message(
                self.tr("{name} sees images now: its projector {file} is beside it.").format(
                    name=arrived.name, file=arrived.mmproj.name
                )
            )
        n, folder = len(entries), self.library.models_dir
        self.installed_status.setText(
            self.tr("%n model in {folder}", "", n).format(folder=folder)
            if n == 1
            else self.tr("%n models in {folder}", "", n).format(folder=folder)
        )
        self.installed_listed.emit()
        if not self._unread:
            self.headers_read.emit()

    def show_loaded(self, _state: object = None) -> None:
        """Name each row, the model loaded in the window marked (bold, "loaded")."""
        loaded = self.loaded_model()
        for r in range(self.installed.rowCount()):
            item = self.installed.item(r, 0)
            e: ModelEntry = item.data(Qt.ItemDataRole.UserRole)
            label = model_label(e.name)
            is_loaded = loaded is not None and e.name == loaded
            item.setText(self.tr("● {name} — loaded").format(name=label) if is_loaded else label)
            font = QFont(item.font())
            font.setBold(is_loaded)
            item.setFont(font)
            item.setToolTip(self.tr("Loaded in the chat window") if is_loaded else "")

    # ----- the models the local API server loaded for requests
    def showEvent(self, event: QShowEvent) -> None:  # Qt override
        super().showEvent(event)
        self.read_api_models()
        if self.api is not None:
            self._api_clock.start()

    def hideEvent(self, event: QHideEvent) -> None:  # Qt override
        self._api_clock.stop()
        super().hideEvent(event)

    def read_api_models(self) -> None:
        """Ask the server's control for the models the API loaded (the rows come on the GUI thread)."""
        if self.api is not None:
            self.api.read_pool(self.show_api_models)

    def show_api_models(self, rows: list[ModelState]) -> None:
        self._api_rows = {row.name: row for row in rows}
        self._show_api_column()
        self._show_unload_api_button()
        self.api_models_shown.emit()

    def api_row(self, entry: ModelEntry) -> ModelState | None:
        """What the API loaded of this model (the pool names it by its library name, else its file's)."""
        names = [entry.name] + ([entry.path.name, entry.path.stem] if entry.path is not None else [])
        return next((self._api_rows[n] for n in names if n in self._api_rows), None)

    def api_text(self, row: ModelState) -> str:
        """ "Loaded by the API · 412 MB · idle 2 min" (answering, loading)."""
        idle = idle_text(row)
        if row.state == "loading":
            return self.tr("Loading for the API…")
        if idle == "answering":
            return self.tr("Loaded by the API · {memory} · answering").format(memory=mb(row.memory_bytes))
        return self.tr("Loaded by the API · {memory} · idle {idle}").format(memory=mb(row.memory_bytes), idle=idle)

    def _show_api_column(self) -> None:
        table = self.installed
        for r in range(table.rowCount()):
            row = self.api_row(table.item(r, 0).data(Qt.ItemDataRole.UserRole))
            item = table_item(self.api_text(row) if row is not None else "")
            if row is not None:
                item.setToolTip(
                    self.tr("The local API server loaded it for a request; Unload from API frees its memory")
                )
            table.setItem(r, API_COLUMN, item)
        table.setColumnHidden(API_COLUMN, not self._api_rows)

    def _show_unload_api_button(self) -> None:
        e = self.selected_entry()
        row = self.api_row(e) if e is not None else None
        self.unload_api_btn.setVisible(row is not None)
        self.unload_api_btn.setEnabled(row is not None and row.state == "loaded")

    def unload_api_selected(self) -> None:
        """Unload the selected model from the local API server (off the GUI thread); a model answering a
        request is not unloaded, and the banner says why."""
        e = self.selected_entry()
        row = self.api_row(e) if e is not None else None
        if row is None or self.api is None:
            return
        self.banner.hide()
        self.api.unload_api_model(row.name, self.banner.show_message)  # (a refusal is a notice: nothing lost)

    def _show_header(self, entry: ModelEntry, i: ModelInfo | None, error: str = "") -> None:
        table = self.installed
        named = (
            r for r in range(table.rowCount()) if table.item(r, 0).data(Qt.ItemDataRole.UserRole).name == entry.name
        )
        row = next(named, None)
        if row is not None:
            notes: dict[int, str] = {}  # sentences: elided, whole in their tooltip
            if i is None:
                cells = {2: "—"}
                notes[1] = self.tr("damaged: {error}").format(error=error)
            else:
                n = i.parameter_count
                params = f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"
                cells = {
                    1: i.architecture,
                    2: params,
                    3: i.quantization,
                    5: f"{i.context_length:,}" if i.context_length else "—",
                    6: self.tr("yes") if i.has_chat_template else self.tr("no"),
                }
                if entry.mmproj is None and is_vision_architecture(i):  # (the most common vision complaint)
                    cells[9] = self.tr("vision needs the projector file")
                    self._needs_projector.add(entry.name)
            for c, text in cells.items():
                self.installed.setItem(row, c, table_item(text))
            for c, text in notes.items():
                self.installed.setItem(row, c, note_item(text, self.installed))
            if 9 in cells:
                self.installed.item(row, 9).setToolTip(
                    self.tr(
                        "It cannot see images without its projector (mmproj): select it and click Download projector"
                    )
                )
                self._show_projector_button()
        self._unread -= 1
        if self._unread == 0:
            self.headers_read.emit()

    def selected_entry(self) -> ModelEntry | None:
        items = self.installed.selectedItems()
        if not items:
            return None
        return self.installed.item(items[0].row(), 0).data(Qt.ItemDataRole.UserRole)

    def select_installed(self, name: str) -> bool:
        for r in range(self.installed.rowCount()):
            if self.installed.item(r, 0).data(Qt.ItemDataRole.UserRole).name == name:
                self.installed.selectRow(r)
                return True
        return False

    def _show_projector_button(self) -> None:
        e = self.selected_entry()
        self.projector_btn.setVisible(e is not None and e.name in self._needs_projector)

    def download_projector(self) -> None:
        """Queue the selected vision model's projector to land beside it (its repository is listed on
        the Hub off the GUI thread); or say in the banner why that cannot be done."""
        e = self.selected_entry()
        if e is None or e.name not in self._needs_projector:
            return
        models_dir, queue, hub_factory = self.library.models_dir, self.queue, self.hub_factory
        try:
            if queue is None or hub_factory is None:
                raise ProjectorUnavailable(self.tr("Downloads are not available here."))
            check_downloadable(e, models_dir)
        except ProjectorUnavailable as exc:
            self.banner.show_message(str(exc))
            self.projector_checked.emit()
            return
        self.banner.hide()
        self.installed_status.setText(self.tr("Looking for the projector of {name} on the Hub…").format(name=e.name))

        def queued(spec: DownloadSpec) -> None:
            queue.add(spec)
            self._projector_coming = e.name
            self.installed_status.clear()
            self.banner.show_message(
                self.tr("Downloading {file} beside {name}; it sees images once the download is done.").format(
                    file=spec.local_name.rsplit("/", 1)[-1], name=e.name
                ),
                action=(self.tr("Show downloads"), self.tr("Show the Downloads tab"), self.downloads_wanted.emit),
            )
            self.projector_queued.emit()
            self.projector_checked.emit()

        def failed(message: str) -> None:
            self.installed_status.clear()
            self.banner.show_message(message, error=True)
            self.projector_checked.emit()

        self.tasks.run(lambda: projector_download(e, models_dir, hub_factory()), queued, failed, key="projector")

    def load_selected(self) -> None:
        e = self.selected_entry()
        if e is not None:
            self.load_requested.emit(e.name)

    def delete_selected(self, confirmed: bool = False) -> None:
        e = self.selected_entry()
        if e is None:
            return
        if not confirmed:
            answer = ask(
                self,
                self.tr("Delete model"),
                self.tr("Delete {name} ({size}) from disk?").format(name=e.name, size=human_size(e.size)),
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        library = self.library
        self.installed_status.setText(self.tr("Deleting {name}…").format(name=e.name))
        self.tasks.run(lambda: library.delete(e.name), self._deleted, self.installed_status.setText)

    def _deleted(self, _: None) -> None:
        self.refresh_installed()
        self.library_changed.emit()

    def reveal_selected(self) -> None:
        e = self.selected_entry()
        folder = e.path.parent if e is not None and e.path is not None else self.library.models_dir
        folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))

    # ----- import
    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, self.tr("Import a GGUF model"), str(Path.home()), self.tr("GGUF models (*.gguf)")
        )
        if path:
            self.start_import(Path(path))

    def start_import(self, path: Path) -> None:
        """Check the file off the GUI thread (`import_checked` when done), then say what is wrong with
        it, point at the installed copy, or ask how to import it."""
        self.import_started.emit()
        self.banner.hide()
        self.installed_status.setText(self.tr("Checking {name}…").format(name=path.name))
        library = self.library

        def failed(message: str) -> None:
            self.installed_status.clear()
            self.banner.show_message(message, error=True)
            self.import_checked.emit()

        self.tasks.run(lambda: library.check_import(path), lambda c: self._import_checked(path, c), failed)

    def _import_checked(self, path: Path, check: ImportCheck) -> None:
        self.installed_status.clear()
        if check.duplicate is not None:
            name = model_label(check.duplicate.name)
            self.banner.show_message(
                self.tr("{file} is already installed as {name}; there is nothing to import.").format(
                    file=path.name, name=name
                )
            )
            self.select_installed(check.duplicate.name)
            self.import_checked.emit()
            return
        box = plain_message(QMessageBox(self))
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle(self.tr("Import model"))
        box.setText(
            self.tr("Import {model} ({size})?").format(model=check.info.name, size=human_size(check.info.file_size))
        )
        box.setInformativeText(
            self.tr(
                "Copy into Ember: the models folder gets its own copy, and the original can be moved or deleted.\n"
                "Use where it is: no copy is made; the file must stay where it is."
            )
        )
        self.import_copy = box.addButton(self.tr("Copy into Ember"), QMessageBox.ButtonRole.AcceptRole)
        self.import_in_place = box.addButton(self.tr("Use where it is"), QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(self.import_copy)
        box.buttonClicked.connect(lambda button: self._import_answered(path, button))
        self.import_question = box
        box.open()
        self.import_checked.emit()

    def shutdown(self) -> None:
        """Header reads still out are dropped and interrupted, never waited for."""
        self.headers.shutdown()

    def join(self, timeout: float) -> bool:
        return self.headers.join(timeout)

    def _import_answered(self, path: Path, button: QPushButton) -> None:
        self.import_question = None
        if button is self.import_copy:
            self.import_file(path, copy=True)
        elif button is self.import_in_place:
            self.import_file(path, copy=False)

    def import_file(self, path: Path, copy: bool = True) -> None:
        self.installed_status.setText(self.tr("Importing {name}…").format(name=path.name))
        library = self.library

        def failed(message: str) -> None:
            self.installed_status.clear()
            self.banner.show_message(message, error=True)

        self.tasks.run(lambda: library.import_file(path, copy), self._imported, failed)

    def _imported(self, entry: ModelEntry) -> None:
        self.refresh_installed()  # (its count replaces the status line)
        self.banner.show_message(self.tr("Added {name} to your models.").format(name=entry.name))
        self.library_changed.emit()
