"""Models ▸ Model Manager…: Discover (curated catalog and Hub search, files by quantization with a
fit label for this machine), Installed (load, delete, reveal, import) and Downloads (progress, speed,
ETA; pause, resume, cancel). Network work runs off the GUI thread; downloads run in the engine's
download queue and are shown from its snapshots a few times a second."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.tasks import TaskRunner
from ember_chat.app.theme import active_colors
from ember_chat.engine.errors import EmberError
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
from ember_chat.engine.models.downloader import DownloadSpec
from ember_chat.engine.models.fit import estimate_fit, free_vram_bytes, recommend
from ember_chat.engine.models.hub import HubClient, ModelVariant, RepoFiles, RepoSummary
from ember_chat.engine.models.library import ModelEntry, ModelLibrary
from ember_chat.engine.resources import catalog
from ember_chat.engine.storage.secrets import TokenStore


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _table(headers: list[str], name: str, description: str) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.verticalHeader().hide()
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    t.horizontalHeader().setStretchLastSection(True)
    t.setAccessibleName(name)
    t.setAccessibleDescription(description)
    return t


def _item(text: str, data: object = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    if data is not None:
        it.setData(Qt.ItemDataRole.UserRole, data)
    return it


def _button_row(*buttons: tuple[str, str, Callable[[], object]]) -> QHBoxLayout:
    """Buttons from (text, tooltip, slot); the texts and tooltips come translated."""
    row = QHBoxLayout()
    for text, tip, slot in buttons:
        b = QPushButton(text)
        b.setAccessibleName(text.replace("&", ""))
        b.setToolTip(tip)
        b.clicked.connect(slot)
        row.addWidget(b)
    row.addStretch(1)
    return row


class ModelManager(QDialog):
    library_changed = Signal()  # a download finished, a model was imported or deleted
    load_requested = Signal(str)  # the user wants to chat with this model
    files_shown = Signal()  # a repo's files are listed (tests wait on this)
    search_done = Signal()

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

    # ----- Discover
    def _build_discover(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        row = QHBoxLayout()
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText(self.tr("Search the Hugging Face Hub for GGUF models (e.g. llama 3b)"))
        self.search_box.setAccessibleName(self.tr("Search the Hub"))
        self.search_box.returnPressed.connect(self.search)
        search_btn = QPushButton(self.tr("Search"))
        search_btn.setAccessibleName(self.tr("Search"))
        search_btn.setToolTip(self.tr("Search the Hugging Face Hub for GGUF repositories"))
        search_btn.clicked.connect(self.search)
        catalog_btn = QPushButton(self.tr("Catalog"))
        catalog_btn.setAccessibleName(self.tr("Catalog"))
        catalog_btn.setToolTip(self.tr("Well-known instruct models, picked by Ember"))
        catalog_btn.clicked.connect(self.show_catalog)
        token_btn = QPushButton(self.tr("Token…"))
        token_btn.setAccessibleName(self.tr("Hugging Face token"))
        token_btn.setToolTip(self.tr("A Hugging Face token for gated or private repos (kept in the OS keychain)"))
        token_btn.clicked.connect(self.ask_token)
        for x in (self.search_box, search_btn, catalog_btn, token_btn):
            row.addWidget(x)
        v.addLayout(row)
        self.discover_status = QLabel()
        self.discover_status.setWordWrap(True)
        self.discover_status.setAccessibleName(self.tr("Discover status"))
        v.addWidget(self.discover_status)
        split = QSplitter(Qt.Orientation.Vertical)
        self.repos = _table(
            [self.tr("Repository"), self.tr("Downloads"), self.tr("Likes"), self.tr("Updated / about")],
            self.tr("Repositories"),
            self.tr("Search results: one row per model repository; select one to see its files"),
        )
        self.repos.itemSelectionChanged.connect(self._repo_selected)
        self.files = _table(
            [self.tr("Quantization"), self.tr("Size"), self.tr("Fit on this machine"), self.tr("Files")],
            self.tr("Model files"),
            self.tr("The GGUF files of the selected repository, with whether each fits this machine"),
        )
        split.addWidget(self.repos)
        bottom = QWidget()
        bv = QVBoxLayout(bottom)
        bv.setContentsMargins(0, 0, 0, 0)
        self.files_title = QLabel(self.tr("Choose a repository to see its files."))
        bv.addWidget(self.files_title)
        bv.addWidget(self.files)
        self.download_btn = QPushButton(self.tr("Download selected file"))
        self.download_btn.setAccessibleName(self.tr("Download selected file"))
        self.download_btn.setToolTip(self.tr("Download the selected file into the models folder (resumable)"))
        self.download_btn.clicked.connect(self.download_selected)
        bv.addWidget(self.download_btn, alignment=Qt.AlignmentFlag.AlignRight)
        split.addWidget(bottom)
        v.addWidget(split, 1)
        return w

    def show_catalog(self) -> None:
        self.repos.setRowCount(0)
        for e in catalog():
            r = self.repos.rowCount()
            self.repos.insertRow(r)
            self.repos.setItem(r, 0, _item(f"{e.name}  ({e.repo})", e.repo))
            self.repos.setItem(r, 1, _item(e.params))
            self.repos.setItem(r, 2, _item(e.licence))
            self.repos.setItem(r, 3, _item(e.description))
        self.repos.setHorizontalHeaderLabels([self.tr("Model"), self.tr("Size"), self.tr("Licence"), self.tr("About")])
        self.discover_status.setText(self.tr("Curated catalog. Search to find any GGUF repository on the Hub."))

    def search(self) -> None:
        query = self.search_box.text().strip()
        self.discover_status.setText(self.tr("Searching for “{query}”…").format(query=query))
        hub = self.hub_factory()
        self.tasks.run(lambda: hub.search(query), self._show_results, self._discover_error)

    def _show_results(self, found: list[RepoSummary]) -> None:
        self.repos.setRowCount(0)
        self.repos.setHorizontalHeaderLabels(
            [self.tr("Repository"), self.tr("Downloads"), self.tr("Likes"), self.tr("Updated")]
        )
        for s in found:
            r = self.repos.rowCount()
            self.repos.insertRow(r)
            self.repos.setItem(r, 0, _item(s.id, s.id))
            self.repos.setItem(r, 1, _item(f"{s.downloads:,}"))
            self.repos.setItem(r, 2, _item(f"{s.likes:,}"))
            self.repos.setItem(r, 3, _item(s.last_modified.date().isoformat() if s.last_modified else ""))
        self.discover_status.setText(
            self.tr("{count} repositories, most downloaded first.").format(count=len(found))
            if found
            else self.tr("No GGUF repositories found.")
        )
        self.search_done.emit()

    def _discover_error(self, message: str) -> None:
        self.discover_status.setText(f"<span style='color:{active_colors().error}'>{message}</span>")
        self.search_done.emit()
        self.files_shown.emit()

    def _repo_selected(self) -> None:
        items = self.repos.selectedItems()
        if not items:
            return
        repo = self.repos.item(items[0].row(), 0).data(Qt.ItemDataRole.UserRole)
        self.open_repo(repo)

    def open_repo(self, repo: str) -> None:
        self.files_title.setText(self.tr("Files of {repo}…").format(repo=repo))
        self.files.setRowCount(0)
        hub = self.hub_factory()
        self.tasks.run(
            lambda: (hub.with_header(hub.files(repo)), free_vram_bytes()), self._show_files, self._discover_error
        )

    def _show_files(self, result: tuple[RepoFiles, int | None]) -> None:
        files, vram = result
        self.repo_files = files
        n_ctx = self.context_length()
        load = self.load_settings()
        fits = [
            (v, estimate_fit(v.size, n_ctx, free_vram=vram, meta=files.header, gpu_layers=load[0], kv_type=load[1]))
            for v in files.variants
        ]
        best = recommend([(v.quantization, f.label) for v, f in fits])
        labels = {
            "fits": self.tr("✔ fits"),
            "tight": self.tr("≈ tight"),
            "won't fit": self.tr("✘ won't fit"),
            "unknown": self.tr("? unknown"),
        }
        self.files.setRowCount(0)
        for v, fit in fits:
            r = self.files.rowCount()
            self.files.insertRow(r)
            quant_text = (
                self.tr("{quantization}  ★ recommended").format(quantization=v.quantization)
                if v.quantization == best
                else v.quantization
            )
            fit_text = self.tr("{label} ({needed} of {free} {where})").format(
                label=labels[fit.label],
                needed=human_size(fit.needed_bytes),
                free=human_size(fit.free_bytes),
                where=fit.where,
            )
            parts = self.tr("{name} ({count} parts)").format(name=v.name, count=len(v.files))
            cells = [
                _item(quant_text, v),
                _item(human_size(v.size)),
                _item(fit_text),
                _item(v.name if len(v.files) == 1 else parts),
            ]
            for c, cell in enumerate(cells):
                if v.quantization == best:
                    f = QFont()
                    f.setBold(True)
                    cell.setFont(f)
                self.files.setItem(r, c, cell)
        title = (
            self.tr("{repo} (gated: needs a token) — fit for a {tokens}-token context")
            if files.gated
            else self.tr("{repo} — fit for a {tokens}-token context")
        )
        self.files_title.setText(title.format(repo=files.repo_id, tokens=f"{n_ctx:,}"))
        self.files_shown.emit()

    def selected_variant(self) -> ModelVariant | None:
        items = self.files.selectedItems()
        if not items:
            return None
        return self.files.item(items[0].row(), 0).data(Qt.ItemDataRole.UserRole)

    def download_selected(self) -> None:
        v = self.selected_variant()
        if v is None or self.repo_files is None:
            self.discover_status.setText(self.tr("Choose a file to download first."))
            return
        self.download(self.repo_files, v)

    def download(self, files: RepoFiles, v: ModelVariant) -> list[int]:
        ids = [
            self.queue.add(DownloadSpec(files.repo_id, f.path, files.commit or "main", f.size, f.sha256))
            for f in v.files
        ]
        self.tabs.setCurrentIndex(2)
        self.refresh_downloads()
        return ids

    def ask_token(self) -> None:
        token, ok = QInputDialog.getText(
            self,
            self.tr("Hugging Face token"),
            self.tr("Token (kept in your OS keychain; sent only to the Hub). Leave empty to remove it:"),
            QLineEdit.EchoMode.Password,
        )
        if ok:
            self.set_token(token)

    def set_token(self, token: str) -> None:
        try:
            self.tokens.set(token)
        except EmberError as exc:
            self.discover_status.setText(str(exc))
            return
        self.discover_status.setText(
            self.tr("Token saved in the keychain.") if token.strip() else self.tr("Token removed.")
        )

    # ----- Installed
    def _build_installed(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        self.installed = _table(
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
        self.installed_status.setWordWrap(True)
        self.installed_status.setAccessibleName(self.tr("Installed models status"))
        v.addWidget(self.installed_status)
        v.addLayout(
            _button_row(
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
        entries = self.library.entries()
        locations = {
            "models folder": self.tr("models folder"),
            "in place": self.tr("in place"),
            "Hugging Face cache": self.tr("Hugging Face cache"),
            "bundled": self.tr("bundled"),
        }
        self.installed.setRowCount(0)
        for e in entries:
            r = self.installed.rowCount()
            self.installed.insertRow(r)
            arch = params = quant = ctx = tmpl = "—"
            if e.path is None:
                arch = self.tr("prepared on first load")
            else:
                try:
                    i = e.info()
                    arch, quant = i.architecture, i.quantization
                    params = (
                        f"{i.parameter_count / 1e9:.2f} B"
                        if i.parameter_count >= 1e9
                        else f"{i.parameter_count / 1e6:.0f} M"
                    )
                    ctx = f"{i.context_length:,}" if i.context_length else "—"
                    tmpl = self.tr("yes") if i.has_chat_template else self.tr("no")
                except EmberError as exc:
                    arch = self.tr("damaged: {error}").format(error=exc)
            label = self.tr("Gemma 3 270M (starter)") if e.is_starter else e.name
            date = datetime.fromtimestamp(e.modified).date().isoformat() if e.modified else "—"
            cells = [
                label,
                arch,
                params,
                quant,
                human_size(e.size),
                ctx,
                tmpl,
                f"{e.source_repo or '—'} · {locations.get(e.location, e.location)}",
                date,
            ]
            for c, text in enumerate(cells):
                self.installed.setItem(r, c, _item(text, e if c == 0 else None))
        self.installed_status.setText(
            self.tr("{count} models in {folder}").format(count=len(entries), folder=self.library.models_dir)
        )

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
        try:
            self.library.delete(e.name)
        except EmberError as exc:
            self.installed_status.setText(str(exc))
            return
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
        self.tasks.run(lambda: self.library.import_file(path, copy), self._imported, self.installed_status.setText)

    def _imported(self, entry: ModelEntry) -> None:
        self.refresh_installed()
        self.installed_status.setText(self.tr("Imported {name}.").format(name=entry.name))
        self.library_changed.emit()

    # ----- Downloads
    def _build_downloads(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        self.downloads = _table(
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
            _button_row(
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
        self.downloads.setItem(r, 0, _item(j.spec.filename, j.id))
        self.downloads.setItem(r, 1, _item(j.spec.repo_id))
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
        self.downloads.setItem(r, 3, _item(speed))
        self.downloads.setItem(r, 4, _item(eta))
        state = {
            QUEUED: self.tr("queued"),
            DOWNLOADING: self.tr("downloading"),
            PAUSED: self.tr("paused"),
            DONE: self.tr("done ✔"),
            FAILED: self.tr("failed"),
            CANCELLED: self.tr("cancelled"),
        }.get(j.state, j.state)
        item = _item(f"{state}: {j.error}" if j.error else state)
        if j.error:
            item.setToolTip(j.error)
        self.downloads.setItem(r, 5, item)

    def shutdown(self) -> None:
        self._poll.stop()
        self.tasks.shutdown()
