"""The Model Manager's Discover tab: the curated catalog and Hub search, a repository's files grouped by
quantization with a fit label for this machine, downloads, and the Hugging Face token. A widget the
ModelManager holds (`manager.discover_tab`): it owns its tables, the search and what was listed; the
download queue, the task runner and the banner are the manager's, handed in.

The Hub client is made on the task's thread (it reads the token from the keychain); a new search
supersedes one still out, and so does a new repository's file list: what shows is always the last
one asked for. The search text also filters the catalog, so it works offline; a Hub that cannot be
reached is said plainly in the banner, with Retry."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any, NamedTuple

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.models.manager.tables import StatusBanner, human_size, make_table, table_item
from ember_chat.app.style.theme import active_colors
from ember_chat.engine.core.states import FitLabel
from ember_chat.engine.errors import HubOffline
from ember_chat.engine.models import fit as fit_module
from ember_chat.engine.models.download_queue import DownloadQueue
from ember_chat.engine.models.downloader import DownloadSpec
from ember_chat.engine.models.fit import estimate_fit, recommend
from ember_chat.engine.models.hub import HubClient, ModelVariant, RepoFiles, RepoSummary
from ember_chat.engine.models.projector_download import pick_projector
from ember_chat.engine.resources import catalog
from ember_chat.engine.storage.secrets import TokenStore


class _Offline(NamedTuple):
    detail: str  # the Hub client's own message (endpoint, what failed), for the banner's tooltip


def _online(fn: Callable[[], Any]) -> Callable[[], Any]:
    """`fn` on a task thread, with the Hub out of reach returned as _Offline instead of raised."""

    def work() -> Any:
        try:
            return fn()
        except HubOffline as exc:
            return _Offline(str(exc))

    return work


class DiscoverTab(QWidget):
    files_shown = Signal()  # a repo's files are listed (or cannot be)
    search_done = Signal()
    token_saved = Signal()  # the token was saved or removed (or could not be)
    downloads_added = Signal()  # a file was queued for download (the manager shows its Downloads)

    def __init__(
        self,
        queue: DownloadQueue,
        hub_factory: Callable[[], HubClient],
        tokens: TokenStore,
        tasks: TaskRunner,
        banner: StatusBanner,
        context_length: Callable[[], int],
        load_settings: Callable[[], tuple[int, str]],
        parent: QWidget | None = None,
    ) -> None:
        """`load_settings()`: (GPU layers, KV cache type) the fit estimate assumes."""
        super().__init__(parent)
        self.queue = queue
        self.hub_factory = hub_factory
        self.tokens = tokens
        self.tasks = tasks
        self.banner = banner
        self.context_length = context_length
        self.load_settings = load_settings
        self.showing_catalog = True  # the repositories table holds the catalog (the search text filters it)
        self.repo_files: RepoFiles | None = None  # the files listed last
        v = QVBoxLayout(self)
        row = QHBoxLayout()
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText(self.tr("Search the Hugging Face Hub for GGUF models (e.g. llama 3b)"))
        self.search_box.setAccessibleName(self.tr("Search the Hub"))
        self.search_box.returnPressed.connect(self.search)
        self.search_box.textChanged.connect(self._filter_catalog)
        search_btn = QPushButton(self.tr("Search"))
        search_btn.setAccessibleName(self.tr("Search"))
        search_btn.setToolTip(self.tr("Search the Hugging Face Hub for GGUF repositories"))
        search_btn.clicked.connect(self.search)
        catalog_btn = QPushButton(self.tr("Catalog"))
        catalog_btn.setAccessibleName(self.tr("Catalog"))
        catalog_btn.setToolTip(self.tr("Well-known models, picked by Ember: instruct, embedding and reranking"))
        catalog_btn.clicked.connect(self.show_catalog)
        token_btn = QPushButton(self.tr("Token…"))
        token_btn.setAccessibleName(self.tr("Hugging Face token"))
        token_btn.setToolTip(self.tr("A Hugging Face token for gated or private repos (kept in the OS keychain)"))
        token_btn.clicked.connect(self.ask_token)
        for x in (self.search_box, search_btn, catalog_btn, token_btn):
            row.addWidget(x)
        v.addLayout(row)
        self.discover_status = QLabel()
        self.discover_status.setTextFormat(Qt.TextFormat.RichText)  # for the error colour; see _say
        self.discover_status.setWordWrap(True)
        self.discover_status.setAccessibleName(self.tr("Discover status"))
        v.addWidget(self.discover_status)
        split = QSplitter(Qt.Orientation.Vertical)
        self.repos = make_table(
            [self.tr("Repository"), self.tr("Downloads"), self.tr("Likes"), self.tr("Updated / about")],
            self.tr("Repositories"),
            self.tr("Search results: one row per model repository; select one to see its files"),
        )
        self.repos.itemSelectionChanged.connect(self._repo_selected)
        self.repos.setWordWrap(True)  # the catalog's About text wraps instead of being cut
        self.repos.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.files = make_table(
            [self.tr("Quantization"), self.tr("Download size"), self.tr("Fit on this machine"), self.tr("Files")],
            self.tr("Model files"),
            self.tr("The GGUF files of the selected repository, with whether each fits this machine"),
        )
        split.addWidget(self.repos)
        bottom = QWidget()
        bv = QVBoxLayout(bottom)
        bv.setContentsMargins(0, 0, 0, 0)
        self.files_title = QLabel(self.tr("Choose a repository to see its files."))
        self.files_title.setTextFormat(Qt.TextFormat.PlainText)  # repository names come from the Hub
        bv.addWidget(self.files_title)
        bv.addWidget(self.files)
        self.download_btn = QPushButton(self.tr("Download selected file"))
        self.download_btn.setAccessibleName(self.tr("Download selected file"))
        self.download_btn.setToolTip(self.tr("Download the selected file into the models folder (resumable)"))
        self.download_btn.clicked.connect(self.download_selected)
        self.download_btn.setEnabled(False)  # until a file is chosen
        self.files.itemSelectionChanged.connect(self._file_selected)
        bv.addWidget(self.download_btn, alignment=Qt.AlignmentFlag.AlignRight)
        split.addWidget(bottom)
        v.addWidget(split, 1)

    def show_catalog(self) -> None:
        self.tasks.cancel("search")  # a search still out would replace the catalog
        self.showing_catalog = True
        self.repos.setRowCount(0)
        for e in catalog():
            r = self.repos.rowCount()
            self.repos.insertRow(r)
            self.repos.setItem(r, 0, table_item(f"{e.name}  ({e.repo})", e.repo))
            self.repos.setItem(r, 1, table_item(e.params))
            self.repos.setItem(r, 2, table_item(e.licence))
            about = table_item(e.description)
            about.setToolTip(e.description)
            self.repos.setItem(r, 3, about)
        self.repos.setHorizontalHeaderLabels(
            [self.tr("Model"), self.tr("Parameters"), self.tr("Licence"), self.tr("About")]
        )
        self.repos.horizontalHeaderItem(1).setToolTip(
            self.tr("The model's size in parameters (B: billions). A file's download size is shown below.")
        )
        self._say(self.tr("Curated catalog. Search to find any GGUF repository on the Hub."))
        self._filter_catalog(self.search_box.text())

    def _filter_catalog(self, text: str) -> None:
        """Show the catalog models whose name, repository, size or description has every word typed."""
        if not self.showing_catalog:
            return
        words = text.lower().split()
        for r in range(self.repos.rowCount()):
            row = " ".join(self.repos.item(r, c).text() for c in range(self.repos.columnCount())).lower()
            self.repos.setRowHidden(r, not all(w in row for w in words))

    def catalog_shown(self) -> list[str]:
        """The repositories of the catalog rows shown (not filtered out)."""
        return [
            self.repos.item(r, 0).data(Qt.ItemDataRole.UserRole)
            for r in range(self.repos.rowCount())
            if not self.repos.isRowHidden(r)
        ]

    def search(self) -> None:
        query = self.search_box.text().strip()
        self._say(self.tr("Searching for “{query}”…").format(query=query))
        hub_factory = self.hub_factory
        self.tasks.run(
            _online(lambda: hub_factory().search(query)), self._show_results, self._discover_error, key="search"
        )

    def _offline(self, detail: str, retry: Callable[[], None]) -> None:
        """The Hub cannot be reached: said plainly in the banner, with Retry; the catalog, filtered by
        the search text, stays usable."""
        if not self.showing_catalog:
            self.show_catalog()
        self._filter_catalog(self.search_box.text())
        self.banner.show_message(
            self.tr(
                "You are offline: Ember cannot reach the Hugging Face Hub. The catalog below still works, "
                "filtered by your search, and so do the models you have installed."
            ),
            error=True,
            action=(self.tr("Retry"), self.tr("Ask the Hub again"), retry),
        )
        self.banner.label.setToolTip(detail)
        shown = len(self.catalog_shown())
        self._say(
            self.tr("Offline. %n catalog model matches your search.", "", shown)
            if shown == 1
            else self.tr("Offline. %n catalog models match your search.", "", shown)
        )
        self.search_done.emit()
        self.files_shown.emit()

    def _show_results(self, found: list[RepoSummary] | _Offline) -> None:
        if isinstance(found, _Offline):
            self._offline(found.detail, self.search)
            return
        self.banner.hide()
        self.showing_catalog = False
        self.repos.setRowCount(0)
        self.repos.setHorizontalHeaderLabels(
            [self.tr("Repository"), self.tr("Downloads"), self.tr("Likes"), self.tr("Updated")]
        )
        for s in found:
            r = self.repos.rowCount()
            self.repos.insertRow(r)
            self.repos.setItem(r, 0, table_item(s.id, s.id))
            self.repos.setItem(r, 1, table_item(f"{s.downloads:,}"))
            self.repos.setItem(r, 2, table_item(f"{s.likes:,}"))
            self.repos.setItem(r, 3, table_item(s.last_modified.date().isoformat() if s.last_modified else ""))
        self._say(
            self.tr("{count} repositories, most downloaded first.").format(count=len(found))
            if found
            else self.tr("No GGUF repositories found.")
        )
        self.search_done.emit()

    def _say(self, text: str, error: bool = False) -> None:
        """The Discover status line. It is rich text only for the error colour: the text itself (Hub
        errors, the user's query) is escaped, so markup in it is shown, never rendered."""
        body = html.escape(text, quote=False).replace("\n", "<br>")
        if error:
            body = f"<span style='color:{active_colors().error}'>{body}</span>"
        self.discover_status.setText(body)

    def _discover_error(self, message: str) -> None:
        self._say(message, error=True)
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
        self._file_selected()
        hub_factory = self.hub_factory

        def work() -> tuple[RepoFiles, int | None]:
            hub = hub_factory()
            return hub.with_header(hub.files(repo)), fit_module.free_vram_bytes()

        def shown(result: tuple[RepoFiles, int | None] | _Offline) -> None:
            if isinstance(result, _Offline):
                self.files_title.setText(self.tr("The files of {repo} cannot be listed offline.").format(repo=repo))
                self._offline(result.detail, lambda: self.open_repo(repo))
            else:
                self.banner.hide()
                self._show_files(result)

        self.tasks.run(_online(work), shown, self._discover_error, key="files")

    def _file_selected(self) -> None:
        self.download_btn.setEnabled(self.selected_variant() is not None)

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
            FitLabel.FITS: self.tr("✔ fits"),
            FitLabel.TIGHT: self.tr("≈ tight"),
            FitLabel.WONT_FIT: self.tr("✘ won't fit"),
            FitLabel.UNKNOWN: self.tr("? unknown"),
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
                table_item(quant_text, v),
                table_item(human_size(v.size)),
                table_item(fit_text),
                table_item(v.name if len(v.files) == 1 else parts),
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
        self._file_selected()
        self.files_shown.emit()

    def selected_variant(self) -> ModelVariant | None:
        items = self.files.selectedItems()
        if not items:
            return None
        return self.files.item(items[0].row(), 0).data(Qt.ItemDataRole.UserRole)

    def download_selected(self) -> None:
        v = self.selected_variant()
        if v is None or self.repo_files is None:
            self._say(self.tr("Choose a file to download first."))
            return
        self.download(self.repo_files, v)

    def download(self, files: RepoFiles, v: ModelVariant) -> list[int]:
        specs = [DownloadSpec(files.repo_id, f.path, files.commit or "main", f.size, f.sha256) for f in v.files]
        projector = pick_projector(files, v.files[0].path)  # with its projector, saved beside it
        ids = [self.queue.add(spec) for spec in (*specs, *([projector] if projector else []))]
        self.downloads_added.emit()
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
        """Save (or with an empty token remove) the Hub token, off the GUI thread: the keychain."""
        tokens = self.tokens

        def saved(_: None) -> None:
            self._say(self.tr("Token saved in the keychain.") if token.strip() else self.tr("Token removed."))
            self.token_saved.emit()

        def failed(message: str) -> None:
            self._say(message, error=True)
            self.token_saved.emit()

        self.tasks.run(lambda: tokens.set(token), saved, failed, key="token")
