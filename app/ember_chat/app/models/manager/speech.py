"""The Model Manager's Speech tab: the Whisper models speech-to-text can use (dictation, audio files,
`ember-chat transcribe`, the API): the shipped tiny.en (installed with the starter set) and the Hub
ones, with size, languages, the real-time factor measured on this machine and whether each is there.
Download, Cancel and Delete act on the selected row. A download runs in the engine's SpeechDownloads
(the Model Manager's downloader: resume, sha256, disk check) and is shown from its snapshots a few
times a second; what is on disk (manifests, measured speeds, the shipped model's files) is read on
the manager's task runner, never on the GUI thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHeaderView, QLabel, QMessageBox, QProgressBar, QVBoxLayout, QWidget

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.models.manager.tables import button_row, make_table, note_item, table_item
from ember_chat.app.qt.plain_text import ask
from ember_chat.engine.models.downloader import Downloader
from ember_chat.engine.models.hub import HubClient
from ember_chat.engine.speech import downloads
from ember_chat.engine.speech.downloads import DOWNLOADING, FAILED, QUEUED, SpeechDownloads, Speed
from ember_chat.engine.speech.models import (
    KNOWN_MODELS,
    SpeechModel,
    SpeechModelError,
    downloaded_folder,
    shipped_folder,
)

NAME, SIZE, LANGUAGES, SPEED, STATE, ABOUT = range(6)


@dataclass(frozen=True)
class OnDisk:
    """What the disk says: the models there (by name), the shipped one's problem, measured speeds."""

    present: frozenset[str]
    shipped_problem: str | None
    speeds: dict[str, Speed]


def read_disk(models_dir: Path) -> OnDisk:
    """(on a task's thread) Which models are usable here, and their speeds."""
    present = {m.name for m in KNOWN_MODELS if not m.shipped and downloaded_folder(m, models_dir) is not None}
    try:
        shipped_folder()
        problem = None
        present.add(next(m.name for m in KNOWN_MODELS if m.shipped))
    except SpeechModelError as exc:
        problem = str(exc)
    return OnDisk(frozenset(present), problem, downloads.read_speeds(models_dir))


class SpeechTab(QWidget):
    disk_read = Signal()  # the rows show what is on disk (tests wait on this)
    changed = Signal()  # a model was downloaded or deleted

    def __init__(
        self, models_dir: Path, hub_factory: Callable[[], HubClient], tasks: TaskRunner, parent: QWidget | None = None
    ) -> None:
        """`hub_factory()` (called on a download's thread): the Hub client, whose endpoint and token the
        downloader uses too."""
        super().__init__(parent)
        self.models_dir = Path(models_dir)
        self.hub_factory = hub_factory
        self.tasks = tasks
        self.jobs = SpeechDownloads(self.models_dir, lambda: self.hub_factory(), self._downloader)
        self.disk = OnDisk(frozenset(), None, {})
        self._finished: set[str] = set()  # jobs whose end has been acted on
        v = QVBoxLayout(self)
        intro = QLabel(
            self.tr(
                "Speech-to-text models (Whisper) for dictation, audio files and ember-chat transcribe. tiny.en "
                "comes with the starter set; the others download from the Hugging Face Hub. The speed is the "
                "real-time factor measured here the first time a model transcribes a file of 5 s or more "
                "(0.1: a minute of speech in 6 s)."
            )
        )
        intro.setWordWrap(True)
        v.addWidget(intro)
        self.table = make_table(
            [
                self.tr("Model"),
                self.tr("Size"),
                self.tr("Languages"),
                self.tr("Speed on this machine"),
                self.tr("State"),
                self.tr("About"),
            ],
            self.tr("Speech models"),
            self.tr("Whisper models for speech-to-text: size, languages, measured speed, installed or not"),
        )
        self.table.setRowCount(len(KNOWN_MODELS))
        self.table.horizontalHeader().setSectionResizeMode(STATE, QHeaderView.ResizeMode.Fixed)
        self.table.setColumnWidth(STATE, 230)
        for r, m in enumerate(KNOWN_MODELS):
            self.table.setItem(r, NAME, table_item(m.name, m.name))
            self.table.setItem(r, SIZE, table_item(f"{m.size_mb:,} MB"))
            self.table.setItem(r, LANGUAGES, table_item(self._languages(m)))
            about = table_item(m.about)
            about.setToolTip(f"{m.about} ({m.repo})")  # (the column is cut at 1024 px: the whole of it here)
            self.table.setItem(r, ABOUT, about)
        self.table.itemSelectionChanged.connect(self._enable)
        v.addWidget(self.table, 1)
        buttons = button_row(
            (self.tr("Download"), self.tr("Download the selected speech model from the Hub"), self.download_selected),
            (self.tr("Cancel"), self.tr("Cancel the selected model's download"), self.cancel_selected),
            (self.tr("Delete"), self.tr("Delete the selected downloaded model from disk"), self.delete_selected),
        )
        self.download_btn, self.cancel_btn, self.delete_btn = (buttons.itemAt(i).widget() for i in range(3))
        v.addLayout(buttons)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # errors from the network: never markup
        v.addWidget(self.status)
        self._poll = QTimer(self)
        self._poll.setInterval(250)  # progress a few times a second, never per chunk
        self._poll.timeout.connect(self.refresh_jobs)
        self._poll.start()
        self.refresh()

    def _downloader(self) -> Downloader:
        hub = self.hub_factory()  # (the same endpoint and token as the GGUF downloads)
        return Downloader(hub.endpoint, hub.token)

    def _languages(self, m: SpeechModel) -> str:
        return self.tr("English") if m.english_only else self.tr("99 languages")

    # ----- what is on disk
    def refresh(self) -> None:
        models_dir = self.models_dir
        self.tasks.run(lambda: read_disk(models_dir), self._show_disk, self.status.setText, key="speech-disk")

    def _show_disk(self, disk: OnDisk) -> None:
        self.disk = disk
        self.refresh_jobs()
        self.disk_read.emit()

    # ----- rows
    def selected(self) -> SpeechModel | None:
        rows = self.table.selectionModel().selectedRows()
        return KNOWN_MODELS[rows[0].row()] if rows else None

    def select(self, name: str) -> None:
        self.table.selectRow(next(r for r, m in enumerate(KNOWN_MODELS) if m.name == name))

    def refresh_jobs(self) -> None:
        jobs = self.jobs.snapshot()
        for r, m in enumerate(KNOWN_MODELS):
            self._show_row(r, m, jobs.get(m.name))
        ended = {n for n, j in jobs.items() if j.state not in (QUEUED, DOWNLOADING)} - self._finished
        self._finished |= ended
        self._finished &= set(jobs)
        self._enable()
        for name in ended:
            self.status.setText(self._ended(jobs[name]))
        if ended:  # a download finished, failed or was cancelled: the disk says what is there now
            self.refresh()
            self.changed.emit()

    def _ended(self, job: downloads.SpeechJob) -> str:
        if job.state == downloads.DONE:
            return self.tr("{name} is downloaded: name it as the model (ember-chat transcribe --model {name}, the "
                           "API's model field).").format(name=job.name)  # fmt: skip
        if job.state == downloads.CANCELLED:
            return self.tr("The download of {name} was cancelled; its files were removed.").format(name=job.name)
        return self.tr("{name} could not be downloaded: {error} Download resumes where it stopped.").format(
            name=job.name, error=job.error or ""
        )

    def _show_row(self, r: int, m: SpeechModel, job: downloads.SpeechJob | None) -> None:
        speed = self.disk.speeds.get(m.name)
        self.table.setItem(r, SPEED, table_item(self._speed(m, speed)))
        running = job is not None and job.state in (QUEUED, DOWNLOADING)
        bar = self.table.cellWidget(r, STATE)
        if running:
            assert job is not None
            if not isinstance(bar, QProgressBar):
                bar = QProgressBar()
                bar.setRange(0, 1000)
                bar.setAccessibleName(self.tr("Download progress of {name}").format(name=m.name))
                self.table.setCellWidget(r, STATE, bar)
            bar.setValue(int(job.fraction * 1000))
            bar.setFormat(self.tr("{percent} % of {size} MB").format(percent=f"{job.fraction * 100:.0f}",
                                                                      size=f"{job.total / 1e6:,.0f}"))  # fmt: skip
            return
        if bar is not None:
            self.table.removeCellWidget(r, STATE)
        if m.shipped:
            problem = self.disk.shipped_problem
            item = note_item(problem, self.table) if problem else table_item(self.tr("Installed (starter set)"))
        elif m.name in self.disk.present:
            item = table_item(self.tr("Downloaded"))
        elif job is not None and job.state == FAILED:
            item = note_item(self.tr("Failed: {error}").format(error=job.error or ""), self.table)
        else:
            item = table_item(self.tr("Not downloaded"))
        self.table.setItem(r, STATE, item)

    def _speed(self, m: SpeechModel, speed: Speed | None) -> str:
        if speed is not None:
            return self.tr("RTF {rtf} measured {date}").format(rtf=f"{speed.real_time_factor:.2f}", date=speed.date)
        if m.shipped or m.name in self.disk.present:
            return self.tr("not measured yet")
        return ""

    def _enable(self) -> None:
        m = self.selected()
        job = self.jobs.snapshot().get(m.name) if m is not None else None
        running = job is not None and job.state in (QUEUED, DOWNLOADING)
        hub = m is not None and not m.shipped
        present = m is not None and m.name in self.disk.present
        self.download_btn.setEnabled(hub and not running and not present)
        self.cancel_btn.setEnabled(running)
        self.delete_btn.setEnabled(hub and present and not running)

    # ----- actions
    def download_selected(self) -> None:
        m = self.selected()
        if m is None or m.shipped:
            return
        self.status.setText(self.tr("Downloading {name} ({size} MB) from {repo}…").format(
            name=m.name, size=f"{m.size_mb:,}", repo=m.repo))  # fmt: skip
        self._finished.discard(m.name)  # (a new job: its end is told again)
        self.jobs.start(m.name)
        self.refresh_jobs()

    def cancel_selected(self) -> None:
        m = self.selected()
        if m is not None:
            self.jobs.cancel(m.name)

    def delete_selected(self, confirmed: bool = False) -> None:
        m = self.selected()
        if m is None or m.shipped or m.name not in self.disk.present:
            return
        if not confirmed:
            answer = ask(self, self.tr("Delete speech model"), self.tr(
                "Delete {name} ({size} MB) from disk?").format(name=m.name, size=f"{m.size_mb:,}"))  # fmt: skip
            if answer != QMessageBox.StandardButton.Yes:
                return
        models_dir = self.models_dir
        self.jobs.forget(m.name)
        self.status.setText(self.tr("Deleting {name}…").format(name=m.name))

        def deleted(_: None) -> None:
            self.status.setText(self.tr("{name} was deleted.").format(name=m.name))
            self.refresh()
            self.changed.emit()

        self.tasks.run(lambda: downloads.delete(models_dir, m), deleted, self.status.setText)

    def shutdown(self) -> None:
        """Stop polling and the downloads (their partial files are kept: Download resumes them)."""
        self._poll.stop()
        self.jobs.close(wait=False)

    def join(self, timeout: float) -> bool:
        return self.jobs.wait_idle(timeout)
