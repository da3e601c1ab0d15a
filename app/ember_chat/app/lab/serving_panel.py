"""The benchmark lab's "Serving" tab: the serving lab (engine/bench/serving/, `ember-chat bench serve`)
in the window — how many users a served model keeps within a latency objective.

The target is the model loaded for chat, a saved connection or a URL typed here. The model loaded for
chat is served, for the run's length, by a temporary Ember API server of this window's engine on a free
loopback port with a key of its own (the window's Local API server, if it runs, is left as it is: type
its URL to load-test it instead). The load reaches the engine only through HTTP, as any client's
would, so the figures include Ember's HTTP layer and chat messages sent meanwhile wait their turn
like any other request. The sweep runs on a thread of its own with progress per load; Cancel keeps
the loads that ran. The plain answer comes first, then a row per load and a plot of TTFT p95 against
output tokens/s; copied, exported (JSON: the sweep's dict, CSV: a row per load) and kept in the data
folder's benchmarks/ as serving-*.json. Repeats give each figure as the repeats' median with its 95 %
interval (report.sweep's `loads`); a knob sweep (bench/serving/knobs.py) loads the model loaded for chat with
each setting in an engine of its own, marks the Pareto front and the winner, and saves the winner as the
model's load settings. The figures table (serving_table.py), the knob sweep box (serving_knobs.py),
Find servers (serving_finder.py) and the plots (serving_chart.py) are modules of their own."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QGuiApplication, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.lab.serving_chart import ServingChart
from ember_chat.app.lab.serving_compare import CompareRunsDialog
from ember_chat.app.lab.serving_finder import ServerFinder
from ember_chat.app.lab.serving_knobs import KnobSweepBox
from ember_chat.app.lab.serving_table import ServingTable
from ember_chat.engine.bench.lab import write_run
from ember_chat.engine.bench.serving.export import runs_csv
from ember_chat.engine.bench.serving.knobs import (
    Knob,
    apply_winner,
    knob_sweep,
    label_of,
    saved_knobs,
)
from ember_chat.engine.bench.serving.load import LoadPlan
from ember_chat.engine.bench.serving.report import sweep
from ember_chat.engine.bench.serving.report_html import report_html
from ember_chat.engine.bench.serving.summary import Slo
from ember_chat.engine.bench.serving.targets import (
    LOOPBACK,
    ServingTarget,
    connection_target,
    started_target,
    url_target,
)
from ember_chat.engine.bench.serving.workload import SHAPES, workload_for
from ember_chat.engine.core.params import LoadConfig
from ember_chat.engine.core.refs import ModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.service.engine import EngineService
from ember_chat.engine.storage.connections import ConnectionStore
from ember_chat.engine.storage.model_settings import ModelSettingsStore

Progress = tuple[int, int, str, int, int | None]  # (load index, loads, its label, requests done, of)
LOCAL, CONNECTION, URL = "local", "connection", "url"
SHAREGPT_FILE = "file"  # (the workload choice that opens a file dialog)
CONCURRENCY, RATE = "concurrency", "rate"  # (how the loads are given)
WARMUP = 1  # requests sent before each load, not counted (the CLI's default)
HTML = "html"  # (the export to a report: report_html)


def serve_window_model(service: EngineService, data_dir: Path) -> ServingTarget:
    """The window's loaded model served by a temporary Ember API server on a free loopback port, with a
    key of its own (no other program on this computer can use it meanwhile); closed with the target. Its
    context names the file, its hash (read once: kept in `data_dir`) and quantisation, and the settings."""
    from ember_chat.engine.bench.serving.model_facts import local_facts
    from ember_chat.engine.serve.config import ServerConfig
    from ember_chat.engine.serve.server import ApiServer

    model = service.model
    if model is None:
        raise EmberError("No model is loaded for chat: load one first, or pick a connection or a URL.")
    settings = {"n_ctx": model.n_ctx, "gpu_layers": model.gpu_layers, "kv_cache_type": model.kv_cache_type}
    facts = local_facts(model.path, model.quantization, data_dir, model.threads, settings)  # (before the server)
    facts["model_name"] = model.name  # (the answer names it so, not by the key the server serves it as)
    key = secrets.token_urlsafe(24)
    server = ApiServer(service, ServerConfig(port=0, api_key=key))
    server.start()
    engine = f"Ember (this window), {model.backend}"
    return started_target(model.name, server.url, key, engine, server.stop, facts)


class ServingPanel(QWidget):
    run_finished = Signal()  # a run ended: done, cancelled or failed (tests wait on this)

    def __init__(
        self,
        service: EngineService | None,
        connections: ConnectionStore,
        data_dir: Path,
        parent: QWidget | None = None,
        model_settings: ModelSettingsStore | None = None,
        resolve: Callable[[str], ModelRef] | None = None,
    ) -> None:
        """`model_settings` and `resolve` (a library name to the reference it loads with, the ⚙ dialog's
        settings applied): for knob sweeps of the model loaded for chat; without them, none."""
        super().__init__(parent)
        self.service = service
        self.connections = connections
        self.data_dir = data_dir
        self.model_settings = model_settings
        self.resolve = resolve
        self.result: dict[str, Any] | None = None
        self.measured: tuple[LoadConfig, str] | None = None  # a knob sweep's base settings and model name
        self.saved: Path | None = None
        self.running = False
        self.workload_file: Path | None = None
        self.tasks = TaskRunner(self, workers=1)
        self._cancel = threading.Event()

        self.about = QLabel(
            self.tr(
                "Streamed chat requests sent to a server as people would send them, at each load in turn, after "
                "a warm-up request: how many users it keeps within the latency objective, as "
                "ember-chat bench serve says."
            )
        )
        self.about.setWordWrap(True)

        self.target = QComboBox()
        self.target.setAccessibleName(self.tr("Target"))
        self.target.setToolTip(self.tr("The server to load-test"))
        self.target.addItem(self.tr("The model loaded for chat"), LOCAL)
        for c in connections.list():
            self.target.addItem(self.tr("Connection: {name}").format(name=c.name), f"{CONNECTION}:{c.name}")
        self.target.addItem(self.tr("A server's URL"), URL)
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8080/v1")
        self.url.setAccessibleName(self.tr("Server URL"))
        self.url.setToolTip(
            self.tr("An OpenAI-compatible server: llama-server, vLLM, SGLang, Ollama, LM Studio, Ember")
        )
        self.contacts = QLabel()  # what will be contacted, said before Run
        self.contacts.setWordWrap(True)
        self.contacts.setAccessibleName(self.tr("What the run contacts"))
        self.contacts.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.target.currentIndexChanged.connect(lambda _i: self.describe_target())
        self.url.textChanged.connect(lambda _t: self.describe_target())
        self.finder = ServerFinder(self.tasks, self)  # (Find servers: what answered on this computer)
        self.find_button, self.found_list, self.found_note = self.finder.button, self.finder.list, self.finder.note
        self.finder.picked.connect(self.aim_at)

        self.workload = QComboBox()
        self.workload.setAccessibleName(self.tr("Workload"))
        self.workload_names = {
            "chat": self.tr("Chat (~120-word prompts, ~160-token answers)"),
            "short": self.tr("Short (quick questions and answers)"),
            "document": self.tr("Document (~1,200-word prompts)"),
        }
        for key in SHAPES:
            self.workload.addItem(self.workload_names.get(key, key), key)
        self.workload.addItem(self.tr("A ShareGPT file…"), SHAREGPT_FILE)
        self.workload.setToolTip(self.tr("What each request asks; a ShareGPT .json file: its first human turns"))
        self.workload.activated.connect(self._workload_picked)
        self.loads_kind = QComboBox()
        self.loads_kind.setAccessibleName(self.tr("Load kind"))
        self.loads_kind.addItem(self.tr("Users at once"), CONCURRENCY)
        self.loads_kind.addItem(self.tr("Requests/s"), RATE)
        self.loads_kind.setToolTip(
            self.tr(
                "Users at once: each sends its next request when its answer ended (closed loop). Requests/s: "
                "Poisson arrivals, each sent on time however slow the server is (open loop)."
            )
        )
        self.loads = QLineEdit("1,2,4")
        self.loads.setAccessibleName(self.tr("Loads"))
        self.loads.setToolTip(self.tr("One load per value, comma-separated, run in turn"))
        self.requests = QSpinBox()
        self.requests.setRange(1, 10_000)
        self.requests.setValue(16)
        self.requests.setAccessibleName(self.tr("Requests per load"))
        self.requests.setToolTip(self.tr("Requests measured at each load (after one warm-up request)"))
        self.ttft = self._limit(self.tr("TTFT ≤"), 1.0, " s", 0.01, 600.0, 2)
        self.tpot = self._limit(self.tr("TPOT ≤"), 100.0, " ms", 1.0, 60_000.0, 0)
        self.e2e = self._limit(self.tr("E2E ≤"), 60.0, " s", 0.1, 3600.0, 1)
        self.ttft.setToolTip(self.tr("Time to the first token"))
        self.tpot.setToolTip(self.tr("Time per output token after the first (100 ms: 10 tokens/s)"))
        self.e2e.setToolTip(self.tr("The whole answer's time"))
        self.repeats = QSpinBox()
        self.repeats.setRange(1, 10)
        self.repeats.setAccessibleName(self.tr("Repeats"))
        self.repeats.setToolTip(
            self.tr("Run each load this many times: each figure is then the repeats' median, with its 95 % interval")
        )
        self.knob_sweep = KnobSweepBox()
        self.sweep_box, self.knob_area = self.knob_sweep.box, self.knob_sweep.choices
        self.knob_checks, self.knob_values = self.knob_sweep.checks, self.knob_sweep.values

        grid = QGridLayout()
        grid.addWidget(self._buddy(self.tr("Target"), self.target), 0, 0)
        target_row = QHBoxLayout()
        target_row.addWidget(self.target)
        target_row.addWidget(self.url, 1)
        target_row.addWidget(self.find_button)
        grid.addLayout(target_row, 0, 1, 1, 5)
        said = QVBoxLayout()  # (what the run contacts, then what Find servers found)
        said.addWidget(self.contacts)
        found_row = QHBoxLayout()
        found_row.addWidget(self.found_list)
        found_row.addWidget(self.found_note, 1)
        said.addLayout(found_row)
        grid.addLayout(said, 1, 1, 1, 5)
        grid.addWidget(self._buddy(self.tr("Workload"), self.workload), 2, 0)
        grid.addWidget(self.workload, 2, 1)
        grid.addWidget(self.loads_kind, 2, 2)
        grid.addWidget(self.loads, 2, 3)
        grid.addWidget(self._buddy(self.tr("Requests per load"), self.requests), 2, 4)
        grid.addWidget(self.requests, 2, 5)
        objective = QHBoxLayout()
        for spin in (self.ttft, self.tpot, self.e2e):
            objective.addWidget(self._buddy(spin.accessibleName(), spin))
            objective.addWidget(spin)
            objective.addSpacing(8)
        objective.addStretch(1)
        objective.addWidget(self._buddy(self.tr("Repeats"), self.repeats))
        objective.addWidget(self.repeats)
        grid.addWidget(self._buddy(self.tr("Objective"), self.ttft), 3, 0)
        grid.addLayout(objective, 3, 1, 1, 5)
        grid.addWidget(self.knob_sweep, 4, 0, 1, 6)
        grid.setColumnStretch(1, 2)
        grid.setColumnStretch(3, 1)

        self.run_button = QPushButton(self.tr("Run"))
        self.run_button.setAccessibleName(self.tr("Run the serving benchmark"))
        self.run_button.setToolTip(self.tr("Send the workload at each load in turn"))
        self.run_button.clicked.connect(self.start)
        self.cancel_button = QPushButton(self.tr("Cancel"))
        self.cancel_button.setAccessibleName(self.tr("Cancel the serving benchmark"))
        self.cancel_button.setToolTip(self.tr("Send nothing more; the requests in flight end, the loads run are kept"))
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setAccessibleName(self.tr("Serving benchmark progress"))
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress, 1)
        self.status = QLabel(self.tr("No results yet: pick the target and the loads, then press Run."))
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # (a server's errors: never markup)

        self.answer = QLabel()  # the plain answer, first and large
        self.answer.setWordWrap(True)
        self.answer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.answer.setAccessibleName(self.tr("The answer"))
        big = QFont(QApplication.font())
        big.setPointSizeF(big.pointSizeF() * 1.25)
        self.answer.setFont(big)
        self.answer.hide()

        self.table = ServingTable()
        self.failures = QLabel()  # each failure's reason, under the table (the tooltips say it too)
        self.failures.setWordWrap(True)
        self.failures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.failures.setAccessibleName(self.tr("Failed requests"))
        self.failures.hide()

        self.chart_view = ServingChart()
        self.chart = self.chart_view.chart()
        self.table.fit_table()

        self.copy_button = QPushButton(self.tr("Copy"))
        self.copy_button.setAccessibleName(self.tr("Copy the answer and the figures"))
        self.copy_button.setToolTip(self.tr("Copy the answer and the table as text (tab-separated)"))
        self.copy_button.clicked.connect(self.copy)
        self.export_csv = QPushButton(self.tr("Export CSV…"))
        self.export_json = QPushButton(self.tr("Export JSON…"))
        self.export_html = QPushButton(self.tr("Export HTML report…"))
        for b, kind in ((self.export_csv, "csv"), (self.export_json, "json"), (self.export_html, HTML)):
            b.setAccessibleName(b.text().rstrip("…"))
            b.setToolTip(self.tr("Save the figures, the objective and what was measured"))
            b.clicked.connect(lambda _=False, k=kind: self.export_dialog(k))
        self.export_html.setToolTip(
            self.tr("Save a report to share: the answer, what was measured, the figures and the plots (one HTML file)")
        )
        for b in (self.copy_button, self.export_csv, self.export_json, self.export_html):
            b.setEnabled(False)
        self.save_winner = QPushButton(self.tr("Save the winner as the model's load settings"))
        self.save_winner.setToolTip(
            self.tr(
                "The winner's settings become the model's own load settings (the ⚙ dialog's), used from its next load"
            )
        )
        self.save_winner.clicked.connect(self.apply_winner)
        self.save_winner.hide()  # (shown after a knob sweep with a winner)
        self.compare_button = QPushButton(self.tr("Compare two runs…"))
        self.compare_button.setAccessibleName(self.tr("Compare two runs"))
        self.compare_button.setToolTip(
            self.tr("Two of the runs kept in the data folder side by side: each load's figures and the ratio")
        )
        self.compare_button.clicked.connect(self.compare_runs)
        self.compare_dialog: CompareRunsDialog | None = None
        exports = QHBoxLayout()
        exports.addWidget(self.save_winner)
        exports.addWidget(self.compare_button)
        exports.addStretch(1)
        exports.addWidget(self.copy_button)
        exports.addWidget(self.export_csv)
        exports.addWidget(self.export_json)
        exports.addWidget(self.export_html)

        layout = QVBoxLayout(self)
        layout.addWidget(self.about)
        layout.addLayout(grid)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        results = QWidget()  # (scrolled on a small screen: the buttons below stay in view)
        shown = QVBoxLayout(results)
        shown.setContentsMargins(0, 0, 0, 0)
        shown.addWidget(self.answer)
        shown.addWidget(self.table)
        shown.addWidget(self.failures)
        shown.addWidget(self.chart_view, 1)  # (the table as tall as its rows: the plot has the rest)
        shown.addStretch(0)  # (before the first run, with the plot hidden: the table at the top)
        self.chart_view.hide()  # (an empty plot says nothing: shown with the first result)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(results)
        self.scroll.viewport().setAutoFillBackground(False)  # (the tab's own background, dark theme too)
        results.setAutoFillBackground(False)
        layout.addWidget(self.scroll, 1)
        layout.addLayout(exports)
        self.describe_target()

    def _limit(self, name: str, value: float, suffix: str, low: float, high: float, decimals: int) -> QDoubleSpinBox:
        spin = QDoubleSpinBox()
        spin.setRange(low, high)
        spin.setDecimals(decimals)
        spin.setValue(value)
        spin.setSuffix(suffix)
        spin.setAccessibleName(name)
        return spin

    def knobs(self) -> list[Knob] | None:
        """The knob sweep asked for (None: no sweep; EmberError naming a bad value)."""
        return self.knob_sweep.knobs()

    def _buddy(self, text: str, widget: QWidget) -> QLabel:
        label = QLabel(text)
        label.setBuddy(widget)
        return label

    # ----- the target
    def target_kind(self) -> tuple[str, str]:
        """(local, connection or url; the connection's name)"""
        kind, _, name = str(self.target.currentData()).partition(":")
        return kind, name

    def describe_target(self) -> None:
        """Say what the run will contact (the model loaded for chat may change while the lab is open:
        called when the tab is shown and at Run)."""
        kind, name = self.target_kind()
        self.url.setVisible(kind == URL)
        ready = True
        if kind == LOCAL:
            model = self.service.model if self.service is not None else None
            if self.service is None:
                text, ready = self.tr("The model loaded for chat is measured in the window only."), False
            elif model is None:
                text, ready = self.tr("Load a model for chat first, or pick a connection or a URL."), False
            elif model.is_remote:
                text = self.tr("{model} runs on {server}: pick its connection to load-test that server.").format(
                    model=model.name, server=model.source
                )
                ready = False
            else:
                text = self.tr(
                    "{model}, served by a temporary Ember API server of this window on 127.0.0.1 (a free port, "
                    "a key of its own) for the run: the load goes through HTTP like any client's, and chat "
                    "messages sent meanwhile wait their turn. To test the Local API server, type its URL."
                ).format(model=model.name)
        elif kind == CONNECTION:
            found = next((c for c in self.connections.list() if c.name == name), None)
            base = found.base_url if found is not None else "?"
            text = self.tr("Contacts {url} ({where}), with the connection's key.").format(
                url=base, where=self._where(base)
            )
        else:
            url = self.url.text().strip()
            if not url:
                text, ready = self.tr("Type the server's address (its /v1 is added when missing)."), False
            elif urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
                text, ready = self.tr("A server's URL starts with http:// or https://."), False
            else:
                base = url.rstrip("/") if url.rstrip("/").endswith("/v1") else f"{url.rstrip('/')}/v1"
                text = self.tr("Contacts {url} ({where}).").format(url=base, where=self._where(base))
        self.contacts.setText(text)
        self.run_button.setEnabled(not self.running and ready)
        if self.resolve is None or self.model_settings is None:
            why = self.tr("Knob sweeps run in Ember's window, on the model loaded for chat.")
        elif kind != LOCAL:
            why = self.tr(
                "Knob sweeps load the model here with each setting: for the model loaded for chat only (a server "
                "elsewhere is loaded with its own settings)."
            )
        else:
            why = "" if ready else text
        self.knob_sweep.allow(why)

    def _where(self, url: str) -> str:
        if (urlsplit(url).hostname or "") in LOOPBACK:
            return self.tr("this computer")
        return self.tr("another computer: the figures include the network between")

    @property
    def find_ports(self) -> dict[int, str]:
        """The ports Find servers asks (a port: what usually listens there)."""
        return self.finder.ports

    @find_ports.setter
    def find_ports(self, ports: dict[int, str]) -> None:
        self.finder.ports = ports

    def aim_at(self, url: str) -> None:
        """Aim the run at the server picked in the list of those found (its URL as the target)."""
        self.target.setCurrentIndex(self.target.findData(URL))
        self.url.setText(url)

    def _workload_picked(self, _index: int) -> None:
        if self.workload.currentData() != SHAREGPT_FILE:
            return
        path, _ = QFileDialog.getOpenFileName(
            self, self.tr("A ShareGPT workload"), "", self.tr("ShareGPT conversations (*.json)")
        )
        if path:
            self.set_workload_file(Path(path))
        elif self.workload_file is None:
            self.workload.setCurrentIndex(0)

    def set_workload_file(self, path: Path) -> None:
        """The workload is this ShareGPT file (read at Run, on the worker: such files can be large)."""
        self.workload_file = path
        i = self.workload.findData(SHAREGPT_FILE)
        self.workload.setItemText(i, self.tr("ShareGPT: {name}").format(name=path.name))
        self.workload.setItemData(i, str(path), Qt.ItemDataRole.ToolTipRole)
        self.workload.setCurrentIndex(i)

    # ----- running
    def plans(self) -> list[LoadPlan]:
        """The loads as typed (EmberError naming what is wrong)."""
        rate = self.loads_kind.currentData() == RATE
        try:
            values = [float(x) if rate else int(x) for x in self.loads.text().split(",") if x.strip()]
        except ValueError:
            raise EmberError(self.tr("The loads are numbers separated by commas, e.g. 1,2,4.")) from None
        if not values:
            raise EmberError(self.tr("Give at least one load, e.g. 1,2,4."))
        common = {"requests": self.requests.value(), "warmup": WARMUP}
        if rate:
            return [LoadPlan(rate=float(v), **common) for v in values]  # type: ignore[arg-type]
        return [LoadPlan(concurrency=int(v), **common) for v in values]  # type: ignore[arg-type]

    def slo(self) -> Slo:
        return Slo(self.ttft.value() * 1000, self.tpot.value(), self.e2e.value() * 1000)

    def start(self) -> None:
        self.describe_target()
        if not self.run_button.isEnabled():
            return
        try:
            plans = self.plans()
            knobs = self.knobs()
        except EmberError as exc:
            self.status.setText(str(exc))
            return
        kind, name = self.target_kind()
        url, slo, requests, repeats = self.url.text().strip(), self.slo(), self.requests.value(), self.repeats.value()
        settings = 1
        for knob in knobs or ():
            settings *= len(knob.values)
        runs = len(plans) * repeats * settings
        resolve = self.resolve
        model = self.service.model if self.service is not None else None
        alias = (self.service.model_alias or model.name) if self.service is not None and model is not None else ""
        shape = self.workload.currentData()
        workload_name = str(self.workload_file) if shape == SHAREGPT_FILE and self.workload_file else shape
        service, connections, folder = self.service, self.connections, self.data_dir / "benchmarks"
        self._cancel.clear()
        cancel = self._cancel
        self.running = True
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setRange(0, runs * requests)
        self.progress.setValue(0)
        self.status.setText(self.tr("Reaching the target, then a warm-up request (not counted)…"))

        def work(report: Callable[[Progress], None]) -> tuple[dict[str, Any], Path, tuple[LoadConfig, str] | None]:
            workload = workload_for(workload_name, count=max(64, requests + WARMUP))
            seen: dict[str, int] = {}  # (each run's label in the order they come: its place in the progress)

            def tell(label: str, done: int, total: int | None) -> None:
                report((seen.setdefault(label, len(seen)), runs, label, done, total))

            if knobs is not None:
                from ember_chat.engine.cli.bench_serve import local_target  # (the CLI's: an engine and server)

                assert resolve is not None
                base = resolve(alias)
                if not isinstance(base, LoadConfig):
                    raise EmberError(
                        f"{alias} is not a model file on this computer: nothing to load with each setting."
                    )
                started = time.time()
                result = knob_sweep(
                    lambda config, **server: local_target(config, alias, folder.parent, **server), base, knobs,
                    workload, plans, slo,
                    cancel, tell, repeats=repeats,
                )  # fmt: skip
                return result, write_run(result, started, folder, "serving"), (base, alias)
            if kind == LOCAL:
                assert service is not None
                target = serve_window_model(service, folder.parent)
            elif kind == CONNECTION:
                target = connection_target(connections, name)
            else:
                target = url_target(url)
            try:
                started = time.time()
                result = sweep(target, workload, plans, slo, cancel, tell, repeats=repeats)
            finally:
                target.close()
            if kind == LOCAL:  # (the temporary server's port means nothing later: say what it was)
                result["context"]["target"] = "the model loaded for chat"
            return result, write_run(result, started, folder, "serving"), None

        self.tasks.run_reporting(work, self._show_progress, self._done, self._failed, cancel=self.stop, own_thread=True)

    def cancel(self) -> None:
        self.stop()
        self.status.setText(self.tr("Cancelling: the requests in flight end, nothing more is sent…"))

    def stop(self) -> None:
        self._cancel.set()

    def shutdown(self) -> None:
        self.stop()
        self.tasks.shutdown()
        self.running = False

    def _show_progress(self, progress: Progress) -> None:
        index, loads, label, done, total = progress
        per_load = total or self.requests.value()
        self.progress.setValue(min(self.progress.maximum(), index * per_load + done))
        if not self._cancel.is_set():
            self.status.setText(
                self.tr("Load {n} of {loads}, {label}: {done} of {total} requests…").format(
                    n=index + 1, loads=loads, label=label, done=done, total=per_load
                )
            )

    def _finish(self) -> None:
        self.running = False
        self.cancel_button.setEnabled(False)
        self.describe_target()
        self.run_finished.emit()

    def _failed(self, message: str) -> None:
        self.status.setText(self.tr("The run stopped: {message}").format(message=message))
        self._finish()

    def _done(self, outcome: tuple[dict[str, Any], Path, tuple[LoadConfig, str] | None]) -> None:
        self.result, self.saved, self.measured = outcome
        cancelled = self._cancel.is_set()
        if cancelled:
            self.status.setText(
                self.tr("Cancelled: the loads run are shown ({n}). Kept in {path}.").format(
                    n=len(self.result["runs"]), path=self.saved
                )
            )
        else:
            self.status.setText(self.tr("Done. Kept in {path}.").format(path=self.saved))
            self.progress.setValue(self.progress.maximum())
        self.show_result(self.result)
        for b in (self.copy_button, self.export_csv, self.export_json, self.export_html):
            b.setEnabled(True)
        winner = self.result.get("winner")
        if not saved_knobs(self.result.get("winner_setting") or {})[0]:  # (speculative alone: nothing to save)
            winner = None
        if winner is not None and self.measured is not None:
            self.save_winner.setText(self.tr("Save as {model}'s load settings").format(model=self.measured[1]))
            self.save_winner.setAccessibleName(self.save_winner.text())
            self.save_winner.setEnabled(True)
        self.save_winner.setVisible(winner is not None and self.measured is not None)
        self._finish()

    # ----- the figures
    def show_result(self, result: dict[str, Any]) -> None:
        self.answer.setText(result["answer"])
        self.answer.show()
        notes = self.table.show_rows(result)
        for skipped in result.get("skipped", []):
            notes.append(
                self.tr("{setting} — not loaded: {why}").format(setting=skipped["label"], why=skipped["reason"])
            )
        self.failures.setText("\n".join(notes))
        self.failures.setVisible(bool(notes))
        self.table.fit_table()
        self.chart_view.plot(result)
        self.chart_view.show()

    def resizeEvent(self, event: QResizeEvent) -> None:  # Qt override: a narrower window may scroll the table
        super().resizeEvent(event)
        self.table.fit_table()

    def table_text(self) -> str:
        """The answer, then the table as tab-separated text (failures' reasons after it)."""
        assert self.result is not None
        return self.table.table_text(self.result, self.failures.text())

    def apply_winner(self) -> None:
        """Save a knob sweep's winner as the model's own load settings (apply_winner: a model with settings
        of its own keeps those not swept) and say what was saved."""
        if self.result is None or self.measured is None or self.model_settings is None:
            return
        setting = self.result.get("winner_setting")
        if setting is None:
            return
        base, name = self.measured
        saved, not_saved = saved_knobs(setting)
        try:
            apply_winner(self.model_settings, name, setting, base)
        except (OSError, EmberError) as exc:
            self.status.setText(self.tr("Could not save the load settings: {reason}").format(reason=exc))
            return
        self.save_winner.setEnabled(False)
        words = []
        if saved:
            words.append(
                self.tr("Saved {setting} as {model}'s load settings ({file}); they apply from its next load.").format(
                    setting=label_of(saved), model=name, file=self.model_settings.path
                )
            )
        if not_saved:
            words.append(
                self.tr(
                    "Not saved: {setting} (speculative decoding is a chat's setting, not the model's: set it in the "
                    "chat's parameters)."
                ).format(setting=label_of(not_saved))
            )
        self.status.setText(" ".join(words))

    def compare_runs(self) -> CompareRunsDialog:
        """Two runs kept in the data folder's benchmarks/ side by side (bench serve --compare)."""
        self.compare_dialog = CompareRunsDialog(self.data_dir / "benchmarks", self)
        self.compare_dialog.show()
        return self.compare_dialog

    def copy(self) -> None:
        if self.result is not None:
            QGuiApplication.clipboard().setText(self.table_text())

    # ----- export
    def export_dialog(self, kind: str) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Export the serving benchmark"), f"serving.{kind}")
        if path:
            self.export(Path(path), kind)

    def export(self, path: Path, kind: str) -> None:
        if self.result is None:
            return
        try:
            if kind == HTML:
                text = report_html(self.result)
            else:
                text = runs_csv(self.result) if kind == "csv" else json.dumps(self.result, indent=2)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            self.status.setText(self.tr("Could not export to {path}: {reason}.").format(path=path, reason=exc))
