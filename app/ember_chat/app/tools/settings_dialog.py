"""Settings ▸ Tools: MCP servers (added by hand, stdio or HTTP, or pasted as `mcpServers` JSON; each with
its state, last error, log, tools and their "never ask" switches; on/off, edit, remove), the built-in
tools, and the cap on tool calls per answer.

The dialog never waits: starting and listing servers, the keychain and the file are the host's work off
the GUI thread (WindowTools); the dialog shows what the host knows now, re-read a few times a second
while it is open (server states live in memory), and whole again when the host says something changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import Qt, QTimer, Signal, SignalInstance
from PySide6.QtGui import QColor, QGuiApplication, QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.qt.plain_text import plain_message
from ember_chat.app.style.theme import active_colors
from ember_chat.app.tools.builtin_panel import BuiltinPanel
from ember_chat.app.tools.import_box import ImportBox
from ember_chat.app.tools.server_details import ServerDetails, ServerLogDialog, state_words
from ember_chat.app.tools.server_form import HttpServerForm, ServerForm, StdioServerForm
from ember_chat.engine.tools.config import BuiltinToolsConfig, McpServerConfig, ToolsConfig, mcp_servers_json
from ember_chat.engine.tools.registry import ToolEntry

MAX_CALLS_LIMIT = 100
STATE_MARKS = {"running": "●", "failed": "✕", "starting": "…", "stopped": "○", "off": "–"}


class ToolsHost(Protocol):
    """What the dialog needs from the window's tools (tools/actions.py WindowTools satisfies it)."""

    config: ToolsConfig

    @property
    def changed(self) -> SignalInstance: ...  # Signal(): the configuration or the tools listed changed

    def server_state(self, name: str) -> tuple[str, str | None]: ...
    def server_entries(self, name: str) -> list[ToolEntry] | None: ...
    def server_log(self, name: str) -> str | None: ...
    def save_server(
        self,
        config: McpServerConfig,
        secrets: dict[str, str],
        replaces: str | None,
        on_done: Callable[[], None],
        on_error: Callable[[str], None],
    ) -> None: ...
    def add_servers(
        self,
        servers: list[McpServerConfig],
        on_done: Callable[[], None],
        on_error: Callable[[str], None],
    ) -> None: ...
    def remove_server(self, name: str) -> None: ...
    def set_server_enabled(self, name: str, on: bool) -> None: ...
    def set_never_ask(self, key: str, on: bool) -> None: ...
    def set_builtin(self, builtin: BuiltinToolsConfig) -> None: ...
    def set_max_calls(self, n: int) -> None: ...
    def relist(self) -> None: ...


class ToolsDialog(QDialog):
    server_added = Signal(str)  # a server's configuration was accepted (tests)

    def __init__(self, host: ToolsHost, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.setWindowTitle(self.tr("Tools"))
        self.remove_question: QMessageBox | None = None
        self.log_dialog: ServerLogDialog | None = None
        self._after_save: str | None = None  # a server to select once it is in the list

        self.tabs = QTabWidget()
        self.tabs.addTab(self._servers_tab(), self.tr("MCP servers"))
        self.builtin = BuiltinPanel(host.config.builtin)
        self.builtin.changed.connect(host.set_builtin)
        self.tabs.addTab(self.builtin, self.tr("Built-in tools"))
        self.tabs.setTabToolTip(0, self.tr("Servers that give the model tools: programs on this computer or URLs"))
        self.tabs.setTabToolTip(1, self.tr("Ember's own tools: date and time, calculator, reading files"))

        self.max_calls = QSpinBox()
        self.max_calls.setRange(1, MAX_CALLS_LIMIT)
        self.max_calls.setValue(host.config.max_calls)
        self.max_calls.setAccessibleName(self.tr("Tool calls per answer, at most"))
        self.max_calls.setToolTip(
            self.tr("An answer that asks for more tool calls than this is ended with a message (no endless loops)")
        )
        self.max_calls.valueChanged.connect(host.set_max_calls)
        close = QPushButton(self.tr("Close"))
        close.setToolTip(self.tr("Close this dialog (changes are already saved)"))
        close.clicked.connect(self.close)
        self.close_button = close  # (hidden where the dialog is a page of the Settings window)
        bottom = QHBoxLayout()
        bottom.addWidget(QLabel(self.tr("Tool calls per answer, at most")))
        bottom.addWidget(self.max_calls)
        bottom.addStretch(1)
        bottom.addWidget(close)
        outer = QVBoxLayout(self)
        outer.addWidget(self.tabs, 1)
        outer.addLayout(bottom)

        host.changed.connect(self.reload)
        self._timer = QTimer(self)
        self._timer.setInterval(300)
        self._timer.timeout.connect(self._refresh_states)
        self._timer.start()
        self.reload()

    # ----- layout
    def _servers_tab(self) -> QWidget:
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("MCP servers"))
        self.list.setAccessibleDescription(self.tr("Your MCP servers and their state; select one to see its tools"))
        self.list.currentItemChanged.connect(lambda *_: self._show_selected())
        self.add_button = QPushButton(self.tr("Add server"))
        self.add_button.setAccessibleName(self.tr("Add server"))
        self.add_button.setToolTip(self.tr("Add an MCP server: a program, a URL, or pasted JSON"))
        menu = QMenu(self.add_button)
        menu.addAction(self.tr("A program on this computer (stdio)…"), self.add_stdio)
        menu.addAction(self.tr("A server at a URL (HTTP)…"), self.add_http)
        menu.addAction(self.tr("Paste JSON (Claude Desktop, Cursor…)…"), self.paste_json)
        self.add_button.setMenu(menu)
        left = QVBoxLayout()
        self.copy_button = QPushButton(self.tr("Copy as JSON"))
        self.copy_button.setAccessibleName(self.tr("Copy the servers as JSON"))
        self.copy_button.setToolTip(
            self.tr("The servers as “mcpServers” JSON, to paste into another app (secret headers are left out)")
        )
        self.copy_button.clicked.connect(self.copy_json)
        left.addWidget(self.list, 1)
        left.addWidget(self.add_button)
        left.addWidget(self.copy_button)

        taken = self._taken
        self.details = ServerDetails()
        self.details.enabled_changed.connect(self.host.set_server_enabled)
        self.details.never_ask_changed.connect(self.host.set_never_ask)
        self.details.edit_requested.connect(self.edit_server)
        self.details.remove_requested.connect(lambda name: self.remove_server(name))
        self.details.retry_requested.connect(self.host.relist)
        self.details.log_requested.connect(self.show_log)
        self.stdio_form = StdioServerForm(taken)
        self.http_form = HttpServerForm(taken)
        self.import_box = ImportBox(taken)
        for form in (self.stdio_form, self.http_form):
            form.submitted.connect(lambda config, secrets, f=form: self._save(f, config, secrets))
            form.cancelled.connect(self._show_selected)
        self.import_box.imported.connect(self._import)
        self.import_box.cancelled.connect(self._show_selected)
        self.empty = QLabel(
            self.tr(
                "No MCP servers yet.\n\nAn MCP server gives the model tools: files, a browser, your calendar… "
                "Add one with “Add server”: a program on this computer, a URL, or paste the “mcpServers” "
                "JSON from Claude Desktop or another app."
            )
        )
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.pages = QStackedWidget()
        for page in (self.empty, self.details, self.stdio_form, self.http_form, self.import_box):
            self.pages.addWidget(page)

        tab = QWidget()
        row = QHBoxLayout(tab)
        row.addLayout(left, 1)
        row.addWidget(self.pages, 3)
        return tab

    def copy_json(self) -> str:
        """Every server in the `mcpServers` shape, on the clipboard (no secret values)."""
        text = mcp_servers_json(self.host.config.servers)
        QGuiApplication.clipboard().setText(text)
        return text

    def _taken(self) -> set[str]:
        return {s.name for s in self.host.config.servers}

    # ----- what the host knows
    def reload(self) -> None:
        """The list, the selected server's details, the built-in switches and the cap, from the host."""
        config = self.host.config
        current = self.list.currentItem()
        wanted = self._after_save or (current.data(Qt.ItemDataRole.UserRole) if current else None)
        self.list.blockSignals(True)
        self.list.clear()
        for server in config.servers:
            item = QListWidgetItem(server.name)
            item.setData(Qt.ItemDataRole.UserRole, server.name)
            self.list.addItem(item)
            if server.name == wanted:
                self.list.setCurrentItem(item)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self.list.blockSignals(False)
        self.copy_button.setEnabled(bool(config.servers))
        self._after_save = None
        self._refresh_states()
        if self.builtin.config != config.builtin:
            self.builtin.set_config(config.builtin)
        if self.max_calls.value() != config.max_calls:
            self.max_calls.blockSignals(True)
            self.max_calls.setValue(config.max_calls)
            self.max_calls.blockSignals(False)
        if self.pages.currentWidget() in (self.empty, self.details):
            self._show_selected()

    def selected(self) -> McpServerConfig | None:
        item = self.list.currentItem()
        name = item.data(Qt.ItemDataRole.UserRole) if item else None
        return next((s for s in self.host.config.servers if s.name == name), None)

    def _show_selected(self) -> None:
        config = self.selected()
        if config is None:
            self.pages.setCurrentWidget(self.empty)
            return
        state, error = self.host.server_state(config.name)
        self.details.show_server(
            config, state, error, self.host.server_entries(config.name), self.host.config.never_ask
        )
        self.pages.setCurrentWidget(self.details)

    def _refresh_states(self) -> None:
        """Each server's state in the list, and the selected one's details (memory only: no waiting)."""
        for row in range(self.list.count()):
            item = self.list.item(row)
            name = item.data(Qt.ItemDataRole.UserRole)
            state, error = self.host.server_state(name)
            item.setText(f"{STATE_MARKS.get(state, '•')} {name}")
            item.setToolTip(state_words(state) + (f"\n{error}" if error else ""))
            if state == "failed":
                item.setForeground(_colour(active_colors().error))
            else:
                item.setData(Qt.ItemDataRole.ForegroundRole, None)
        config = self.selected()
        if config is not None and self.pages.currentWidget() is self.details:
            self.details.show_state(*self.host.server_state(config.name))
            entries = self.host.server_entries(config.name)
            if entries is not None and not self.details.never_ask and self.details.tools.rowCount() <= 1:
                self.details.show_server(
                    config, *self.host.server_state(config.name), entries, self.host.config.never_ask
                )

    # ----- adding, changing, removing
    def add_stdio(self) -> StdioServerForm:
        self.stdio_form.edit(None)
        self.pages.setCurrentWidget(self.stdio_form)
        return self.stdio_form

    def add_http(self) -> HttpServerForm:
        self.http_form.edit(None)
        self.pages.setCurrentWidget(self.http_form)
        return self.http_form

    def paste_json(self) -> ImportBox:
        self.import_box.reset()
        self.pages.setCurrentWidget(self.import_box)
        return self.import_box

    def edit_server(self, name: str) -> ServerForm | None:
        config = next((s for s in self.host.config.servers if s.name == name), None)
        if config is None:
            return None
        form: ServerForm = self.http_form if config.transport == "http" else self.stdio_form
        form.edit(config)
        self.pages.setCurrentWidget(form)
        return form

    def _save(self, form: ServerForm, config: McpServerConfig, secrets: dict[str, str]) -> None:
        """Hand the server to the host; the form stays (its button off) until the host has it (its secrets
        in the keychain), or shows why it could not (what was typed is kept)."""
        replaces = form.editing.name if form.editing else None
        form.save_button.setEnabled(False)

        def saved() -> None:
            form.save_button.setEnabled(True)
            self._after_save = config.name
            self.pages.setCurrentWidget(self.details)
            self.reload()
            self.server_added.emit(config.name)

        def failed(message: str) -> None:
            form.save_button.setEnabled(True)
            self.pages.setCurrentWidget(form)
            form.show_error(message)

        self.host.save_server(config, secrets, replaces, saved, failed)

    def _import(self, servers: list[McpServerConfig]) -> None:
        box = self.import_box
        box.add_button.setEnabled(False)

        def saved() -> None:
            self._after_save = servers[0].name if servers else None
            self.pages.setCurrentWidget(self.details)
            self.reload()
            for config in servers:
                self.server_added.emit(config.name)

        def failed(message: str) -> None:
            self.pages.setCurrentWidget(box)
            box.say_error(message)

        self.host.add_servers(servers, saved, failed)

    def remove_server(self, name: str, confirmed: bool = False) -> QMessageBox | None:
        """Asks first (a box that does not block the window); removing takes its secrets out of the keychain."""
        if confirmed:
            self.host.remove_server(name)
            return None
        box = plain_message(QMessageBox(self))
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle(self.tr("Remove server"))
        box.setText(self.tr("Remove the MCP server “{name}”?").format(name=name))
        box.setInformativeText(
            self.tr("It is stopped, and chats can no longer use its tools. Its secret headers leave the keychain.")
        )
        self.remove_yes = box.addButton(self.tr("Remove"), QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.buttonClicked.connect(lambda button: self._remove_answered(name, button))
        self.remove_question = box
        box.open()
        return box

    def _remove_answered(self, name: str, button: object) -> None:
        self.remove_question = None
        if button is self.remove_yes:
            self.host.remove_server(name)

    def show_log(self, name: str) -> ServerLogDialog:
        if self.log_dialog is not None:
            self.log_dialog.close()
        self.log_dialog = ServerLogDialog(name, lambda: self.host.server_log(name), self)
        self.log_dialog.show()
        return self.log_dialog

    def done(self, result: int) -> None:  # Qt override
        self._timer.stop()
        if self.log_dialog is not None:
            self.log_dialog.close()
        super().done(result)

    def showEvent(self, event: QShowEvent) -> None:  # Qt override: the states are followed while it shows
        self._timer.start()
        self.reload()
        super().showEvent(event)


def _colour(name: str) -> QColor:
    return QColor(name)
