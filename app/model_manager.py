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
from ember_chat.engine.errors import EmberError
from ember_chat.engine.models.download_queue import DONE, DOWNLOADING, FAILED, PAUSED, QUEUED, DownloadQueue, JobStatus
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


def _table(headers: list[str], name: str) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.verticalHeader().hide()
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    t.horizontalHeader().setStretchLastSection(True)
    t.setAccessibleName(name)
    return t


def _item(text: str, data: object = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    if data is not None:
        it.setData(Qt.ItemDataRole.UserRole, data)
    return it


def _button_row(*buttons: tuple[str, Callable[[], object]]) -> QHBoxLayout:
    row = QHBoxLayout()
    for text, slot in buttons:
        b = QPushButton(text)
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
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Model Manager")
        self.resize(980, 620)
        self.library = library
        self.queue = queue
        self.hub_factory = hub_factory
        self.tokens = tokens
        self.context_length = context_length
        self.tasks = TaskRunner(self)
        self.repo_files: RepoFiles | None = None
        self._states: dict[int, str] = {}

        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_discover(), "Discover")
        self.tabs.addTab(self._build_installed(), "Installed")
        self.tabs.addTab(self._build_downloads(), "Downloads")
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
        self.search_box.setPlaceholderText("Search the Hugging Face Hub for GGUF models (e.g. llama 3b)")
        self.search_box.setAccessibleName("Search the Hub")
        self.search_box.returnPressed.connect(self.search)
        search_btn = QPushButton("Search")
        search_btn.clicked.connect(self.search)
        catalog_btn = QPushButton("Catalog")
        catalog_btn.setToolTip("Well-known instruct models, picked by Ember")
        catalog_btn.clicked.connect(self.show_catalog)
        token_btn = QPushButton("Token…")
        token_btn.setToolTip("A Hugging Face token for gated or private repos (kept in the OS keychain)")
        token_btn.clicked.connect(self.ask_token)
        for x in (self.search_box, search_btn, catalog_btn, token_btn):
            row.addWidget(x)
        v.addLayout(row)
        self.discover_status = QLabel()
        self.discover_status.setWordWrap(True)
        self.discover_status.setAccessibleName("Discover status")
        v.addWidget(self.discover_status)
        split = QSplitter(Qt.Orientation.Vertical)
        self.repos = _table(["Repository", "Downloads", "Likes", "Updated / about"], "Repositories")
        self.repos.itemSelectionChanged.connect(self._repo_selected)
        self.files = _table(["Quantization", "Size", "Fit on this machine", "Files"], "Model files")
        split.addWidget(self.repos)
        bottom = QWidget()
        bv = QVBoxLayout(bottom)
        bv.setContentsMargins(0, 0, 0, 0)
        self.files_title = QLabel("Choose a repository to see its files.")
        bv.addWidget(self.files_title)
        bv.addWidget(self.files)
        self.download_btn = QPushButton("Download selected file")
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
        self.repos.setHorizontalHeaderLabels(["Model", "Size", "Licence", "About"])
        self.discover_status.setText("Curated catalog. Search to find any GGUF repository on the Hub.")

    def search(self) -> None:
        query = self.search_box.text().strip()
        self.discover_status.setText(f"Searching for “{query}”…")
        hub = self.hub_factory()
        self.tasks.run(lambda: hub.search(query), self._show_results, self._discover_error)

    def _show_results(self, found: list[RepoSummary]) -> None:
        self.repos.setRowCount(0)
        self.repos.setHorizontalHeaderLabels(["Repository", "Downloads", "Likes", "Updated"])
        for s in found:
            r = self.repos.rowCount()
            self.repos.insertRow(r)
            self.repos.setItem(r, 0, _item(s.id, s.id))
            self.repos.setItem(r, 1, _item(f"{s.downloads:,}"))
            self.repos.setItem(r, 2, _item(f"{s.likes:,}"))
            self.repos.setItem(r, 3, _item(s.last_modified.date().isoformat() if s.last_modified else ""))
        self.discover_status.setText(
            f"{len(found)} repositories, most downloaded first." if found else "No GGUF repositories found."
        )
        self.search_done.emit()

    def _discover_error(self, message: str) -> None:
        self.discover_status.setText(f"<span style='color:#b91c1c'>{message}</span>")
        self.search_done.emit()
        self.files_shown.emit()

    def _repo_selected(self) -> None:
        items = self.repos.selectedItems()
        if not items:
            return
        repo = self.repos.item(items[0].row(), 0).data(Qt.ItemDataRole.UserRole)
        self.open_repo(repo)

    def open_repo(self, repo: str) -> None:
        self.files_title.setText(f"Files of {repo}…")
        self.files.setRowCount(0)
        hub = self.hub_factory()
        self.tasks.run(
            lambda: (hub.with_header(hub.files(repo)), free_vram_bytes()), self._show_files, self._discover_error
        )

    def _show_files(self, result: tuple[RepoFiles, int | None]) -> None:
        files, vram = result
        self.repo_files = files
        n_ctx = self.context_length()
        fits = [(v, estimate_fit(v.size, n_ctx, free_vram=vram, meta=files.header)) for v in files.variants]
        best = recommend([(v.quantization, f.label) for v, f in fits])
        self.files.setRowCount(0)
        for v, fit in fits:
            r = self.files.rowCount()
            self.files.insertRow(r)
            label = {"fits": "✔ fits", "tight": "≈ tight", "won't fit": "✘ won't fit", "unknown": "? unknown"}[
                fit.label
            ]
            quant = _item(v.quantization + ("  ★ recommended" if v.quantization == best else ""), v)
            cells = [
                quant,
                _item(human_size(v.size)),
                _item(f"{label} ({human_size(fit.needed_bytes)} of {human_size(fit.free_bytes)} {fit.where})"),
                _item(v.name if len(v.files) == 1 else f"{v.name} ({len(v.files)} parts)"),
            ]
            for c, cell in enumerate(cells):
                if v.quantization == best:
                    f = QFont()
                    f.setBold(True)
                    cell.setFont(f)
                self.files.setItem(r, c, cell)
        gated = " (gated: needs a token)" if files.gated else ""
        self.files_title.setText(f"{files.repo_id}{gated} — fit for a {n_ctx:,}-token context")
        self.files_shown.emit()

    def selected_variant(self) -> ModelVariant | None:
        items = self.files.selectedItems()
        if not items:
            return None
        return self.files.item(items[0].row(), 0).data(Qt.ItemDataRole.UserRole)

    def download_selected(self) -> None:
        v = self.selected_variant()
        if v is None or self.repo_files is None:
            self.discover_status.setText("Choose a file to download first.")
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
            "Hugging Face token",
            "Token (kept in your OS keychain; sent only to the Hub). Leave empty to remove it:",
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
        self.discover_status.setText("Token saved in the keychain." if token.strip() else "Token removed.")

    # ----- Installed
    def _build_installed(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        self.installed = _table(
            [
                "Name",
                "Architecture",
                "Parameters",
                "Quantization",
                "Size",
                "Context",
                "Chat template",
                "Source",
                "Added",
            ],
            "Installed models",
        )
        v.addWidget(self.installed, 1)
        self.installed_status = QLabel()
        self.installed_status.setWordWrap(True)
        v.addWidget(self.installed_status)
        v.addLayout(
            _button_row(
                ("Load", self.load_selected),
                ("Delete…", self.delete_selected),
                ("Show in folder", self.reveal_selected),
                ("Import .gguf…", self.import_dialog),
                ("Refresh", self.refresh_installed),
            )
        )
        return w

    def refresh_installed(self) -> None:
        entries = self.library.entries()
        self.installed.setRowCount(0)
        for e in entries:
            r = self.installed.rowCount()
            self.installed.insertRow(r)
            arch = params = quant = ctx = tmpl = "—"
            if e.path is None:
                arch = "prepared on first load"
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
                    tmpl = "yes" if i.has_chat_template else "no"
                except EmberError as exc:
                    arch = f"damaged: {exc}"
            label = "Gemma 3 270M (starter)" if e.is_starter else e.name
            date = datetime.fromtimestamp(e.modified).date().isoformat() if e.modified else "—"
            cells = [
                label,
                arch,
                params,
                quant,
                human_size(e.size),
                ctx,
                tmpl,
                f"{e.source_repo or '—'} · {e.location}",
                date,
            ]
            for c, text in enumerate(cells):
                self.installed.setItem(r, c, _item(text, e if c == 0 else None))
        self.installed_status.setText(f"{len(entries)} models in {self.library.models_dir}")

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
            answer = QMessageBox.question(self, "Delete model", f"Delete {e.name} ({human_size(e.size)}) from disk?")
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
        path, _ = QFileDialog.getOpenFileName(self, "Import a GGUF model", str(Path.home()), "GGUF models (*.gguf)")
        if not path:
            return
        answer = QMessageBox.question(
            self,
            "Import model",
            "Copy the file into Ember's models folder?\n\nYes: copy it. No: use it where it is.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No | QMessageBox.StandardButton.Cancel,
        )
        if answer == QMessageBox.StandardButton.Cancel:
            return
        self.import_file(Path(path), copy=answer == QMessageBox.StandardButton.Yes)

    def import_file(self, path: Path, copy: bool = True) -> None:
        self.installed_status.setText(f"Importing {path.name}…")
        self.tasks.run(lambda: self.library.import_file(path, copy), self._imported, self.installed_status.setText)

    def _imported(self, entry: ModelEntry) -> None:
        self.refresh_installed()
        self.installed_status.setText(f"Imported {entry.name}.")
        self.library_changed.emit()

    # ----- Downloads
    def _build_downloads(self) -> QWidget:
        w = QWidget()
        v = QVBoxLayout(w)
        self.downloads = _table(["File", "Repository", "Progress", "Speed", "ETA", "State"], "Downloads")
        self.downloads.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Fixed)
        self.downloads.setColumnWidth(2, 280)
        v.addWidget(self.downloads, 1)
        v.addLayout(
            _button_row(
                ("Pause", lambda: self._act(self.queue.pause)),
                ("Resume", lambda: self._act(self.queue.resume)),
                ("Cancel", lambda: self._act(self.queue.cancel)),
                ("Clear finished", self._clear),
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
            self.downloads.setCellWidget(r, 2, bar)
        bar.setValue(int(j.fraction * 1000))
        bar.setFormat(f"{j.fraction * 100:.1f} % · {human_size(j.done)} / {human_size(j.total)}")
        speed = f"{human_size(j.speed_bps)}/s" if j.state == DOWNLOADING and j.speed_bps else ""
        eta = f"{j.eta_s:.0f} s" if j.state == DOWNLOADING and j.eta_s is not None else ""
        self.downloads.setItem(r, 3, _item(speed))
        self.downloads.setItem(r, 4, _item(eta))
        state = {QUEUED: "queued", DOWNLOADING: "downloading", PAUSED: "paused", DONE: "done ✔", FAILED: "failed"}.get(
            j.state, j.state
        )
        item = _item(f"{state}: {j.error}" if j.error else state)
        if j.error:
            item.setToolTip(j.error)
        self.downloads.setItem(r, 5, item)

    def shutdown(self) -> None:
        self._poll.stop()
        self.tasks.shutdown()
