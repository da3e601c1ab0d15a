"""Models ▸ Connections…: add, edit and remove named remote OpenAI-compatible servers (base URL, API
key kept in the OS keychain, default model, certificate checks, read timeout), and test one: the
server's models and its round-trip time.

The test, and everything that touches the keychain (is a key stored, save, rename, remove), runs on
the dialog's task runner, off the GUI thread. Closing the dialog (or the window) interrupts a test
still waiting for its server: its connection is shut down, nothing waits for its timeout."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.engine_link.tasks import Task, TaskRunner
from ember_chat.app.qt.plain_text import ask
from ember_chat.app.style.theme import active_colors
from ember_chat.engine.core.refs import Endpoint, crosses_network_in_clear
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.remote.wire import ConnectionCheck, ConnectionTest
from ember_chat.engine.storage.connections import Connection, ConnectionStore, remote_model_name


class ConnectionsDialog(QDialog):
    changed = Signal()  # the list of connections (or their known models) changed
    tested = Signal(bool)  # a connection test finished (GUI thread): success
    use_model = Signal(str)  # a remote model name to load
    key_checked = Signal()  # whether the selected connection has a stored key is known (tests)

    def __init__(self, store: ConnectionStore, parent: QWidget | None = None, own_server_id: str | None = None) -> None:
        """`own_server_id`: the window's engine; a test that reaches that engine's API server says so."""
        self._own_server_id = own_server_id
        super().__init__(parent)
        self.store = store
        self.setWindowTitle(self.tr("Connections"))
        self.resize(720, 420)
        self.tasks = TaskRunner(self)
        self._editing: str | None = None
        self._stored_key: bool | None = None  # the selected connection has a key in the keychain (None: unknown)

        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Connections"))
        self.list.setAccessibleDescription(self.tr("Your remote servers; select one to edit or test it"))
        self.list.currentTextChanged.connect(self._select)
        add = QPushButton(self.tr("Add"))
        add.setAccessibleName(self.tr("Add connection"))
        add.setToolTip(self.tr("Start a new connection"))
        add.clicked.connect(self.new_connection)
        self.remove_button = QPushButton(self.tr("Remove…"))
        self.remove_button.setAccessibleName(self.tr("Remove connection"))
        self.remove_button.setToolTip(self.tr("Remove the selected connection and its stored API key"))
        self.remove_button.clicked.connect(lambda: self.remove_current())
        left = QVBoxLayout()
        left.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.addWidget(add)
        row.addWidget(self.remove_button)
        left.addLayout(row)

        self.name = QLineEdit()
        self.name.setPlaceholderText(self.tr("e.g. lab vLLM"))
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://127.0.0.1:8000/v1")
        self.url.setToolTip(self.tr("The server's OpenAI-compatible API address, usually ending in /v1"))
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setToolTip(self.tr("Kept in the system keychain. Leave empty to keep the stored key."))
        self.model = QComboBox()
        self.model.setEditable(True)
        self.model.setToolTip(self.tr("The model to load from this server (Test connection lists them)"))
        self.verify = QCheckBox(self.tr("Verify the server's TLS certificate"))
        self.verify.setChecked(True)
        self.verify.toggled.connect(self._warn)
        self.timeout = QDoubleSpinBox()
        self.timeout.setRange(1, 3600)
        self.timeout.setValue(60)
        self.timeout.setSuffix(" s")
        self.timeout.setToolTip(self.tr("How long the server may stay silent mid-answer before Ember gives up."))
        self.verify.setToolTip(self.tr("Turn off only for a server with a self-signed certificate you trust"))
        for w, name in (
            (self.name, self.tr("Connection name")),
            (self.url, self.tr("Base URL")),
            (self.key, self.tr("API key")),
            (self.model, self.tr("Default model")),
            (self.verify, self.tr("Verify TLS certificate")),
            (self.timeout, self.tr("Read timeout")),
        ):
            w.setAccessibleName(name)
        form = QFormLayout()
        form.addRow(self.tr("Name"), self.name)
        form.addRow(self.tr("Base URL"), self.url)
        form.addRow(self.tr("API key"), self.key)
        form.addRow(self.tr("Default model"), self.model)
        form.addRow("", self.verify)
        form.addRow(self.tr("Read timeout"), self.timeout)
        self.tls_warning = QLabel(
            self.tr("⚠ Certificate checks are off: anyone on the network path could read your chats.")
        )
        self.clear_warning = QLabel()  # plain http:// to another machine
        self.clear_warning.setAccessibleName(self.tr("Unencrypted connection warning"))
        for label in (self.tls_warning, self.clear_warning):
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setStyleSheet(f"color:{active_colors().warning}")
            label.hide()
        self.url.textChanged.connect(self._warn)
        self.key.textChanged.connect(self._warn)
        self.result = QLabel()
        self.result.setWordWrap(True)
        self.result.setAccessibleName(self.tr("Connection test result"))
        self.test_button = QPushButton(self.tr("Test connection"))
        self.test_button.setAccessibleName(self.tr("Test connection"))
        self.test_button.setToolTip(self.tr("Ask the server for its models and measure the round trip"))
        self.test_button.clicked.connect(self.test_connection)
        self.save_button = QPushButton(self.tr("Save"))
        self.save_button.setAccessibleName(self.tr("Save connection"))
        self.save_button.setToolTip(self.tr("Save this connection (its key goes to the system keychain)"))
        self.save_button.clicked.connect(lambda: self.save())
        self.use_button = QPushButton(self.tr("Use this model"))
        self.use_button.setAccessibleName(self.tr("Use this model"))
        self.use_button.setToolTip(self.tr("Save the connection, load its default model and close this dialog"))
        self.use_button.clicked.connect(self._use)
        buttons = QHBoxLayout()
        for b in (self.test_button, self.save_button, self.use_button):
            buttons.addWidget(b)
        right = QVBoxLayout()
        right.addLayout(form)
        right.addWidget(self.tls_warning)
        right.addWidget(self.clear_warning)
        right.addLayout(buttons)
        right.addWidget(self.result, 1)

        columns = QHBoxLayout()
        columns.addLayout(left, 1)
        columns.addLayout(right, 2)
        # a way out the mouse can see (only Esc and the title bar closed it)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.close_button = close.button(QDialogButtonBox.StandardButton.Close)
        self.close_button.setAccessibleName(self.tr("Close"))
        self.close_button.setToolTip(self.tr("Close this window (a connection not saved is not kept)"))
        close.rejected.connect(self.reject)
        outer = QVBoxLayout(self)
        outer.addLayout(columns, 1)
        outer.addWidget(close)
        self.reload()
        if self.list.count() == 0:
            self.new_connection()

    # ----- list
    def reload(self, select: str | None = None) -> None:
        self.list.blockSignals(True)  # re-listing keeps the form (and a test result) as it is
        self.list.clear()
        for c in self.store.list():
            self.list.addItem(c.name)
        names = [self.list.item(i).text() for i in range(self.list.count())]
        if select in names:
            self.list.setCurrentRow(names.index(select))
        self.list.blockSignals(False)
        self.remove_button.setEnabled(bool(names))

    def new_connection(self) -> None:
        self._editing = None
        self._stored_key = None
        self.tasks.cancel("has-key")
        self.list.clearSelection()
        for w in (self.name, self.url, self.key):
            w.clear()
        self.model.clear()
        self.verify.setChecked(True)
        self.timeout.setValue(60)
        self.key.setPlaceholderText(self.tr("optional"))
        self.result.clear()
        self.name.setFocus()

    def _select(self, name: str) -> None:
        if not name:
            return
        c = self.store.get(name)
        self._editing = c.name
        self._stored_key = None
        self.name.setText(c.name)
        self.url.setText(c.base_url)
        self.key.clear()
        self.key.setPlaceholderText(self.tr("checking the system keychain…"))
        store = self.store
        self.tasks.run(lambda: store.has_key(c.name), self._show_stored_key, key="has-key")
        self.model.clear()
        self.model.addItems(list(dict.fromkeys([*([c.default_model] if c.default_model else []), *c.models])))
        self.model.setCurrentText(c.default_model)
        self.verify.setChecked(c.verify_tls)
        self._warn()
        self.timeout.setValue(c.read_timeout_s)
        self.result.clear()

    def _show_stored_key(self, stored: bool) -> None:
        self._stored_key = stored
        self.key.setPlaceholderText(self.tr("stored in the system keychain") if stored else self.tr("none"))
        self._warn()
        self.key_checked.emit()

    def _warn(self) -> None:
        """What this connection exposes: TLS checks off; plain http:// to another machine (worse with an
        API key, typed or stored)."""
        self.tls_warning.setVisible(not self.verify.isChecked())
        clear = crosses_network_in_clear(self.url.text())
        if clear:
            keyed = bool(self.key.text()) or bool(self._editing and self._stored_key)
            self.clear_warning.setText(
                self.tr(
                    "⚠ This is plain http:// to another machine: the API key and your chats cross the network "
                    "unencrypted. Use https:// if the server offers it."
                )
                if keyed
                else self.tr(
                    "⚠ This is plain http:// to another machine: your chats cross the network unencrypted. "
                    "Use https:// if the server offers it."
                )
            )
        self.clear_warning.setVisible(clear)

    # ----- edit
    def _connection(self, models: tuple[str, ...] | None = None) -> Connection:
        if models is None:
            try:
                models = self.store.get(self._editing).models if self._editing else ()
            except EmberError:
                models = ()
        return Connection(
            name=self.name.text(),
            base_url=self.url.text(),
            default_model=self.model.currentText().strip(),
            verify_tls=self.verify.isChecked(),
            read_timeout_s=self.timeout.value(),
            models=models,
        )

    def _show_error(self, message: str) -> None:
        self.result.setText(f"<span style='color:{active_colors().error}'>{html.escape(message)}</span>")

    def save(self, models: tuple[str, ...] | None = None, after: Callable[[bool], None] | None = None) -> bool:
        """Save the form (the key goes to the keychain, off the GUI thread); `after(saved)` runs once
        it is done. False when the form is not valid (nothing is saved)."""
        try:
            c = self._connection(models)
            if c.name != self._editing and c.name in [x.name for x in self.store.list()]:
                raise EmberError(self.tr("There is already a connection called {name}.").format(name=repr(c.name)))
        except EmberError as exc:
            self._show_error(str(exc))
            if after is not None:
                after(False)
            return False
        store, api_key, replaces = self.store, self.key.text() or None, self._editing

        def saved(_: None) -> None:
            self._editing = c.name
            self.key.clear()
            if api_key is not None:
                self._show_stored_key(bool(api_key))
            self.reload(select=c.name)
            self.changed.emit()
            if after is not None:
                after(True)

        def failed(message: str) -> None:
            self._show_error(message)
            if after is not None:
                after(False)

        self.tasks.run(lambda: store.save(c, api_key=api_key, replaces=replaces), saved, failed)
        return True

    def remove_current(self, confirmed: bool = False) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        name = item.text()
        if not confirmed:
            answer = ask(
                self,
                self.tr("Remove connection"),
                self.tr("Remove “{name}” and its stored API key?").format(name=name),
            )
            if answer != QMessageBox.StandardButton.Yes:
                return
        store = self.store

        def removed(_: None) -> None:
            self.reload()
            self.new_connection()
            self.changed.emit()

        self.tasks.run(lambda: store.remove(name), removed, self._show_error)  # the key leaves the keychain

    # ----- test
    def test_connection(self) -> Task | None:
        """Ask the server for its models (off the GUI thread, with the stored key read there too); the
        result shows in the dialog. A new test, or closing the dialog, interrupts one still out."""
        try:
            c = self._connection()
        except EmberError as exc:
            self._show_error(str(exc))
            return None
        typed, editing, store = self.key.text().strip() or None, self._editing, self.store
        test = ConnectionTest(self._own_server_id)

        def work() -> ConnectionCheck:
            key = typed if typed is not None or not editing else store.endpoint(editing).api_key
            return test.run(Endpoint(c.name, c.base_url, key, c.verify_tls, c.read_timeout_s))

        self.result.setText(self.tr("Testing…"))
        self.test_button.setEnabled(False)
        return self.tasks.run(work, self._on_tested, self._on_test_failed, key="test", cancel=test.cancel)

    def _on_test_failed(self, error: str) -> None:
        self.test_button.setEnabled(True)
        self.result.setText(f"<span style='color:{active_colors().error}'>✗ {html.escape(error)}</span>")
        self.tested.emit(False)

    def _on_tested(self, check: ConnectionCheck) -> None:
        self.test_button.setEnabled(True)
        ids = [m.id for m in check.models]
        current = self.model.currentText().strip()
        self.model.clear()
        self.model.addItems(ids)
        self.model.setCurrentText(current if current else (ids[0] if ids else ""))
        with_ctx = self.tr("{model} ({n_ctx} ctx)")
        shown = [with_ctx.format(model=m.id, n_ctx=f"{m.n_ctx:,}") if m.n_ctx else m.id for m in check.models[:20]]
        listed = "".join(f"<li>{html.escape(text)}</li>" for text in shown)
        connected = self.tr("✓ Connected")
        details = self.tr("round trip {ms} ms, {count} model(s):").format(
            ms=f"{check.round_trip_s * 1000:.0f}", count=len(ids)
        )
        self.result.setText(
            f"<span style='color:{active_colors().success}'>{connected}</span> — {details}<ul>{listed}</ul>"
        )
        if self._editing or self.name.text().strip():
            self.save(models=tuple(ids), after=lambda _saved: self.tested.emit(True))
        else:
            self.tested.emit(True)

    def _use(self) -> None:
        def saved(ok: bool) -> None:
            if not ok:
                return
            c = self.store.get(self._editing or "")
            if c.default_model:
                self.use_model.emit(remote_model_name(c.name, c.default_model))
                self.accept()
            else:
                self.result.setText(self.tr("Choose a default model first (Test connection lists them)."))

        self.save(after=saved)

    def done(self, result: int) -> None:  # Qt override: closing the dialog
        self.tasks.cancel("test")  # interrupted, not waited for (a save still out is kept)
        self.tasks.cancel("has-key")
        super().done(result)
