"""Models ▸ Model Manager…: Discover (curated catalog and Hub search, files by quantization with a
fit label for this machine), Installed (load, delete, reveal, import) and Downloads (progress, speed,
ETA; pause, resume, cancel). Network, disk and keychain work (Hub search, listing the models folder,
reading each model's header, import, delete, the token) runs on the manager's task runner, off the
GUI thread; a newer search or listing supersedes one still out. Downloads run in the engine's
download queue and are shown from its snapshots a few times a second."""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.models.manager_discover import DiscoverTab
from ember_chat.app.models.manager_tables import button_row, human_size, make_table, table_item
from ember_chat.app.qt.tasks import TaskRunner
from ember_chat.engine.models.download_queue import (
    CANCELLED,
    DONE,
    DOWNLOADING,
    FAILED,
    PAUSED,
    QUEUED,
    DownloadQueue,
    JobStatus,
)
from ember_chat.engine.models.gguf_inspect import ModelInfo
from ember_chat.engine.models.hub import HubClient, RepoFiles
from ember_chat.engine.models.library import ModelEntry, ModelLibrary
from ember_chat.engine.storage.secrets import TokenStore


class ModelManager(QDialog, DiscoverTab):
    library_changed = Signal()  # a download finished, a model was imported or deleted
    load_requested = Signal(str)  # the user wants to chat with this model
    files_shown = Signal()  # a repo's files are listed (tests wait on this)
    search_done = Signal()
    installed_listed = Signal()  # the Installed tab lists the models (their headers may follow)
    headers_read = Signal()  # every listed model's header has been read into the Installed tab
    token_saved = Signal()  # the token was saved or removed (or could not be)

    def __init__(
        self,
        library: ModelLibrary,
        queue: DownloadQueue,
        hub_factory: Callable[[], HubClient],
        tokens: TokenStore,
        context_length: Callable[[], int],
        parent: QWidget | None = None,
        load_settings: Callable[[], tuple[int, str]] = lambda: (0, "f16"),
    ) -> None:
        """`load_settings()`: (GPU layers, KV cache type) the fit estimate assumes."""
        super().__init__(parent)
        self.setWindowTitle(self.tr("Model Manager"))
        self.resize(980, 620)
        self.library = library
        self.queue = queue
        self.hub_factory = hub_factory
        self.tokens = tokens
        self.context_length = context_length
        self.load_settings = load_settings
        self.tasks = TaskRunner(self)
        self.headers = TaskRunner(self, workers=1)  # the Installed tab's GGUF headers, one file at a time
        self._unread = 0  # listed models whose header is still being read
        self.repo_files: RepoFiles | None = None
        self._states: dict[int, str] = {}

        self.tabs = QTabWidget()
        self.tabs.setAccessibleName(self.tr("Model Manager sections"))
        self.tabs.addTab(self._build_discover(), self.tr("Discover"))
        self.tabs.addTab(self._build_installed(), self.tr("Installed"))
        self.tabs.addTab(self._build_downloads(), self.tr("Downloads"))
        self.tabs.setTabToolTip(0, self.tr("Find models in the catalog or on the Hugging Face Hub"))
        self.tabs.setTabToolTip(1, self.tr("Models on this computer"))
        self.tabs.setTabToolTip(2, self.tr("Downloads in progress and finished"))
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)

        self._poll = QTimer(self)
        self._poll.setInterval(250)  # progress a few times a second, never per chunk
        self._poll.timeout.connect(self.refresh_downloads)
        self._poll.start()
        self.show_catalog()
        self.refresh_installed()
        self.refresh_downloads()

    # ----- Installed
    def _build_installed(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
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
            ],
            self.tr("Installed models"),
            self.tr("The models on this computer; select one to load, reveal or delete it"),
        )
        v.addWidget(self.installed, 1)
        self.installed_status = QLabel()
        self.installed_status.setTextFormat(Qt.TextFormat.PlainText)  # errors name files: never markup
        self.installed_status.setWordWrap(True)
        self.installed_status.setAccessibleName(self.tr("Installed models status"))
        v.addWidget(self.installed_status)
        v.addLayout(
            button_row(
                (self.tr("Load"), self.tr("Load the selected model to chat with it"), self.load_selected),
                (self.tr("Delete…"), self.tr("Delete the selected model from disk"), self.delete_selected),
                (
                    self.tr("Show in folder"),
                    self.tr("Open the folder that holds the selected model"),
                    self.reveal_selected,
                ),
                (self.tr("Import .gguf…"), self.tr("Add a GGUF model file from this computer"), self.import_dialog),
                (self.tr("Refresh"), self.tr("List the installed models again"), self.refresh_installed),
            )
        )
        return w

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
        for e in entries:
            r = self.installed.rowCount()
            self.installed.insertRow(r)
            label = self.tr("Gemma 3 270M (starter)") if e.is_starter else e.name
            date = datetime.fromtimestamp(e.modified).date().isoformat() if e.modified else "—"
            reading = self.tr("reading…")
            arch = self.tr("prepared on first load") if e.path is None else reading
            cells = [
                label,
                arch,
                "—" if e.path is None else reading,
                "—",
                human_size(e.size),
                "—",
                "—",
                f"{e.source_repo or '—'} · {locations.get(e.location, e.location)}",
                date,
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
        self.installed_status.setText(
            self.tr("{count} models in {folder}").format(count=len(entries), folder=self.library.models_dir)
        )
        self.installed_listed.emit()
        if not self._unread:
            self.headers_read.emit()

    def _show_header(self, entry: ModelEntry, i: ModelInfo | None, error: str = "") -> None:
        table = self.installed
        named = (
            r for r in range(table.rowCount()) if table.item(r, 0).data(Qt.ItemDataRole.UserRole).name == entry.name
        )
        row = next(named, None)
        if row is not None:
            if i is None:
                cells = {1: self.tr("damaged: {error}").format(error=error), 2: "—"}
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
            for c, text in cells.items():
                self.installed.setItem(row, c, table_item(text))
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

    def load_selected(self) -> None:
        e = self.selected_entry()
        if e is not None:
            self.load_requested.emit(e.name)

    def delete_selected(self, confirmed: bool = False) -> None:
        e = self.selected_entry()
        if e is None:
            return
        if not confirmed:
            answer = QMessageBox.question(
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

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, self.tr("Import a GGUF model"), str(Path.home()), self.tr("GGUF models (*.gguf)")
        )
        if not path:
            return
        answer = QMessageBox.question(
            self,
            self.tr("Import model"),
            self.tr("Copy the file into Ember's models folder?\n\nYes: copy it. No: use it where it is."),
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No | QMessageBox.StandardButton.Cancel,
        )
        if answer == QMessageBox.StandardButton.Cancel:
            return
        self.import_file(Path(path), copy=answer == QMessageBox.StandardButton.Yes)

    def import_file(self, path: Path, copy: bool = True) -> None:
        self.installed_status.setText(self.tr("Importing {name}…").format(name=path.name))
        library = self.library
        self.tasks.run(lambda: library.import_file(path, copy), self._imported, self.installed_status.setText)

    def _imported(self, entry: ModelEntry) -> None:
        self.refresh_installed()
        self.installed_status.setText(self.tr("Imported {name}.").format(name=entry.name))
        self.library_changed.emit()

    # ----- Downloads
    def _build_downloads(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        self.downloads = make_table(
            [
                self.tr("File"),
                self.tr("Repository"),
                self.tr("Progress"),
                self.tr("Speed"),
                self.tr("ETA"),
                self.tr("State"),
            ],
            self.tr("Downloads"),
            self.tr("Running, paused and finished downloads, with progress, speed and time left"),
        )
        self.downloads.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Fixed)
        self.downloads.setColumnWidth(2, 280)
        v.addWidget(self.downloads, 1)
        v.addLayout(
            button_row(
                (self.tr("Pause"), self.tr("Pause the selected download"), lambda: self._act(self.queue.pause)),
                (self.tr("Resume"), self.tr("Resume the selected download"), lambda: self._act(self.queue.resume)),
                (self.tr("Cancel"), self.tr("Cancel the selected download"), lambda: self._act(self.queue.cancel)),
                (
                    self.tr("Clear finished"),
                    self.tr("Remove finished and cancelled downloads from the list"),
                    self._clear,
                ),
            )
        )
        return w

    def _selected_job(self) -> int | None:
        items = self.downloads.selectedItems()
        return self.downloads.item(items[0].row(), 0).data(Qt.ItemDataRole.UserRole) if items else None

    def _act(self, fn: Callable[[int], None]) -> None:
        jid = self._selected_job()
        if jid is not None:
            fn(jid)
            self.refresh_downloads()

    def _clear(self) -> None:
        self.queue.clear_finished()
        self.refresh_downloads()

    def refresh_downloads(self) -> None:
        jobs = self.queue.snapshot()
        selected = self._selected_job()
        if self.downloads.rowCount() != len(jobs):
            self.downloads.setRowCount(len(jobs))
        for r, j in enumerate(jobs):
            self._show_job(r, j)
            if j.id == selected:
                self.downloads.selectRow(r)
        newly_done = [j for j in jobs if j.state == DONE and self._states.get(j.id) != DONE]
        self._states = {j.id: j.state for j in jobs}
        if newly_done:
            self.refresh_installed()
            self.library_changed.emit()

    def _show_job(self, r: int, j: JobStatus) -> None:
        self.downloads.setItem(r, 0, table_item(j.spec.filename, j.id))
        self.downloads.setItem(r, 1, table_item(j.spec.repo_id))
        bar = self.downloads.cellWidget(r, 2)
        if not isinstance(bar, QProgressBar):
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setAccessibleName(self.tr("Download progress"))
            self.downloads.setCellWidget(r, 2, bar)
        bar.setValue(int(j.fraction * 1000))
        bar.setFormat(f"{j.fraction * 100:.1f} % · {human_size(j.done)} / {human_size(j.total)}")
        speed = f"{human_size(j.speed_bps)}/s" if j.state == DOWNLOADING and j.speed_bps else ""
        eta = f"{j.eta_s:.0f} s" if j.state == DOWNLOADING and j.eta_s is not None else ""
        self.downloads.setItem(r, 3, table_item(speed))
        self.downloads.setItem(r, 4, table_item(eta))
        state = {
            QUEUED: self.tr("queued"),
            DOWNLOADING: self.tr("downloading"),
            PAUSED: self.tr("paused"),
            DONE: self.tr("done ✔"),
            FAILED: self.tr("failed"),
            CANCELLED: self.tr("cancelled"),
        }.get(j.state, j.state)
        item = table_item(f"{state}: {j.error}" if j.error else state)
        if j.error:
            item.setToolTip(f"<p>{html.escape(j.error, quote=False)}</p>")  # shown as written, wrapped
        self.downloads.setItem(r, 5, item)

    def shutdown(self) -> None:
        """Stop polling; tasks still out are dropped and interrupted, never waited for."""
        self._poll.stop()
        self.tasks.shutdown()
        self.headers.shutdown()

    def join(self, timeout: float) -> bool:
        """Wait for the manager's background threads to end (tests, after shutdown)."""
        return self.tasks.join(timeout) and self.headers.join(timeout)
