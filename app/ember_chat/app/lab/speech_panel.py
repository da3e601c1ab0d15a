"""The benchmark lab's "Speech" tab (issue 33): the installed Whisper models (the shipped tiny.en and
those downloaded in the Model Manager) transcribe the same clip one after the other, on a worker with
progress and cancel, and a table puts their real-time factor, time to the first segment, words per
second, threads and what each heard side by side (engine/bench/speech.py), copied or exported like the
lab's other figures. The clip is the user's own audio file, or speech made by espeak-ng where it is
installed (Ember cannot make speech by itself)."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.engine.bench.speech import (
    SpeechResult,
    espeak_available,
    generated_clip,
    installed_models,
    measure_speech,
    results_csv,
)

Progress = tuple[int, int, str]
FILE, GENERATED = "file", "generated"
AUDIO_FILTER = "Audio (*.wav *.mp3 *.m4a *.ogg *.flac)"


class SpeechPanel(QWidget):
    run_finished = Signal()  # a run ended: done, cancelled or failed (tests wait on this)

    def __init__(
        self,
        models_dir: Path | None = None,
        espeak: Callable[[], bool] = espeak_available,
        parent: QWidget | None = None,
    ) -> None:
        """`models_dir`: where downloaded speech models are (None: the settings' models folder)."""
        super().__init__(parent)
        self.models_dir = models_dir
        self.results: list[SpeechResult] = []
        self.running = False
        self.tasks = TaskRunner(self, workers=1)
        self._cancel = threading.Event()
        self.clip_path: Path | None = None

        self.about = QLabel(
            self.tr(
                "Each installed speech model transcribes the same clip in turn: how much faster than the sound it "
                "hears (real-time factor: 0.1 is ten seconds heard in one), how soon the first words come, and "
                "words per second."
            )
        )
        self.about.setWordWrap(True)
        self.models = QListWidget()
        self.models.setAccessibleName(self.tr("Speech models to measure"))
        self.models.setToolTip(
            self.tr("The shipped model and those downloaded in the Model Manager; each is loaded in turn")
        )
        self.models.setMaximumHeight(90)
        for name in installed_models(models_dir):
            item = QListWidgetItem(name)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            self.models.addItem(item)
        self.source = QComboBox()
        self.source.setAccessibleName(self.tr("Clip"))
        self.source.setToolTip(
            self.tr("The speech every model transcribes: your own recording, or speech espeak-ng makes")
        )
        self.source.addItem(self.tr("An audio file"), FILE)
        if espeak():  # (only where it is installed: the app cannot make speech without it)
            self.source.addItem(self.tr("Generated speech (espeak-ng)"), GENERATED)
        self.source.currentIndexChanged.connect(self._source_changed)
        self.choose = QPushButton(self.tr("Choose…"))
        self.choose.setAccessibleName(self.tr("Choose an audio file"))
        self.choose.setToolTip(self.tr("A recording of speech: WAV, MP3, M4A, OGG or FLAC"))
        self.choose.clicked.connect(self.choose_dialog)
        self.clip_line = QLabel(self.tr("No file chosen"))
        self.clip_line.setTextFormat(Qt.TextFormat.PlainText)  # (a file's name is shown as it is)
        clip_row = QHBoxLayout()
        clip_row.addWidget(self.source)
        clip_row.addWidget(self.choose)
        clip_row.addWidget(self.clip_line, 1)
        form = QFormLayout()
        form.addRow(self.tr("Models"), self.models)
        form.addRow(self.tr("Clip"), clip_row)

        self.run_button = QPushButton(self.tr("Run"))
        self.run_button.setAccessibleName(self.tr("Measure the speech models"))
        self.run_button.setToolTip(self.tr("Each checked model transcribes the clip in turn"))
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton(self.tr("Cancel"))
        self.cancel_button.setAccessibleName(self.tr("Cancel measuring the speech models"))
        self.cancel_button.setToolTip(self.tr("Stop after the current segment; the models measured are kept"))
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setAccessibleName(self.tr("Speech benchmark progress"))
        self.progress.setAccessibleDescription(self.tr("The models measured so far"))
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress, 1)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)

        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(
            [self.tr("Model"), self.tr("Real-time factor"), self.tr("First segment s"), self.tr("Words/s"),
             self.tr("Threads"), self.tr("Heard")]
        )  # fmt: skip
        self.table.setAccessibleName(self.tr("Speech model figures"))
        self.table.setAccessibleDescription(self.tr("One row per model: its speed on the clip and what it heard"))
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        for c in range(5):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(5, QHeaderView.ResizeMode.Stretch)

        self.copy_button = QPushButton(self.tr("Copy"))
        self.copy_button.setAccessibleName(self.tr("Copy the figures"))
        self.copy_button.setToolTip(self.tr("Copy the table as text (tab-separated, one row per model)"))
        self.copy_button.clicked.connect(self.copy)
        self.export_csv = QPushButton(self.tr("Export CSV…"))
        self.export_csv.setAccessibleName(self.tr("Export CSV"))
        self.export_csv.setToolTip(self.tr("Save the figures as CSV"))
        self.export_csv.clicked.connect(self.export_dialog)
        for b in (self.copy_button, self.export_csv):
            b.setEnabled(False)
        exports = QHBoxLayout()
        exports.addStretch(1)
        exports.addWidget(self.copy_button)
        exports.addWidget(self.export_csv)

        layout = QVBoxLayout(self)
        layout.addWidget(self.about)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)
        layout.addLayout(exports)
        if self.source.count() > 1:
            self.source.setCurrentIndex(1)  # (ready to run: no file to find first)
        self._source_changed()

    def _source_changed(self, _index: int = 0) -> None:
        generated = self.source.currentData() == GENERATED
        self.choose.setVisible(not generated)
        self.clip_line.setVisible(not generated)

    def choose_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Choose an audio file"), "", AUDIO_FILTER)
        if path:
            self.set_clip(Path(path))

    def set_clip(self, path: Path) -> None:
        self.clip_path = path
        self.clip_line.setText(path.name)
        self.clip_line.setToolTip(str(path))
        self.source.setCurrentIndex(0)

    def checked_models(self) -> list[str]:
        items = (self.models.item(i) for i in range(self.models.count()))
        return [it.data(Qt.ItemDataRole.UserRole) for it in items if it.checkState() == Qt.CheckState.Checked]

    # ----- running
    def start(self) -> None:
        models = self.checked_models()
        generated = self.source.currentData() == GENERATED
        if not models:
            self.status.setText(self.tr("Check at least one speech model."))
            return
        if not generated and self.clip_path is None:
            self.status.setText(self.tr("Choose an audio file first (a recording of speech)."))
            return
        clip = self.clip_path
        self._cancel.clear()
        self.running = True
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, len(models))
        self.progress.setValue(0)
        self.status.setText(self.tr("Making the clip…") if generated else "")

        def work(report: Callable[[Progress], None]) -> list[SpeechResult]:
            with tempfile.TemporaryDirectory(prefix="ember-speech-bench-") as tmp:
                path = generated_clip(Path(tmp) / "speech.wav") if generated else clip
                assert path is not None
                return measure_speech(models, path, self._cancel, lambda *p: report(p), self.models_dir)

        self.tasks.run_reporting(work, self._show_progress, self._done, self._failed, cancel=self._cancel.set)

    def cancel(self) -> None:
        self._cancel.set()
        self.status.setText(self.tr("Cancelling…"))

    def stop(self) -> None:
        self._cancel.set()

    def shutdown(self) -> None:
        self._cancel.set()
        self.tasks.shutdown()
        self.running = False

    def _show_progress(self, progress: Progress) -> None:
        done, total, model = progress
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        if model:
            self.status.setText(self.tr("Transcribing with {model}…").format(model=model))

    def _finish(self) -> None:
        self.running = False
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.run_finished.emit()

    def _failed(self, message: str) -> None:
        self.status.setText(self.tr("The speech benchmark stopped: {message}").format(message=message))
        self._finish()

    def _done(self, results: list[SpeechResult]) -> None:
        self.show_results(results)
        cancelled = self._cancel.is_set()
        self.status.setText(
            self.tr("Cancelled: the models measured so far are shown.") if cancelled else self.tr("Done.")
        )
        self._finish()

    def show_results(self, results: list[SpeechResult]) -> None:
        self.results = results
        self.table.setRowCount(0)
        for r in results:
            row = self.table.rowCount()
            self.table.insertRow(row)
            figures = r.row()
            values = [r.model, *figures[1:5], r.error or r.text]
            for c, value in enumerate(values):
                item = QTableWidgetItem(value)
                if c == 5:
                    item.setToolTip(value)
                elif c > 0:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, c, item)
        for b in (self.copy_button, self.export_csv):
            b.setEnabled(bool(results))

    def table_text(self) -> str:
        """The table as tab-separated text, its header first."""
        rows = ["\t".join(self.table.horizontalHeaderItem(c).text() for c in range(self.table.columnCount()))]
        for r in range(self.table.rowCount()):
            rows.append("\t".join(self.table.item(r, c).text() for c in range(self.table.columnCount())))
        return "\n".join(rows) + "\n"

    def copy(self) -> None:
        if self.results:
            QGuiApplication.clipboard().setText(self.table_text())

    def export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Export speech figures"), "speech.csv")
        if path:
            self.export(Path(path))

    def export(self, path: Path) -> None:
        try:
            path.write_text(results_csv(self.results), encoding="utf-8")
        except OSError as exc:
            self.status.setText(self.tr("Could not export to {path}: {reason}.").format(path=path, reason=exc))
