"""The benchmark lab's "Speculative decoding" tab: on the model loaded for chat, a code edit, an answer
from a document and free prose, each answered at temperature 0 with speculation off, with n-gram drafts
and with the model's draft model (engine/bench/speculation.py), as an exclusive job of the engine service
with progress and cancel; then a table, one row per task and one column per mode — decode tokens/s, the
speedup over off, the drafted tokens accepted and whether the answer was off's — copied or exported like
the lab's speed figures. Where the model has no draft model, that column says why."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.engine.bench.speculation import (
    LAB_MODES,
    LAB_TASKS,
    SpeculationResult,
    SpeculationRun,
    compare_exclusively,
    save_speculation_run,
)
from ember_chat.engine.errors import LoadCancelled
from ember_chat.engine.inference.service.engine import EngineService

Progress = tuple[int, int, str]


class SpeculationPanel(QWidget):
    run_finished = Signal()  # a run ended: done, cancelled or failed (tests wait on this)

    def __init__(self, service: EngineService | None, data_dir: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.service = service
        self.data_dir = data_dir
        self.run: SpeculationRun | None = None
        self.running = False
        self.tasks = TaskRunner(self, workers=1)
        self._cancel = threading.Event()
        self.task_names = {
            "code_edit": self.tr("Code edit"),
            "copy": self.tr("Answer from a document"),
            "free": self.tr("Free prose"),
        }
        self.task_tips = {
            "code_edit": self.tr("A 20-line Python file written again with one function renamed"),
            "copy": self.tr("A passage the prompt gives, repeated word for word"),
            "free": self.tr("A story continued: little to copy"),
        }
        self.mode_names = {"off": self.tr("Off"), "ngram": self.tr("N-gram"), "draft": self.tr("Draft model")}

        self.about = QLabel(
            self.tr(
                "Each task is answered by the loaded model at temperature 0 with speculation off, with n-gram "
                "drafts (from the prompt and the answer) and with its draft model, the cache cleared each time: "
                "the same answer, sooner when the drafts are accepted."
            )
        )
        self.about.setWordWrap(True)
        self.model_line = QLabel()
        self.model_line.setWordWrap(True)
        self.model_line.setAccessibleName(self.tr("The model compared"))
        self.tokens = QSpinBox()
        self.tokens.setRange(16, 1024)
        self.tokens.setValue(128)
        self.tokens.setAccessibleName(self.tr("Answer tokens"))
        self.tokens.setToolTip(self.tr("Tokens each answer generates (end-of-text tokens included)"))
        self.rounds = QSpinBox()
        self.rounds.setRange(1, 10)
        self.rounds.setValue(1)
        self.rounds.setAccessibleName(self.tr("Rounds"))
        self.rounds.setToolTip(self.tr("Each task is answered this many times in each mode; the median is kept"))

        self.run_button = QPushButton(self.tr("Run"))
        self.run_button.setAccessibleName(self.tr("Run the speculative decoding comparison"))
        self.run_button.setToolTip(self.tr("Answer each task in each mode on the loaded model"))
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton(self.tr("Cancel"))
        self.cancel_button.setAccessibleName(self.tr("Cancel the speculative decoding comparison"))
        self.cancel_button.setToolTip(self.tr("Stop within a token; the tasks finished are kept"))
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setAccessibleName(self.tr("Speculative decoding comparison progress"))
        buttons = QHBoxLayout()  # (one row: two small numbers need no column of their own)
        for text, spin in ((self.tr("Answer tokens"), self.tokens), (self.tr("Rounds"), self.rounds)):
            label = QLabel(text)
            label.setBuddy(spin)
            buttons.addWidget(label)
            buttons.addWidget(spin)
            buttons.addSpacing(8)
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress, 1)
        self.status = QLabel(self.tr("No results yet: press Run to compare the three modes on each task."))
        self.status.setWordWrap(True)

        self.table = QTableWidget(len(LAB_TASKS), 1 + len(LAB_MODES))
        self.table.setHorizontalHeaderLabels([self.tr("Task"), *(self.mode_names[m] for m in LAB_MODES)])
        self.table.horizontalHeaderItem(1 + LAB_MODES.index("draft")).setToolTip(
            self.tr("Drafts from the draft model set in the model's load settings (⚙)")
        )
        self.table.setAccessibleName(self.tr("Speculative decoding figures"))
        self.table.setAccessibleDescription(
            self.tr(
                "One row per task, one column per mode: decode tokens per second, the speedup over off, "
                "the drafted tokens accepted and whether the answer was the same as off's"
            )
        )
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(True)
        self.table.setAlternatingRowColors(True)  # (a task's four lines per cell: its row told apart, dark theme too)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        for c in range(1, self.table.columnCount()):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.Stretch)
        for r, task in enumerate(LAB_TASKS):
            item = QTableWidgetItem(self.task_names[task])
            item.setToolTip(self.task_tips[task])
            self.table.setItem(r, 0, item)
        self.fit_table()

        self.copy_button = QPushButton(self.tr("Copy"))
        self.export_csv = QPushButton(self.tr("Export CSV…"))
        self.export_json = QPushButton(self.tr("Export JSON…"))
        self.copy_button.setAccessibleName(self.tr("Copy the figures"))
        self.copy_button.setToolTip(self.tr("Copy the table as text (tab-separated, one row per task and mode)"))
        self.copy_button.clicked.connect(self.copy)
        for b, kind in ((self.export_csv, "csv"), (self.export_json, "json")):
            b.setAccessibleName(b.text().rstrip("…"))
            b.setToolTip(self.tr("Save the figures and the machine's facts"))
            b.clicked.connect(lambda _=False, k=kind: self.export_dialog(k))
        for b in (self.copy_button, self.export_csv, self.export_json):
            b.setEnabled(False)
        exports = QHBoxLayout()
        exports.addStretch(1)
        exports.addWidget(self.copy_button)
        exports.addWidget(self.export_csv)
        exports.addWidget(self.export_json)

        self.notes = QLabel(
            self.tr(
                "Decode tokens/s: the answer's tokens after its first, per second (the median of the rounds); "
                "× off's speed: against the same task without speculation. Accepted: the drafted tokens the "
                "model kept, each a token it did not decode alone. The answers are off's own but for a near "
                "tie, which verifying several tokens at once can round the other way."
            )
        )
        self.notes.setWordWrap(True)
        self.notes.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # (quieter: an explanation, not a figure)

        layout = QVBoxLayout(self)
        layout.addWidget(self.about)
        layout.addWidget(self.model_line)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(self.table)
        layout.addWidget(self.notes)
        layout.addStretch(1)
        layout.addLayout(exports)
        self.describe_model()

    # ----- the model compared
    def describe_model(self) -> None:
        """Say which model the comparison will run on and whether its draft model takes part (the model
        loaded for chat may change while the lab is open: called when the tab is shown and at Run)."""
        model = self.service.model if self.service is not None else None
        if self.service is None:
            text = self.tr("The comparison runs on the window's engine.")
        elif model is None:
            text = self.tr("Load a model for chat first: the comparison runs on it.")
        elif model.is_remote:
            text = self.tr("{model} runs on {server}: speculative decoding runs on a model on this computer.").format(
                model=model.name, server=model.source
            )
        elif model.draft_model:
            text = self.tr("{model}, drafts from its draft model {draft}.").format(
                model=model.name, draft=model.draft_model
            )
        else:
            text = self.tr("{model}. {why}").format(model=model.name, why=self.draft_absent(model.draft_refused))
        self.model_line.setText(text)
        self.run_button.setEnabled(not self.running and model is not None and not model.is_remote)

    def draft_absent(self, refused: str | None) -> str:
        if refused:
            return self.tr("Its draft model was not loaded: {reason}").format(reason=refused)
        return self.tr("It has no draft model: choose one in its load settings (⚙) to compare it too.")

    # ----- running
    def start(self) -> None:
        self.describe_model()
        if self.service is None or not self.run_button.isEnabled():
            return
        service, tokens, rounds = self.service, self.tokens.value(), self.rounds.value()
        self._cancel.clear()
        self.running = True
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status.setText(self.tr("Waiting for the running answer to end…"))

        def work(report: Callable[[Progress], None]) -> SpeculationRun | None:
            try:
                run = compare_exclusively(service, tokens, rounds, self._cancel, lambda *p: report(p))
            except LoadCancelled:  # (cancelled while it waited for its turn)
                return None
            save_speculation_run(run, self.data_dir / "benchmarks")
            return run

        self.tasks.run_reporting(work, self._show_progress, self._done, self._failed, cancel=self.stop)

    def cancel(self) -> None:
        self.stop()
        self.status.setText(self.tr("Cancelling…"))

    def stop(self) -> None:
        """Stop the run within a token (the engine service's job is asked to stop)."""
        self._cancel.set()

    def shutdown(self) -> None:
        self.stop()
        self.tasks.shutdown()
        self.running = False

    def _show_progress(self, progress: Progress) -> None:
        done, total, what = progress
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.status.setText(self.tr("{what}…").format(what=what) if what else "")

    def _finish(self) -> None:
        self.running = False
        self.cancel_button.setEnabled(False)
        self.describe_model()
        self.run_finished.emit()

    def _failed(self, message: str) -> None:
        self.status.setText(self.tr("The comparison stopped: {message}").format(message=message))
        self._finish()

    def _done(self, run: SpeculationRun | None) -> None:
        if run is not None:
            self.run = run
            self.show_run(run)
        if run is None or run.cancelled:
            self.status.setText(self.tr("Cancelled: the tasks finished are shown."))
        else:
            done = self.tr("Done: {n} tokens per answer, {rounds} round(s), greedy.")
            self.status.setText(done.format(n=run.tokens, rounds=run.rounds))
        for b in (self.copy_button, self.export_csv, self.export_json):
            b.setEnabled(self.run is not None)
        self._finish()

    # ----- the table
    def show_run(self, run: SpeculationRun) -> None:
        self.table.clearSpans()
        draft_column = 1 + LAB_MODES.index("draft")
        for r, task in enumerate(LAB_TASKS):
            for c, mode in enumerate(LAB_MODES, start=1):
                result = run.result(task, mode)
                item = QTableWidgetItem(self.cell_text(result) if result is not None else "—")
                item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, item)
        if run.draft_model is None:  # the column says why it is empty, once, over every task
            self.table.setSpan(0, draft_column, len(LAB_TASKS), 1)
            why = QTableWidgetItem(self.draft_absent(run.draft_refused))
            why.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            self.table.setItem(0, draft_column, why)
        self.fit_table()

    def fit_table(self) -> None:
        """Rows as tall as their lines and a little air, the table as tall as its rows (no empty grid
        below them: the notes follow)."""
        self.table.resizeRowsToContents()
        for r in range(self.table.rowCount()):
            self.table.setRowHeight(r, self.table.rowHeight(r) + 8)
        height = self.table.horizontalHeader().height() + 2 * self.table.frameWidth()
        height += sum(self.table.rowHeight(r) for r in range(self.table.rowCount()))
        self.table.setFixedHeight(height)

    def cell_text(self, r: SpeculationResult) -> str:
        lines = [self.tr("{rate:.1f} tokens/s").format(rate=r.decode_tokens_per_s)]
        if r.mode != "off":
            if r.speedup is not None:
                lines.append(self.tr("{speedup:.2f}× off's speed").format(speedup=r.speedup))
            if r.acceptance is not None:
                lines.append(
                    self.tr("{percent:.0f} % accepted ({accepted} of {drafted})").format(
                        percent=100 * r.acceptance, accepted=r.accepted, drafted=r.drafted
                    )
                )
            else:
                lines.append(self.tr("nothing drafted"))
            lines.append(self.tr("same answer as off") if r.identical else self.tr("another answer than off's"))
        return "\n".join(lines)

    def table_text(self) -> str:
        """The figures as tab-separated text, one row per task and mode (for a spreadsheet or a message)."""
        assert self.run is not None
        head = [self.tr("Task"), self.tr("Mode"), self.tr("Decode tokens/s"), self.tr("Speedup over off"),
                self.tr("Drafted"), self.tr("Accepted"), self.tr("Accepted %"), self.tr("Same as off")]  # fmt: skip
        rows = ["\t".join(head)]
        for r in self.run.results:
            rows.append(
                "\t".join(
                    [
                        self.task_names[r.task],
                        self.mode_names[r.mode],
                        f"{r.decode_tokens_per_s:.1f}",
                        "" if r.speedup is None else f"{r.speedup:.2f}",
                        "" if r.drafted is None else str(r.drafted),
                        "" if r.accepted is None else str(r.accepted),
                        "" if r.acceptance is None else f"{100 * r.acceptance:.0f}",
                        "" if r.mode == "off" else (self.tr("yes") if r.identical else self.tr("no")),
                    ]
                )
            )
        if self.run.draft_model is None:
            rows.append(f"{self.mode_names['draft']}\t{self.draft_absent(self.run.draft_refused)}")
        return "\n".join(rows) + "\n"

    def copy(self) -> None:
        if self.run is not None:
            QGuiApplication.clipboard().setText(self.table_text())

    # ----- export
    def export_dialog(self, kind: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Export speculative decoding"), f"speculative.{kind}")
        if path:
            self.export(Path(path), kind)

    def export(self, path: Path, kind: str) -> None:
        if self.run is None:
            return
        try:
            text = self.run.to_csv() if kind == "csv" else json.dumps(self.run.to_dict(), indent=2)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            self.status.setText(self.tr("Could not export to {path}: {reason}.").format(path=path, reason=exc))
