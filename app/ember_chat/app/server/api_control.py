"""Settings ▸ Local API server: turns Ember's OpenAI-compatible server on and off, shows what it is
doing in the status bar ("API: 1 running, 2 queued") and keeps a log of recent requests with their
metrics. The server itself is `engine.serve.server.ApiServer`, a client of the same engine service
as the chat."""

from __future__ import annotations

import time
from typing import Protocol

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QSpinBox,
    QStatusBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.qt.bridge import EngineBridge
from ember_chat.engine.errors import EmberError, SecretStoreError
from ember_chat.engine.inference.service import QueueState, RequestRecord
from ember_chat.engine.serve.server import ApiServer, ServerConfig
from ember_chat.engine.storage.secrets import API_SERVER_KEY, SecretStore
from ember_chat.engine.storage.settings import Settings, SettingsFile


class ApiHost(Protocol):
    """What the API server control needs from the window (the window satisfies it)."""

    bridge: EngineBridge
    settings: Settings
    settings_file: SettingsFile

    def statusBar(self) -> QStatusBar: ...
    def show_error(self, message: str) -> None: ...


class ApiServerControl(QObject):
    def __init__(self, window: ApiHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.server: ApiServer | None = None
        self.secrets = SecretStore()
        self.records: list[RequestRecord] = []
        self.status = QLabel()
        self.status.setAccessibleName(self.tr("API server status"))
        self.status.hide()
        window.statusBar().addPermanentWidget(self.status)
        window.bridge.queue_changed.connect(self._on_queue)
        window.bridge.request_done.connect(self._on_done)
        self.dialog: ApiServerDialog | None = None

    @property
    def running(self) -> bool:
        return self.server is not None

    def apply(self) -> bool:
        """Start or stop the server as the settings say; False (and a banner) when it cannot start."""
        self.stop()
        s = self.window.settings
        if not s.api_server:
            return True
        try:  # a keychain that cannot be read must not start the server without its key
            api_key = self.secrets.read(API_SERVER_KEY, "The API server's key")
        except SecretStoreError as exc:
            self.window.show_error(
                self.tr(
                    "Local API server: {error} The server was not started, because it must not run without its "
                    "key. Unlock the system keychain, then apply the settings again."
                ).format(error=exc)
            )
            return False
        config = ServerConfig(
            host=s.api_host,
            port=s.api_port,
            api_key=api_key,
            allowed_origins=tuple(o.strip() for o in s.api_allowed_origins.split(",") if o.strip()),
        )
        self.window.bridge.service.queue_limit = s.api_queue_limit
        server = ApiServer(self.window.bridge.service, config)
        try:
            server.start()
        except EmberError as exc:
            self.window.show_error(self.tr("Local API server: {error}").format(error=exc))
            return False
        self.server = server
        self._show(self.window.bridge.service.queue_state())
        return True

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()
        self.status.hide()

    def _show(self, state: QueueState) -> None:
        if self.server is None:
            self.status.hide()
            return
        running, queued = state.count("api")
        self.status.setText(
            self.tr("API {url}: {running} running, {queued} queued").format(
                url=self.server.url, running=running, queued=queued
            )
        )
        self.status.show()

    @Slot(object)
    def _on_queue(self, state: QueueState) -> None:
        self._show(state)

    @Slot(object)
    def _on_done(self, record: RequestRecord) -> None:
        if record.client != "api":
            return
        self.records.append(record)
        del self.records[:-100]
        if self.dialog is not None:
            self.dialog.add_record(record)

    def open_dialog(self) -> ApiServerDialog:
        if self.dialog is None:
            parent = self.parent()
            self.dialog = ApiServerDialog(self, parent if isinstance(parent, QWidget) else None)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog


def _fmt(value: float | None, digits: int, unit: str) -> str:
    return "—" if value is None else f"{value:.{digits}f} {unit}"


class ApiServerDialog(QDialog):
    def __init__(self, control: ApiServerControl, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.control = control
        self.setWindowTitle(self.tr("Local API server"))
        self.resize(720, 520)
        s = control.window.settings
        layout = QVBoxLayout(self)
        intro = QLabel(
            self.tr(
                "Other programs (editor plugins, scripts, the <code>openai</code> Python client) can use the model "
                "loaded in this window through an OpenAI-compatible API. It shares the model with your chats: "
                "one answer at a time, in turn."
            )
        )
        intro.setWordWrap(True)
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
        try:
            stored = control.secrets.read(API_SERVER_KEY) is not None
            self.key.setPlaceholderText(self.tr("stored in the system keychain") if stored else self.tr("none"))
        except SecretStoreError:
            self.key.setPlaceholderText(self.tr("unknown: the system keychain cannot be read"))
        self.key.setAccessibleName(self.tr("API key"))
        self.key.setToolTip(
            self.tr("Clients must send this key. Kept in the system keychain; leave empty to keep the stored key.")
        )
        self.origins = QLineEdit(s.api_allowed_origins)
        self.origins.setPlaceholderText(self.tr("none (browsers cannot call the API)"))
        self.origins.setAccessibleName(self.tr("Allowed browser origins"))
        self.origins.setToolTip(
            self.tr("Comma-separated web origins (e.g. http://localhost:3000) whose pages may call the API")
        )
        self.queue = QSpinBox()
        self.queue.setRange(1, 1000)
        self.queue.setValue(s.api_queue_limit)
        self.queue.setAccessibleName(self.tr("Queue limit"))
        self.queue.setToolTip(self.tr("How many requests may wait for their turn; more are refused with HTTP 429"))
        form.addRow(self.enabled)
        form.addRow(self.tr("Address"), self.host)
        form.addRow(self.tr("Port"), self.port)
        form.addRow(self.tr("API key"), self.key)
        form.addRow(self.tr("Allowed origins (CORS)"), self.origins)
        form.addRow(self.tr("Waiting requests (then 429)"), self.queue)
        layout.addLayout(form)
        self.url = QLabel()
        self.url.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.url.setWordWrap(True)
        self.url.setAccessibleName(self.tr("API server address"))
        layout.addWidget(self.url)
        layout.addWidget(QLabel(self.tr("Recent requests")))
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
        self.table.setAccessibleDescription(self.tr("The latest requests to the API server, with their metrics"))
        layout.addWidget(self.table, 1)
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

    def _show_url(self) -> None:
        server = self.control.server
        if server is None:
            self.url.setText(self.tr("The server is off."))
            return
        self.url.setText(
            self.tr('Serving on <b>{url}</b> — e.g. <code>openai.OpenAI(base_url="{url}", api_key="…")</code>').format(
                url=server.url
            )
        )

    def apply(self) -> bool:
        window = self.control.window
        key = self.key.text().strip()
        try:
            if key:
                self.control.secrets.set(API_SERVER_KEY, key, "The API key")
            settings = window.settings.with_changes(
                api_server=self.enabled.isChecked(),
                api_host=self.host.text().strip() or "127.0.0.1",
                api_port=self.port.value(),
                api_allowed_origins=self.origins.text().strip(),
                api_queue_limit=self.queue.value(),
            )
        except EmberError as exc:
            window.show_error(str(exc))
            return False
        window.settings = settings
        window.settings_file.save(settings)
        self.key.clear()
        ok = self.control.apply()
        if not ok:  # could not start: keep the setting off so the next start does not fail again
            window.settings = window.settings.with_changes(api_server=False)
            window.settings_file.save(window.settings)
            self.enabled.setChecked(False)
        self._show_url()
        return ok

    def add_record(self, r: RequestRecord) -> None:
        m = r.metrics
        row = self.table.rowCount()
        self.table.insertRow(row)
        values = [
            time.strftime("%H:%M:%S", time.localtime(r.t_submitted)),
            r.label,
            r.reason or "" if not r.error else f"{r.reason}: {r.error}",
            _fmt(m.ttft_s * 1000 if m and m.ttft_s is not None else None, 0, "ms"),
            _fmt(m.decode_tokens_per_s if m else None, 1, "tok/s"),
            str(m.output_tokens) if m else "—",
        ]
        for col, value in enumerate(values):
            self.table.setItem(row, col, QTableWidgetItem(value))
        self.table.scrollToBottom()
