"""Settings ▸ Local API server…: the server's settings (on/off, address, port, key, allowed origins,
queue), its address with a Copy URL button and a curl command to try it, and the log of recent
requests: every HTTP request the server answered, with its status, each generation with its
metrics, and what the server loaded and unloaded for requests naming another installed model. Those
models are listed ("Models loaded for API requests": memory, idle for, Unload), with the budget they
share (memory, how many, how long an idle one stays). The control (start, stop, the log's source,
the pool) is ApiServerControl in api_control.py; the dialog knows it as a ServerControl, what it asks
of it."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import Qt, QTimer, Signal, SignalInstance, Slot
from PySide6.QtGui import QFont, QFontDatabase, QGuiApplication, QHideEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.context import AppContext
from ember_chat.app.engine_link.api_models import idle_text
from ember_chat.app.engine_link.tasks import TaskRunner
from ember_chat.app.engine_link.wording import window_wording
from ember_chat.app.qt.window_frame import TITLE_BAR_ALLOWANCE
from ember_chat.app.server.api_pool import PoolEvent
from ember_chat.app.server.unknown_fields import IGNORE_UNKNOWN_LABEL
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.pool.memory import mb
from ember_chat.engine.inference.pool.pool import ModelState
from ember_chat.engine.inference.service.engine import RequestRecord
from ember_chat.engine.serve.request_log import HttpExchange
from ember_chat.engine.serve.server import ApiServer
from ember_chat.engine.storage.secrets import API_SERVER_KEY, SecretStore
from ember_chat.engine.storage.settings import Settings


def curl_example(url: str, with_key: bool) -> str:
    """A command that asks the server for an answer (the key from an environment variable, so the
    command can be copied without the secret in it)."""
    body = json.dumps({"messages": [{"role": "user", "content": "Hello!"}]})
    lines = [f"curl {url}/chat/completions", "-H 'Content-Type: application/json'"]
    if with_key:
        lines.append('-H "Authorization: Bearer $EMBER_API_KEY"')
    lines.append(f"-d {shlex.quote(body)}")
    return " \\\n  ".join(lines)


LOG_ROWS = 6  # the request log's rows in view, at the least, when the screen has room


def _fmt(value: float | None, digits: int, unit: str) -> str:
    return "—" if value is None else f"{value:.{digits}f} {unit}"


class ServerControl(Protocol):
    """What the dialog asks of the server's control (ApiServerControl in api_control.py, which opens it)."""

    ctx: AppContext  # the settings it shows and saves
    secrets: SecretStore  # the server's key, in the keychain
    tasks: TaskRunner  # the keychain read and written off the GUI thread
    server: ApiServer | None  # the server running (its address), None while off
    records: list[RequestRecord | HttpExchange | PoolEvent]  # the log so far, oldest first

    @property
    def applied(self) -> SignalInstance: ...  # Signal(bool): an apply() has finished

    @property
    def pool_changed(self) -> SignalInstance: ...  # Signal(): the models loaded for requests changed

    def apply(self) -> None: ...  # start or stop the server as the settings say

    # the models loaded for requests (`shown` on the GUI thread) and unloading one (`refused`: why not)
    def read_pool(self, shown: Callable[[list[ModelState]], None]) -> None: ...

    def unload_api_model(self, name: str, refused: Callable[[str], None]) -> None: ...


class ApiServerDialog(QDialog):
    applied = Signal(bool)  # Apply has finished: the settings are saved, the server runs as they say
    key_checked = Signal()  # the placeholder says whether a key is stored (tests wait on this)
    api_models_loaded = Signal()  # the table of models loaded for requests shows the pool's now (tests)

    def __init__(self, control: ServerControl, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.control = control
        self.setWindowTitle(self.tr("Local API server"))
        s = control.ctx.settings
        outer = QVBoxLayout(self)
        # the settings, the address and the curl command above, the log below: with the server on they
        # left the log two rows tall (one at 800 px). The log keeps LOG_ROWS rows; what is above it
        # scrolls when the screen is too small for both.
        settings = QWidget()
        layout = QVBoxLayout(settings)
        layout.setContentsMargins(0, 0, 0, 0)
        self.settings_area = QScrollArea()
        self.settings_area.setWidget(settings)
        self.settings_area.setWidgetResizable(True)
        self.settings_area.setFrameShape(QFrame.Shape.NoFrame)
        self.settings_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        intro = QLabel(
            self.tr(
                "Other programs (editor plugins, scripts, the <code>openai</code> Python client) can use the model "
                "loaded in this window through an OpenAI-compatible API. It shares the model with your chats: "
                "requests are answered together with your chat, as many at once as the model's Parallel "
                "sequences (a load setting, 4 by default; with 1, one answer at a time, in turn); more wait in line. "
                "A request naming another installed model loads it in an engine of its own (listed below)."
            )
        )
        intro.setWordWrap(True)
        self.intro = intro
        layout.addWidget(intro)
        form = QFormLayout()
        self.enabled = QCheckBox(self.tr("Serve the loaded model"))
        self.enabled.setChecked(s.api_server)
        self.enabled.setAccessibleName(self.tr("Enable the local API server"))
        self.enabled.setToolTip(self.tr("Other programs on this computer can use the loaded model (OpenAI API)"))
        self.host = QLineEdit(s.api_host)
        self.host.setAccessibleName(self.tr("Address to listen on"))
        self.host.setToolTip(self.tr("127.0.0.1: this computer only. Another address needs an API key."))
        self.port = QSpinBox()
        self.port.setRange(1, 65_535)
        self.port.setValue(s.api_port)
        self.port.setAccessibleName(self.tr("Port"))
        self.port.setToolTip(self.tr("The TCP port clients connect to"))
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText(self.tr("checking the system keychain…"))
        self.key.setAccessibleName(self.tr("API key"))
        self.key.setToolTip(
            self.tr("Clients must send this key. Kept in the system keychain; leave empty to keep the stored key.")
        )
        self.remove_key = QCheckBox(self.tr("Remove the stored key"))
        self.remove_key.setAccessibleName(self.tr("Remove the stored API key"))
        self.remove_key.setToolTip(self.tr("On Apply, delete the key from the system keychain: clients need none"))
        secrets = control.secrets
        control.tasks.run(lambda: secrets.read(API_SERVER_KEY), self._show_stored, self._show_unreadable)
        self._awaiting_server = False
        control.applied.connect(self._server_applied)
        self.origins = QLineEdit(s.api_allowed_origins)
        self.origins.setPlaceholderText(self.tr("none (browsers cannot call the API)"))
        self.origins.setAccessibleName(self.tr("Allowed browser origins"))
        self.origins.setToolTip(
            self.tr("Comma-separated web origins (e.g. http://localhost:3000) whose pages may call the API")
        )
        self.ignore_unknown = QCheckBox(self.tr(IGNORE_UNKNOWN_LABEL))
        self.ignore_unknown.setChecked(s.api_allow_unknown_fields)
        self.ignore_unknown.setAccessibleName(self.ignore_unknown.text())
        self.ignore_unknown.setToolTip(
            self.tr(
                "For clients that send fields of other servers: ignore the fields Ember does not know. Off, such a "
                "request gets HTTP 400 naming them (the client would believe they applied)."
            )
        )
        self.queue = QSpinBox()
        self.queue.setRange(1, 1000)
        self.queue.setValue(s.api_queue_limit)
        self.queue.setAccessibleName(self.tr("Queue limit"))
        self.queue.setToolTip(
            self.tr(
                "How many requests may wait in line while the parallel sequences are busy; more are refused "
                "with HTTP 429"
            )
        )
        self.budget = QSpinBox()
        self.budget.setRange(0, 10_000_000)
        self.budget.setSingleStep(1000)
        self.budget.setSuffix(" MB")
        self.budget.setSpecialValueText(self.tr("3/4 of the free memory"))
        self.budget.setValue(s.api_memory_budget_mb)
        self.budget.setAccessibleName(self.tr("Memory for models loaded by requests"))
        self.budget.setToolTip(
            self.tr(
                "A request naming another installed model loads it. The models loaded so, together with the "
                "window's, take at most this memory; the least recently used idle one is unloaded to make room."
            )
        )
        self.models_max = QSpinBox()
        self.models_max.setRange(0, 1000)
        self.models_max.setSpecialValueText(self.tr("no limit"))
        self.models_max.setValue(s.api_models_max)
        self.models_max.setAccessibleName(self.tr("Most models loaded at once"))
        self.models_max.setToolTip(self.tr("How many models (the window's included) may be loaded at once"))
        self.model_ttl = QSpinBox()
        self.model_ttl.setRange(0, 31_536_000)
        self.model_ttl.setSingleStep(60)
        self.model_ttl.setSuffix(" s")
        self.model_ttl.setSpecialValueText(self.tr("unload when idle"))
        self.model_ttl.setValue(s.api_model_ttl_s)
        self.model_ttl.setAccessibleName(self.tr("Idle time before unloading"))
        self.model_ttl.setToolTip(
            self.tr(
                "A model loaded for requests is unloaded after this long without one (a request's ttl or "
                "keep_alive says otherwise for its model). The window's model is never unloaded by the API."
            )
        )
        form.addRow(self.enabled)
        form.addRow(self.tr("Address"), self.host)
        form.addRow(self.tr("Port"), self.port)
        form.addRow(self.tr("API key"), self.key)
        form.addRow("", self.remove_key)
        form.addRow(self.tr("Allowed origins (CORS)"), self.origins)
        form.addRow(self.tr("Waiting requests (then 429)"), self.queue)
        form.addRow("", self.ignore_unknown)
        form.addRow(self.tr("Memory for other models"), self.budget)
        form.addRow(self.tr("Models at once"), self.models_max)
        form.addRow(self.tr("Unload an idle model after"), self.model_ttl)
        layout.addLayout(form)
        self.url = QLabel()
        self.url.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.url.setWordWrap(True)
        self.url.setAccessibleName(self.tr("API server address"))
        self.copy_url = QPushButton(self.tr("Copy URL"))
        self.copy_url.setAccessibleName(self.tr("Copy URL"))
        self.copy_url.setToolTip(self.tr("Copy the server's address (the base URL for OpenAI clients)"))
        self.copy_url.clicked.connect(lambda: self._copy(self.control.server.url if self.control.server else ""))
        self.copy_curl = QPushButton(self.tr("Copy curl command"))
        self.copy_curl.setAccessibleName(self.tr("Copy curl command"))
        self.copy_curl.setToolTip(self.tr("Copy the command below, to try the server from a terminal"))
        self.copy_curl.clicked.connect(lambda: self._copy(self.curl.text()))
        url_row = QHBoxLayout()
        url_row.addWidget(self.url, 1)
        url_row.addWidget(self.copy_url)
        url_row.addWidget(self.copy_curl)
        self._url_row = url_row  # (above the log, not in the settings that scroll: it was cut off below them)
        self.curl = QLabel()
        self.curl.setTextFormat(Qt.TextFormat.PlainText)
        self.curl.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.curl.setFont(QFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)))
        self.curl.setAccessibleName(self.tr("Example curl command"))
        self.curl.setAccessibleDescription(self.tr("A command that asks the server for an answer"))
        layout.addWidget(self.curl)
        self.api_models_title = QLabel(self.tr("Models loaded for API requests"))
        self.api_models = QTableWidget(0, 4)
        self.api_models.setHorizontalHeaderLabels([self.tr("Model"), self.tr("Memory"), self.tr("Idle for"), ""])
        self.api_models.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.api_models.verticalHeader().hide()
        self.api_models.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.api_models.setAccessibleName(self.tr("Models loaded for API requests"))
        self.api_models.setAccessibleDescription(
            self.tr("The installed models the server loaded because a request named them: memory, idle time, Unload")
        )
        self.api_models.setMaximumHeight(self._rows_height(self.api_models, 4))
        self.api_models_note = QLabel()  # an unload the pool refused: why
        self.api_models_note.setWordWrap(True)
        self.api_models_note.setAccessibleName(self.tr("Unload result"))
        self._idle_clock = QTimer(self)  # "idle for" goes on while the dialog is open
        self._idle_clock.setInterval(10_000)
        self._idle_clock.timeout.connect(self._read_pool)
        control.pool_changed.connect(self._read_pool)
        layout.addStretch(1)
        log = QWidget()
        log_layout = QVBoxLayout(log)
        log_layout.setContentsMargins(0, 0, 0, 0)
        log_layout.addLayout(self._url_row)  # the address, always in view
        # above the log, not in the settings that scroll: shown while the API has a model loaded
        for widget in (self.api_models_title, self.api_models, self.api_models_note):
            log_layout.addWidget(widget)
            widget.hide()
        self.log_title = QLabel(self.tr("Recent requests"))
        log_layout.addWidget(self.log_title)
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(
            [
                self.tr("Time"),
                self.tr("Request"),
                self.tr("Result"),
                self.tr("TTFT"),
                self.tr("Decode"),
                self.tr("Tokens"),
            ]
        )
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setAccessibleName(self.tr("Recent API requests"))
        self.table.setAccessibleDescription(
            self.tr("Every request the API server answered, latest last: its status, and a generation's metrics")
        )
        self.table.setMinimumHeight(self._log_height(3))
        log_layout.addWidget(self.table, 1)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.settings_area)
        self.split.addWidget(log)
        self.split.setChildrenCollapsible(False)
        self.split.setStretchFactor(1, 1)
        # the handle paints only its grip: without its background it kept what was there before a resize
        # (a settings row's stale pixels between the settings and the address)
        self.split.handle(1).setAutoFillBackground(True)
        outer.addWidget(self.split, 1)
        layout = outer
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Apply | QDialogButtonBox.StandardButton.Close)
        apply_button = buttons.button(QDialogButtonBox.StandardButton.Apply)
        apply_button.setAccessibleName(self.tr("Apply"))
        apply_button.setToolTip(self.tr("Save these settings and start or stop the server"))
        apply_button.clicked.connect(self.apply)
        buttons.button(QDialogButtonBox.StandardButton.Close).setAccessibleName(self.tr("Close"))
        buttons.button(QDialogButtonBox.StandardButton.Close).setToolTip(self.tr("Close this window"))
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        for record in control.records:
            self.add_record(record)
        self._show_url()
        # tall enough for the log and the settings on a usual screen, with room for its title bar and
        # to be centred over the window on a small one
        room = self.screen().availableGeometry().height() - 2 * TITLE_BAR_ALLOWANCE if self.screen() else 760
        self.resize(720, max(self.minimumSizeHint().height(), min(700, room)))

    def _log_height(self, rows: int) -> int:
        """The log's height for its header and `rows` rows."""
        return self._rows_height(self.table, rows)

    @staticmethod
    def _rows_height(table: QTableWidget, rows: int) -> int:
        """A table's height for its header and `rows` rows."""
        frame = 2 * table.frameWidth()
        return table.horizontalHeader().sizeHint().height() + rows * table.verticalHeader().defaultSectionSize() + frame

    def _share_height(self) -> None:
        """The log LOG_ROWS rows (or more), the settings what they need of the rest (they scroll if it
        is not enough)."""
        total = sum(self.split.sizes())
        if total <= 0:
            return
        log = self.split.widget(1).layout()  # (the models loaded for requests when any, its title, the table)
        gap = max(0, log.spacing())
        log_least = self._log_height(LOG_ROWS) + self.log_title.sizeHint().height() + gap
        url = self.url.heightForWidth(self.url.width()) if self.url.width() > 0 else -1  # (it wraps)
        log_least += max(url, self._url_row.sizeHint().height()) + gap  # (the address and its buttons)
        for widget in (self.api_models_title, self.api_models, self.api_models_note):
            if not widget.isHidden():  # (the table's height is fixed to its rows: its size hint is a default)
                log_least += (widget.minimumHeight() or widget.sizeHint().height()) + gap
        settings = self.settings_area.widget()
        wanted = settings.heightForWidth(self.settings_area.viewport().width())
        wanted = wanted if wanted > 0 else settings.sizeHint().height()
        top = max(self.settings_area.minimumSizeHint().height(), min(wanted, total - log_least))
        self.split.setSizes([top, total - top])

    def showEvent(self, event: QShowEvent) -> None:  # Qt override
        super().showEvent(event)
        self._share_height()
        self._read_pool()
        self._idle_clock.start()

    def resizeEvent(self, event: QResizeEvent) -> None:  # Qt override
        super().resizeEvent(event)
        if self.isVisible():  # (a taller window: the settings get what they need of it, not the log all of it)
            QTimer.singleShot(0, self, self._share_height)

    def hideEvent(self, event: QHideEvent) -> None:  # Qt override
        self._idle_clock.stop()
        super().hideEvent(event)

    @Slot()
    def _read_pool(self) -> None:
        self.control.read_pool(self.show_api_models)

    def show_api_models(self, rows: list[ModelState]) -> None:
        """The models loaded for requests, each with its Unload button."""
        table = self.api_models
        table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for col, value in enumerate((row.name, mb(row.memory_bytes), idle_text(row))):
                table.setItem(i, col, QTableWidgetItem(value))
            unload = QPushButton(self.tr("Unload"))
            unload.setAccessibleName(self.tr("Unload {model}").format(model=row.name))
            unload.setToolTip(self.tr("Unload {model} now (a later request loads it again)").format(model=row.name))
            unload.setEnabled(row.state == "loaded")
            unload.clicked.connect(lambda _checked=False, name=row.name: self.unload_api_model(name))
            table.setCellWidget(i, 3, unload)
        shown = self.control.server is not None and bool(rows)
        if not shown or not any(r.busy for r in rows):
            self._clear_note()  # (a refusal because a model was answering: no longer so)
        self.api_models_title.setVisible(shown)
        table.setVisible(shown)
        table.setFixedHeight(self._rows_height(table, max(1, min(len(rows), 4))))
        self._share_height()
        self.api_models_loaded.emit()

    def unload_api_model(self, name: str) -> None:
        self._clear_note()
        self.control.unload_api_model(name, self._unload_refused)

    def _clear_note(self) -> None:
        self.api_models_note.clear()
        self.api_models_note.hide()

    def _unload_refused(self, why: str) -> None:
        self.api_models_note.setText(why)
        self.api_models_note.show()

    def _copy(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)

    def _show_url(self) -> None:
        server = self.control.server
        for w in (self.copy_url, self.copy_curl, self.curl):
            w.setVisible(server is not None)
        if self.isVisible():  # (the address and curl command come and go: the settings' share follows)
            QTimer.singleShot(0, self, self._share_height)
        if server is None:
            self.url.setText(self.tr("The server is off."))
            return
        self.curl.setText(curl_example(server.url, self.control.ctx.settings.api_key_set))
        self.url.setText(
            self.tr('Serving on <b>{url}</b> — e.g. <code>openai.OpenAI(base_url="{url}", api_key="…")</code>').format(
                url=server.url
            )
        )

    def _show_stored(self, key: str | None) -> None:
        self.key.setPlaceholderText(self.tr("stored in the system keychain") if key else self.tr("none"))
        self.key_checked.emit()

    def _show_unreadable(self, _error: str) -> None:
        self.key.setPlaceholderText(self.tr("unknown: the system keychain cannot be read"))
        self.key_checked.emit()

    def apply(self) -> None:
        """Save the key (off the GUI thread: the keychain), then the settings, then start or stop the
        server; `applied` says how it ended."""
        ctx = self.control.ctx
        key = self.key.text().strip()
        remove = self.remove_key.isChecked() and not key
        try:
            settings = ctx.settings.with_changes(
                api_server=self.enabled.isChecked(),
                api_host=self.host.text().strip() or "127.0.0.1",
                api_port=self.port.value(),
                api_allowed_origins=self.origins.text().strip(),
                api_queue_limit=self.queue.value(),
                api_allow_unknown_fields=self.ignore_unknown.isChecked(),
                api_memory_budget_mb=self.budget.value(),
                api_models_max=self.models_max.value(),
                api_model_ttl_s=self.model_ttl.value(),
            )
        except EmberError as exc:
            ctx.notifier.show_error(str(exc))
            self.applied.emit(False)
            return
        secrets = self.control.secrets

        def store_key() -> None:
            if key:
                secrets.set(API_SERVER_KEY, key, "The API key")
            elif remove:
                secrets.clear(API_SERVER_KEY)

        def failed(error: str) -> None:
            ctx.notifier.show_error(error)
            self.applied.emit(False)

        self.control.tasks.run(store_key, lambda _: self._key_stored(settings, key, remove), failed, key="api-key")

    def _key_stored(self, settings: Settings, key: str, removed: bool) -> None:
        if key or removed:  # not secret: whether there is a key to enforce (see the module)
            settings = settings.with_changes(api_key_set=bool(key))
        self.control.ctx.save_settings(settings)
        self.key.clear()
        self.remove_key.setChecked(False)
        if key or removed:
            self._show_stored(key or None)
        self._awaiting_server = True
        self.control.apply()

    @Slot(bool)
    def _server_applied(self, ok: bool) -> None:
        if not self._awaiting_server:  # the window's own apply (at start), not this dialog's
            return
        self._awaiting_server = False
        if not ok:  # could not start: keep the setting off so the next start does not fail again
            ctx = self.control.ctx
            ctx.save_settings(ctx.settings.with_changes(api_server=False))
            self.enabled.setChecked(False)
        self._show_url()
        self.applied.emit(ok)

    def add_record(self, r: RequestRecord | HttpExchange | PoolEvent, row: int | None = None, dropped: int = 0) -> None:
        """A row of the log: a request the server answered (its status), a generation (its result
        and metrics), or a model loaded or unloaded for requests. `row`: where it goes (the order the
        requests arrived; None: last); `dropped`: the oldest rows the log let go first."""
        row = self.table.rowCount() if row is None else row
        self.table.insertRow(row)
        if isinstance(r, PoolEvent):
            values = [time.strftime("%H:%M:%S", time.localtime(r.t)), self.tr("Models"), r.text, "—", "—", "—"]
        elif isinstance(r, HttpExchange):
            values = [time.strftime("%H:%M:%S", time.localtime(r.t)), r.label, r.status_text, "—", "—", "—"]
        else:
            m = r.metrics
            reason = window_wording().reason(r.reason) if r.reason else ""
            values = [
                time.strftime("%H:%M:%S", time.localtime(r.t_submitted)),
                r.label,
                reason if not r.error else f"{reason}: {r.error}",
                _fmt(m.ttft_s * 1000 if m and m.ttft_s is not None else None, 0, "ms"),
                _fmt(m.decode_tokens_per_s if m else None, 1, "tok/s"),
                str(m.output_tokens) if m else "—",
            ]
        for col, value in enumerate(values):
            item = QTableWidgetItem(value)
            item.setToolTip(value)  # (a narrow column elides it: "loaded …")
            self.table.setItem(row, col, item)
        for _ in range(dropped):
            self.table.removeRow(0)
        self.table.scrollToBottom()
        if self.isVisible() and not self.api_models.isHidden():
            self._read_pool()  # a request answered: its model is idle now (else "answering" until the next tick)
