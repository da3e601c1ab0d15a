"""Settings ▸ Local API server: turns Ember's OpenAI-compatible server on and off, shows what it is
doing in the status bar ("API: 1 running, 2 queued") and keeps a log of recent requests with their
metrics. The server itself is `engine.serve.server.ApiServer`, a client of the same engine service
as the chat.

The server's key lives in the OS keychain, read and written off the GUI thread (a keychain can take
seconds, or wait for the user to unlock it). Whether the user set a key is also kept, not secret, in
the settings (`api_key_set`): a keychain that cannot be read stops the server only when there is a
key it would have to enforce; with none set, the server starts as it would anyway (loopback only)."""

from __future__ import annotations

import time
from typing import Protocol

from PySide6.QtCore import QObject, Qt, Signal, Slot
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
from ember_chat.app.qt.tasks import TaskRunner
from ember_chat.app.qt.wording import window_wording
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


def read_server_key(secrets: SecretStore, key_set: bool) -> tuple[str | None, bool]:
    """(the API server's key, whether the keychain could be read), off the GUI thread. A keychain that
    cannot be read raises only when the settings say a key was set: without one the server has no
    key to enforce anyway."""
    try:
        return secrets.read(API_SERVER_KEY, "The API server's key"), True
    except SecretStoreError:
        if key_set:
            raise
        return None, False


class ApiServerControl(QObject):
    applied = Signal(bool)  # an apply() has finished: the server runs as the settings say (GUI thread)

    def __init__(self, window: ApiHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.server: ApiServer | None = None
        self.secrets = SecretStore()
        self.tasks = TaskRunner(self, workers=1)
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

    def apply(self) -> None:
        """Start or stop the server as the settings say. The key is read off the GUI thread; `applied`
        says how it ended (False, and a banner, when the server could not start). A later apply made
        meanwhile wins."""
        self.stop()
        if not self.window.settings.api_server:
            self.tasks.cancel("apply")
            self.applied.emit(True)
            return
        secrets, key_set = self.secrets, self.window.settings.api_key_set
        self.tasks.run(lambda: read_server_key(secrets, key_set), self._start, self._keychain_failed, key="apply")

    def _keychain_failed(self, error: str) -> None:
        # a keychain that cannot be read must not start the server without the key the user set
        self.window.show_error(
            self.tr(
                "Local API server: {error} The server was not started, because it must not run without its "
                "key. Unlock the system keychain, then apply the settings again."
            ).format(error=error)
        )
        self.applied.emit(False)

    def _start(self, found: tuple[str | None, bool]) -> None:
        api_key, readable = found
        self.stop()
        s = self.window.settings
        if readable and s.api_key_set != (api_key is not None):
            # the keychain says what the flag should (a key set before the flag existed, or removed
            # by hand): the flag follows, so an unreadable keychain later is judged right
            s = self.window.settings = s.with_changes(api_key_set=api_key is not None)
            self.window.settings_file.save(s)
        if not s.api_server:  # turned off meanwhile
            self.applied.emit(True)
            return
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
            self.applied.emit(False)
            return
        self.server = server
        self._show(self.window.bridge.service.queue_state())
        self.applied.emit(True)

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()
        self.status.hide()

    def shutdown(self) -> None:
        """The window closes: the server stops, a keychain read still out is dropped."""
        self.tasks.shutdown()
        self.stop()

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
    applied = Signal(bool)  # Apply has finished: the settings are saved, the server runs as they say
    key_checked = Signal()  # the placeholder says whether a key is stored (tests wait on this)

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
        self.queue = QSpinBox()
        self.queue.setRange(1, 1000)
        self.queue.setValue(s.api_queue_limit)
        self.queue.setAccessibleName(self.tr("Queue limit"))
        self.queue.setToolTip(self.tr("How many requests may wait for their turn; more are refused with HTTP 429"))
        form.addRow(self.enabled)
        form.addRow(self.tr("Address"), self.host)
        form.addRow(self.tr("Port"), self.port)
        form.addRow(self.tr("API key"), self.key)
        form.addRow("", self.remove_key)
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

    def _show_stored(self, key: str | None) -> None:
        self.key.setPlaceholderText(self.tr("stored in the system keychain") if key else self.tr("none"))
        self.key_checked.emit()

    def _show_unreadable(self, _error: str) -> None:
        self.key.setPlaceholderText(self.tr("unknown: the system keychain cannot be read"))
        self.key_checked.emit()

    def apply(self) -> None:
        """Save the key (off the GUI thread: the keychain), then the settings, then start or stop the
        server; `applied` says how it ended."""
        window = self.control.window
        key = self.key.text().strip()
        remove = self.remove_key.isChecked() and not key
        try:
            settings = window.settings.with_changes(
                api_server=self.enabled.isChecked(),
                api_host=self.host.text().strip() or "127.0.0.1",
                api_port=self.port.value(),
                api_allowed_origins=self.origins.text().strip(),
                api_queue_limit=self.queue.value(),
            )
        except EmberError as exc:
            window.show_error(str(exc))
            self.applied.emit(False)
            return
        secrets = self.control.secrets

        def store_key() -> None:
            if key:
                secrets.set(API_SERVER_KEY, key, "The API key")
            elif remove:
                secrets.clear(API_SERVER_KEY)

        def failed(error: str) -> None:
            window.show_error(error)
            self.applied.emit(False)

        self.control.tasks.run(store_key, lambda _: self._key_stored(settings, key, remove), failed, key="api-key")

    def _key_stored(self, settings: Settings, key: str, removed: bool) -> None:
        window = self.control.window
        if key or removed:  # not secret: whether there is a key to enforce (see the module)
            settings = settings.with_changes(api_key_set=bool(key))
        window.settings = settings
        window.settings_file.save(settings)
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
            window = self.control.window
            window.settings = window.settings.with_changes(api_server=False)
            window.settings_file.save(window.settings)
            self.enabled.setChecked(False)
        self._show_url()
        self.applied.emit(ok)

    def add_record(self, r: RequestRecord) -> None:
        m = r.metrics
        reason = window_wording().reason(r.reason) if r.reason else ""
        row = self.table.rowCount()
        self.table.insertRow(row)
        values = [
            time.strftime("%H:%M:%S", time.localtime(r.t_submitted)),
            r.label,
            reason if not r.error else f"{reason}: {r.error}",
            _fmt(m.ttft_s * 1000 if m and m.ttft_s is not None else None, 0, "ms"),
            _fmt(m.decode_tokens_per_s if m else None, 1, "tok/s"),
            str(m.output_tokens) if m else "—",
        ]
        for col, value in enumerate(values):
            self.table.setItem(row, col, QTableWidgetItem(value))
        self.table.scrollToBottom()
