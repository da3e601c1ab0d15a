"""Models ▸ Model Manager…: Discover (curated catalog and Hub search, files by quantization with a
fit label for this machine), Installed (load, delete, reveal, import), Downloads (progress, speed,
ETA; pause, resume, cancel) and Speech (the Whisper models: speech.py). Network, disk and keychain
work (Hub search, listing the models folder, reading each model's header, import, delete, the token)
runs on the manager's task runner, off the GUI thread; a newer search or listing supersedes one
still out. Downloads run in the engine's download queue and are shown from its snapshots a few times
a second.

Discover and Installed are widgets of their own (`discover_tab`, `installed_tab`, in discover.py
and installed.py), each owning its state; the dialog holds them, the Downloads tab, the banner
and the task runner they share, and passes on their signals. The names the window and the tests use
most are kept on the dialog, as the tabs' own objects."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QDialog,
    QHeaderView,
    QLabel,
    QProgressBar,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.api_models import ApiModels
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.models.manager.discover import DiscoverTab
from ember_chat.app.models.manager.installed import InstalledTab
from ember_chat.app.models.manager.speech import SpeechTab
from ember_chat.app.models.manager.tables import StatusBanner, button_row, human_size, make_table, table_item
from ember_chat.app.qt.window_frame import TITLE_BAR_ALLOWANCE
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
from ember_chat.engine.models.hub import HubClient
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.secrets import TokenStore

SIZE = QSize(980, 620)  # its size where the screen has room
EDGE_ALLOWANCE = 8  # px: a frame's left and right edges (the title bar's share is TITLE_BAR_ALLOWANCE)


class ModelManager(QDialog):
    library_changed = Signal()  # a download finished, a model was imported or deleted
    load_requested = Signal(str)  # the user wants to chat with this model
    files_shown = Signal()  # a repo's files are listed (tests wait on this)
    search_done = Signal()
    installed_listed = Signal()  # the Installed tab lists the models (their headers may follow)
    headers_read = Signal()  # every listed model's header has been read into the Installed tab
    token_saved = Signal()  # the token was saved or removed (or could not be)
    import_checked = Signal()  # a file to import was checked: the banner or the question shows

    def __init__(
        self,
        library: ModelLibrary,
        queue: DownloadQueue,
        hub_factory: Callable[[], HubClient],
        tokens: TokenStore,
        context_length: Callable[[], int],
        parent: QWidget | None = None,
        load_settings: Callable[[], tuple[int, str]] = lambda: (0, "f16"),
        loaded_model: Callable[[], str | None] = lambda: None,
        api: ApiModels | None = None,
    ) -> None:
        """`load_settings()`: (GPU layers, KV cache type) the fit estimate assumes; `loaded_model()`:
        the library name of the model loaded in the window (marked in Installed; see show_loaded);
        `api`: the local API server's models loaded for requests (Installed says them, and unloads them)."""
        super().__init__(parent)
        self.setWindowTitle(self.tr("Model Manager"))
        self.library = library
        self.queue = queue
        self.tokens = tokens
        self.tasks = TaskRunner(self)
        self._states: dict[int, str] = {}
        self.banner = StatusBanner()
        self._load_error: str | None = None  # a failed load's error, while the banner shows it

        d = self.discover_tab = DiscoverTab(
            queue, hub_factory, tokens, self.tasks, self.banner, context_length, load_settings
        )
        i = self.installed_tab = InstalledTab(
            library, self.tasks, self.banner, loaded_model, queue=queue, hub_factory=hub_factory, api=api
        )
        for signal, forward in (
            (d.search_done, self.search_done),
            (d.files_shown, self.files_shown),
            (d.token_saved, self.token_saved),
            (i.library_changed, self.library_changed),
            (i.load_requested, self.load_requested),
            (i.installed_listed, self.installed_listed),
            (i.headers_read, self.headers_read),
            (i.import_checked, self.import_checked),
        ):
            signal.connect(forward)
        s = self.speech_tab = SpeechTab(library.models_dir, lambda: self.hub_factory(), self.tasks)
        d.downloads_added.connect(self._show_downloads)
        i.downloads_wanted.connect(self._show_downloads)
        i.import_started.connect(lambda: self.tabs.setCurrentIndex(1))
        # What the window and most tests reach on the dialog: the tabs' own widgets and methods.
        self.search_box = d.search_box
        self.discover_status = d.discover_status
        self.repos = d.repos
        self.files = d.files
        self.download_btn = d.download_btn
        self.search = d.search
        self.catalog_shown = d.catalog_shown
        self.download_selected = d.download_selected
        self.set_token = d.set_token
        self.installed = i.installed
        self.select_installed = i.select_installed
        self.refresh_installed = i.refresh_installed
        self.show_loaded = i.show_loaded
        self.import_dialog = i.import_dialog
        self.start_import = i.start_import
        self.import_file = i.import_file

        self.tabs = QTabWidget()
        self.tabs.setAccessibleName(self.tr("Model Manager sections"))
        self.tabs.addTab(d, self.tr("Discover"))
        self.tabs.addTab(i, self.tr("Installed"))
        self.tabs.addTab(self._build_downloads(), self.tr("Downloads"))
        self.tabs.addTab(s, self.tr("Speech"))
        self.tabs.setTabToolTip(0, self.tr("Find models in the catalog or on the Hugging Face Hub"))
        self.tabs.setTabToolTip(1, self.tr("Models on this computer"))
        self.tabs.setTabToolTip(2, self.tr("Downloads in progress and finished"))
        self.tabs.setTabToolTip(3, self.tr("Speech-to-text models (Whisper): shipped and from the Hub"))
        layout = QVBoxLayout(self)
        layout.addWidget(self.banner)
        layout.addWidget(self.tabs)

        self._poll = QTimer(self)
        self._poll.setInterval(250)  # progress a few times a second, never per chunk
        self._poll.timeout.connect(self.refresh_downloads)
        self._poll.start()
        d.show_catalog()
        i.refresh_installed()
        self.refresh_downloads()
        self._size_to_screen()

    def _size_to_screen(self) -> None:
        """Its usual size where the screen has room; on a small screen (800×600) the screen's, less a
        title bar and the frame's edges: at 980×620 its right side and bottom were off the screen."""
        screen = self.parentWidget().screen() if self.parentWidget() is not None else self.screen()
        room = screen.availableGeometry()
        least = self.minimumSizeHint()
        width = max(least.width(), min(SIZE.width(), room.width() - EDGE_ALLOWANCE))
        height = max(least.height(), min(SIZE.height(), room.height() - TITLE_BAR_ALLOWANCE))
        self.resize(width, height)  # (Qt centres it over the window and keeps it on the screen when shown)

    @property
    def hub_factory(self) -> Callable[[], HubClient]:
        """What makes the Hub client (on a task's thread): the Discover tab's."""
        return self.discover_tab.hub_factory

    @hub_factory.setter
    def hub_factory(self, factory: Callable[[], HubClient]) -> None:
        self.discover_tab.hub_factory = factory
        self.installed_tab.hub_factory = factory

    # ----- a load asked for here (Installed ▸ Load)
    def show_load_error(self, message: str) -> None:
        """A load failed while the Manager is open: said in its own banner, where the user is (the
        window's banner is behind this dialog)."""
        self.banner.show_message(message, error=True)
        self._load_error = message

    def load_succeeded(self) -> None:
        """A model loaded: a load error the banner still shows is over."""
        if self._load_error is not None and self.banner.isVisible() and self.banner.text() == self._load_error:
            self.banner.hide()
        self._load_error = None

    def _show_downloads(self) -> None:
        """A download was queued: the Downloads tab shows it."""
        self.tabs.setCurrentIndex(2)
        self.refresh_downloads()

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
        self.downloads.itemSelectionChanged.connect(self._enable_download_buttons)
        v.addWidget(self.downloads, 1)
        self.no_downloads = QLabel(
            self.tr("No downloads yet. Choose a model in Discover and download one of its files; it shows here.")
        )
        self.no_downloads.setWordWrap(True)
        self.no_downloads.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.no_downloads.setAccessibleName(self.tr("No downloads yet"))
        v.addWidget(self.no_downloads, 1)
        buttons = button_row(
            (self.tr("Pause"), self.tr("Pause the selected download"), lambda: self._act(self.queue.pause)),
            (self.tr("Resume"), self.tr("Resume the selected download"), lambda: self._act(self.queue.resume)),
            (self.tr("Cancel"), self.tr("Cancel the selected download"), lambda: self._act(self.queue.cancel)),
            (
                self.tr("Clear finished"),
                self.tr("Remove finished and cancelled downloads from the list"),
                self._clear,
            ),
        )
        self.pause_btn, self.resume_btn, self.cancel_btn, self.clear_btn = (
            buttons.itemAt(i).widget() for i in range(4)
        )
        v.addLayout(buttons)
        return w

    def _enable_download_buttons(self) -> None:
        """Each button only where it can act: on the selected download's state, or on finished ones."""
        jobs = self.queue.snapshot()
        selected = self._selected_job()
        state = next((j.state for j in jobs if j.id == selected), None)
        self.pause_btn.setEnabled(state in (QUEUED, DOWNLOADING))
        self.resume_btn.setEnabled(state in (PAUSED, FAILED))
        self.cancel_btn.setEnabled(state in (QUEUED, DOWNLOADING, PAUSED, FAILED))
        self.clear_btn.setEnabled(any(j.state in (DONE, CANCELLED) for j in jobs))

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
        self.downloads.setVisible(bool(jobs))
        self.no_downloads.setVisible(not jobs)
        self._enable_download_buttons()
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
        self.installed_tab.shutdown()
        self.speech_tab.shutdown()  # (its downloads stop; their partial files are kept)

    def join(self, timeout: float) -> bool:
        """Wait for the manager's background threads to end (tests, after shutdown)."""
        return self.tasks.join(timeout) and self.installed_tab.join(timeout) and self.speech_tab.join(timeout)
