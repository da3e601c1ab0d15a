"""Models ▸ Benchmark…: the benchmark lab in the window. Pick models — local ones, loaded with their
own load settings, and remote connections' — and prompt lengths; Ember loads each model in turn (its
own copy, beside the chat's) and measures it as `ember-chat bench` does, with progress and cancel —
in the window, as an exclusive job of the engine service: after the running answer, while chat and
API requests wait, so the figures are the machine's alone (the saved facts say so); then plots
prefill speed against prompt length and decode speed against context depth, one line per model
with each measured point marked, lists the figures, and exports them. Before the first run the
charts' place says what will show there. Runs are kept in the data folder. A second tab compares
speculative decoding's modes on the loaded model (speculation_panel.py); a third load-tests a served
model (serving_panel.py); a fourth puts the installed speech models side by side (speech_panel.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from PySide6.QtCharts import QChart, QChartView, QLineSeries, QValueAxis
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont, QPainter
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.model_names import model_choices
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.lab.serving_panel import ServingPanel
from ember_chat.app.lab.speculation_panel import SpeculationPanel
from ember_chat.app.lab.speech_panel import SpeechPanel
from ember_chat.engine.bench.lab import BenchPlan, BenchRun, measure_exclusively, measure_model, points_csv, save_run
from ember_chat.engine.errors import InvalidParameter, LoadCancelled
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.inference.service.resolver import model_ref
from ember_chat.engine.models.library import ModelLibrary
from ember_chat.engine.storage.connections import ConnectionStore
from ember_chat.engine.storage.model_settings import ModelSettingsStore
from ember_chat.engine.storage.settings import Settings


class BenchmarkDialog(QDialog):
    run_finished = Signal()  # a run ended: done, cancelled or failed (tests wait on this)

    def __init__(
        self,
        library: ModelLibrary,
        settings: Settings,
        data_dir: Path,
        connections: ConnectionStore,
        model_settings: ModelSettingsStore,
        parent: QWidget | None = None,
        service: EngineService | None = None,
    ) -> None:
        """`service`: the window's engine service; each model is then measured as its exclusive job
        (without one, beside it, as the command line does)."""
        super().__init__(parent)
        self.setWindowTitle(self.tr("Benchmark"))
        self.setAccessibleName(self.tr("Benchmark"))
        self.library = library
        self.settings = settings
        self.data_dir = data_dir
        self.connections = connections
        self.model_settings = model_settings
        self.service = service
        self.runs: list[BenchRun] = []
        self._speed_running = False
        self.tasks = TaskRunner(self, workers=1)
        self._cancel = threading.Event()
        self._progress: tuple[int, int, str] = (0, 1, "")

        self.models = QListWidget()
        self.models.setAccessibleName(self.tr("Models to measure"))
        self.models.setAccessibleDescription(
            self.tr("Check the models to measure, on this computer or a remote connection; each is loaded in turn")
        )
        self._labels = dict((name, label) for label, name in model_choices(library.entries(), connections.list()))
        for name, label in self._labels.items():
            item = QListWidgetItem(label)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            self.models.addItem(item)
        self.models.setMaximumHeight(110)
        self.lengths = QLineEdit("128,512,1024")
        self.lengths.setAccessibleName(self.tr("Prompt lengths"))
        self.lengths.setToolTip(self.tr("Prompt lengths in tokens, comma-separated (llama-bench's pp)"))
        self.output = QSpinBox()
        self.output.setRange(2, 4096)
        self.output.setValue(64)
        self.output.setAccessibleName(self.tr("Output tokens"))
        self.output.setToolTip(self.tr("Tokens generated after each prompt (llama-bench's tg)"))
        self.reps = QSpinBox()
        self.reps.setRange(1, 20)
        self.reps.setValue(2)
        self.reps.setAccessibleName(self.tr("Repetitions"))
        self.reps.setToolTip(self.tr("Each measurement is repeated; the median is kept"))
        form = QFormLayout()
        form.addRow(self.tr("Models"), self.models)
        form.addRow(self.tr("Prompt lengths"), self.lengths)
        form.addRow(self.tr("Output tokens"), self.output)
        form.addRow(self.tr("Repetitions"), self.reps)

        self.run_button = QPushButton(self.tr("Run"))
        self.run_button.setAccessibleName(self.tr("Run the benchmark"))
        self.run_button.setToolTip(self.tr("Load each checked model in turn and measure it"))
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton(self.tr("Cancel"))
        self.cancel_button.setAccessibleName(self.tr("Cancel the benchmark"))
        self.cancel_button.setToolTip(self.tr("Stop after the current token; what was measured is kept"))
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setAccessibleName(self.tr("Benchmark progress"))
        self.status = QLabel(self.tr("Measured as llama-bench does: random prompt tokens, an empty cache, greedy."))
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress, 1)

        self.prefill_chart, self.prefill_view = self._chart(
            self.tr("Prefill tokens/s by prompt length"), self.tr("Prefill speed chart")
        )
        self.decode_chart, self.decode_view = self._chart(
            self.tr("Decode tokens/s by context depth"), self.tr("Decode speed chart")
        )
        charts_page = QWidget()
        charts = QHBoxLayout(charts_page)
        charts.setContentsMargins(0, 0, 0, 0)
        charts.addWidget(self.prefill_view)
        charts.addWidget(self.decode_view)
        self.empty = QLabel(
            self.tr(
                "No results yet. Check the models to measure, choose the prompt lengths and press Run: "
                "prefill and decode speeds are plotted here, one line per model, and listed below."
            )
        )
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setAccessibleName(self.tr("No benchmark results yet"))
        self.plots = QStackedWidget()
        self.plots.addWidget(self.empty)
        self.plots.addWidget(charts_page)
        self.table = QTableWidget(0, 7)
        self.table.setHorizontalHeaderLabels(
            [self.tr("Model"), self.tr("Prompt"), self.tr("TTFT s"), self.tr("Prefill t/s"),
             self.tr("Decode t/s"), self.tr("ITL p50/p95/p99 ms"), self.tr("Process peak MB")]
        )  # fmt: skip
        self.table.horizontalHeaderItem(6).setToolTip(
            self.tr(
                "The most memory Ember's own process held while the model was measured (resident, MB); "
                "— for a remote model, whose memory is the server's"
            )
        )
        self.table.setAccessibleName(self.tr("Benchmark figures"))
        self.table.setAccessibleDescription(self.tr("One row per model and prompt length"))
        self.table.verticalHeader().hide()
        self.table.resizeColumnsToContents()  # the headers show whole before the first run
        self.table.horizontalHeader().setStretchLastSection(True)
        self.export_csv = QPushButton(self.tr("Export CSV…"))
        self.export_json = QPushButton(self.tr("Export JSON…"))
        for b, kind in ((self.export_csv, "csv"), (self.export_json, "json")):
            b.setAccessibleName(b.text().rstrip("…"))
            b.setToolTip(self.tr("Save the figures and the machine's facts"))
            b.setEnabled(False)
            b.clicked.connect(lambda _=False, k=kind: self.export_dialog(k))
        exports = QHBoxLayout()
        exports.addStretch(1)
        exports.addWidget(self.export_csv)
        exports.addWidget(self.export_json)

        speed_page = QWidget()
        layout = QVBoxLayout(speed_page)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(self.plots, 1)
        layout.addWidget(self.table, 1)
        layout.addLayout(exports)
        self.speculation = SpeculationPanel(service, data_dir)
        self.serving = ServingPanel(
            service, connections, data_dir, model_settings=model_settings,
            resolve=lambda name: model_ref(name, self.library, self.connections, self.model_settings, self.settings)[0],
        )  # fmt: skip
        self.speech = SpeechPanel()
        self.tabs = QTabWidget()
        self.tabs.setAccessibleName(self.tr("Benchmark sections"))
        self.tabs.tabBar().setAccessibleName(self.tr("Benchmark sections"))
        self.tabs.tabBar().setAccessibleDescription(
            self.tr("Speed, speculative decoding, serving, or speech; the arrow keys switch")
        )
        self.tabs.addTab(speed_page, self.tr("Speed"))
        self.tabs.addTab(self.speculation, self.tr("Speculative decoding"))
        self.tabs.addTab(self.serving, self.tr("Serving"))
        self.tabs.addTab(self.speech, self.tr("Speech"))
        self.tabs.setTabToolTip(0, self.tr("Prefill and decode speed of the checked models"))
        self.tabs.setTabToolTip(1, self.tr("Speculation off, n-gram and draft model compared on the loaded model"))
        self.tabs.setTabToolTip(2, self.tr("How many users a served model keeps within a latency objective"))
        self.tabs.setTabToolTip(3, self.tr("The installed speech models transcribing the same clip"))
        self.tabs.currentChanged.connect(self._tab_shown)
        QVBoxLayout(self).addWidget(self.tabs)
        self._poll = QTimer(self)
        self._poll.setInterval(100)
        self._poll.timeout.connect(self._show_progress)
        room = self.screen().availableGeometry()  # (a small screen: the dialog within it, not past its edge)
        self.resize(min(980, room.width()), min(760, room.height()))

    @property
    def running(self) -> bool:
        """A run is on in some tab (Models ▸ Benchmark… then brings this dialog back instead of a new one,
        which would close this one and stop that run)."""
        return self._speed_running or self.speculation.running or self.serving.running or self.speech.running

    def _tab_shown(self, _index: int) -> None:
        self.speculation.describe_model()  # (the model loaded for chat may have changed)
        self.serving.describe_target()

    def _chart(self, title: str, name: str) -> tuple[QChart, QChartView]:
        chart = QChart()
        chart.setTitle(title)
        view = QChartView(chart)
        view.setRenderHint(QPainter.RenderHint.Antialiasing)
        view.setMinimumHeight(200)  # (with the tabs, the dialog still fits a 1024×640 screen)
        view.setAccessibleName(name)
        view.setAccessibleDescription(self.tr("One line per model; the table below has the figures"))
        return chart, view

    def checked_models(self) -> list[str]:
        items = (self.models.item(i) for i in range(self.models.count()))
        return [it.data(Qt.ItemDataRole.UserRole) for it in items if it.checkState() == Qt.CheckState.Checked]

    # ----- running
    def start(self) -> None:
        names = self.checked_models()
        try:
            lengths = tuple(int(x) for x in self.lengths.text().split(",") if x.strip())
            plan = BenchPlan(lengths, self.output.value(), self.reps.value())
        except ValueError:
            self.status.setText(self.tr("Prompt lengths must be numbers separated by commas."))
            return
        except InvalidParameter as exc:
            self.status.setText(str(exc))
            return
        if not names:
            self.status.setText(self.tr("Check at least one model."))
            return
        self._cancel.clear()
        self._progress = (0, len(names) * len(lengths) * plan.repetitions, "")
        self._speed_running = True
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self._poll.start()
        self.tasks.run(lambda: self._work(names, plan), self._done, self._failed)

    def _work(self, names: list[str], plan: BenchPlan) -> list[BenchRun]:
        """On a worker thread: each model loaded into its own runtime, measured, closed (on the
        engine thread, with the engine to itself, when there is a service)."""
        runs = []
        per_model = len(plan.prompt_lengths) * plan.repetitions
        total = per_model * len(names)
        for i, name in enumerate(names):
            if self._cancel.is_set():
                break
            ref, alias = model_ref(name, self.library, self.connections, self.model_settings, self.settings)
            self._progress = (i * per_model, total, self.tr("Loading {model}…").format(model=alias))

            def progress(done: int, _total: int, what: str, base: int = i * per_model) -> None:
                self._progress = (base + done, total, what)

            try:
                if self.service is not None:
                    run = measure_exclusively(self.service, ref, plan, self._cancel, progress)
                else:
                    run = measure_model(ref, plan, self._cancel, progress)
            except LoadCancelled:
                break
            run.machine["model_name"] = self._labels.get(name, alias)
            save_run(run, self.data_dir / "benchmarks")
            runs.append(run)
        return runs

    def cancel(self) -> None:
        self._stop_work()
        self.status.setText(self.tr("Cancelling…"))

    def _stop_work(self) -> None:
        """Stop the run: the lab stops the backend within 50 ms of this — a load in progress, a local
        model within a token (or a prompt batch), a remote server's stream closed at once."""
        self._cancel.set()

    def reject(self) -> None:  # Qt override: Esc hides the dialog without a close event
        self._stop_work()
        self.speculation.stop()
        self.serving.stop()
        self.speech.stop()
        super().reject()

    def _show_progress(self) -> None:
        done, total, what = self._progress
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        if what:
            self.status.setText(what)

    def _finish(self) -> None:
        self._speed_running = False
        self._poll.stop()
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.run_finished.emit()

    def _failed(self, message: str) -> None:
        self.status.setText(self.tr("The benchmark stopped: {message}").format(message=message))
        self._finish()

    def _done(self, runs: list[BenchRun]) -> None:
        self.runs = runs
        self._show_progress()
        cancelled = self._cancel.is_set() or any(r.cancelled for r in runs)
        self.status.setText(
            self.tr("Cancelled: the figures measured so far are shown.") if cancelled else self.tr("Done.")
        )
        self._plot()
        self.export_csv.setEnabled(bool(runs))
        self.export_json.setEnabled(bool(runs))
        self._finish()

    def _plot(self) -> None:
        for chart in (self.prefill_chart, self.decode_chart):
            chart.removeAllSeries()
            for axis in chart.axes():
                chart.removeAxis(axis)
        self.table.setRowCount(0)
        top_x = top_prefill = top_decode = 1.0
        for run in self.runs:
            name = run.machine.get("model_name", "")
            prefill, decode = QLineSeries(), QLineSeries()
            for series in (prefill, decode):
                series.setName(name)
                series.setPointsVisible(True)  # each measurement marked: two points are not a trend
                series.setMarkerSize(8)
            for p in run.points:
                if p.prefill_tokens_per_s is not None:
                    prefill.append(p.prompt_tokens, p.prefill_tokens_per_s)
                    top_prefill = max(top_prefill, p.prefill_tokens_per_s)
                decode.append(p.prompt_tokens, p.decode_tokens_per_s)
                top_x = max(top_x, p.prompt_tokens)
                top_decode = max(top_decode, p.decode_tokens_per_s)
                r = self.table.rowCount()
                self.table.insertRow(r)
                itl = f"{p.itl_p50_ms:.1f} / {p.itl_p95_ms:.1f} / {p.itl_p99_ms:.1f}"
                memory = "—" if p.peak_rss_bytes is None else f"{p.peak_rss_bytes / 1e6:,.0f}"  # remote: the server's
                prefill_text = "—" if p.prefill_tokens_per_s is None else f"{p.prefill_tokens_per_s:.1f}"
                values = [name, str(p.prompt_tokens), f"{p.ttft_s:.3f}", prefill_text,
                          f"{p.decode_tokens_per_s:.1f}", itl, memory]  # fmt: skip
                for c, v in enumerate(values):
                    self.table.setItem(r, c, QTableWidgetItem(v))
            self.prefill_chart.addSeries(prefill)
            self.decode_chart.addSeries(decode)
        for chart, top, label in (
            (self.prefill_chart, top_prefill, self.tr("prompt tokens")),
            (self.decode_chart, top_decode, self.tr("context depth (tokens)")),
        ):
            x, y = QValueAxis(), QValueAxis()
            x.setRange(0, top_x)
            x.setTitleText(label)
            x.setLabelFormat("%.0f")
            y.setRange(0, top * 1.1)
            y.setLabelFormat("%.0f")
            chart.addAxis(x, Qt.AlignmentFlag.AlignBottom)
            chart.addAxis(y, Qt.AlignmentFlag.AlignLeft)
            for series in chart.series():
                series.attachAxis(x)
                series.attachAxis(y)
            small = QFont(QApplication.font())  # relative to the system font: labels fit, and scale with it
            small.setPointSizeF(small.pointSizeF() * 0.8)
            for axis in (x, y):
                axis.setLabelsFont(small)
                axis.setTitleFont(small)
                axis.setTickCount(5)
                axis.applyNiceNumbers()  # round ticks (0, 100, 200 …), not fractions of the data
        self.table.resizeColumnsToContents()
        self.plots.setCurrentIndex(1 if self.runs else 0)

    # ----- export
    def export_dialog(self, kind: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Export benchmark"), f"benchmark.{kind}")
        if path:
            self.export(Path(path), kind)

    def export(self, path: Path, kind: str) -> None:
        try:
            if kind == "csv":
                path.write_text(points_csv([p for r in self.runs for p in r.points]), encoding="utf-8")
            else:
                path.write_text(json.dumps([r.to_dict() for r in self.runs], indent=2), encoding="utf-8")
        except OSError as exc:
            self.status.setText(self.tr("Could not export to {path}: {reason}.").format(path=path, reason=exc))

    def closeEvent(self, event: object) -> None:  # Qt override
        self._stop_work()
        self.tasks.shutdown()  # joins the worker, which the stop above lets go at once
        self.speculation.shutdown()
        self.serving.shutdown()
        self.speech.shutdown()
        self._poll.stop()
        self._speed_running = False
        super().closeEvent(event)
