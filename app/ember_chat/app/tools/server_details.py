"""One MCP server in Settings ▸ Tools: how it is started, its state and last error, on/off, its log
(the server's stderr) and its tools, each read-only tool with the user's "never ask" switch.

The panel only reads: the state comes from the WindowTools' view of the server (memory, no waiting), the
tools from the last listing; what the user changes is handed to WindowTools (which saves off the GUI
thread)."""

from __future__ import annotations

import html
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.style.theme import active_colors
from ember_chat.engine.tools.config import McpServerConfig

if TYPE_CHECKING:
    from ember_chat.engine.tools.registry import ToolEntry


def state_words(state: str) -> str:
    """A server's state as the user reads it."""
    words = {
        "stopped": QCoreApplication.translate("Tools", "not started (it starts when its tools are listed or called)"),
        "starting": QCoreApplication.translate("Tools", "starting…"),
        "running": QCoreApplication.translate("Tools", "running"),
        "failed": QCoreApplication.translate("Tools", "failed"),
        "off": QCoreApplication.translate("Tools", "off"),
    }
    return words.get(state, state)


class ServerDetails(QWidget):
    enabled_changed = Signal(str, bool)  # server name, on
    never_ask_changed = Signal(str, bool)  # registry key, never ask
    edit_requested = Signal(str)
    remove_requested = Signal(str)
    retry_requested = Signal()
    log_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.config: McpServerConfig | None = None
        self.title = QLabel()
        self.title.setStyleSheet("font-weight:600; font-size:13pt")
        self.how = QLabel()
        self.how.setWordWrap(True)
        self.how.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.how.setAccessibleName(self.tr("How the server is reached"))
        self.state = QLabel()
        self.state.setWordWrap(True)
        self.state.setTextFormat(Qt.TextFormat.RichText)
        self.state.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.state.setAccessibleName(self.tr("Server state"))
        self.enabled = QCheckBox(self.tr("On"))
        self.enabled.setAccessibleName(self.tr("Server on"))
        self.enabled.setToolTip(self.tr("Off: the server is stopped and its tools are not offered to any chat"))
        self.enabled.toggled.connect(self._on_enabled)
        self.log_button = QPushButton(self.tr("Show log"))
        self.log_button.setToolTip(self.tr("What the server wrote to its error output (stderr)"))
        self.log_button.clicked.connect(lambda: self.log_requested.emit(self._name()))
        self.retry_button = QPushButton(self.tr("Start again"))
        self.retry_button.setToolTip(self.tr("Start the server again and list its tools"))
        self.retry_button.clicked.connect(self.retry_requested)
        self.edit_button = QPushButton(self.tr("Edit…"))
        self.edit_button.setToolTip(self.tr("Change how the server is started or reached"))
        self.edit_button.clicked.connect(lambda: self.edit_requested.emit(self._name()))
        self.remove_button = QPushButton(self.tr("Remove…"))
        self.remove_button.setAccessibleName(self.tr("Remove server"))
        self.remove_button.setToolTip(self.tr("Stop the server and remove it (you are asked first)"))
        self.remove_button.clicked.connect(lambda: self.remove_requested.emit(self._name()))
        buttons = QHBoxLayout()
        buttons.addWidget(self.enabled)
        buttons.addStretch(1)
        for b in (self.log_button, self.retry_button, self.edit_button, self.remove_button):
            buttons.addWidget(b)
        self.tools = QTableWidget(0, 2)
        self.tools.setAccessibleName(self.tr("The server's tools"))
        self.tools.setAccessibleDescription(self.tr("Each tool, and whether Ember asks before each call"))
        self.tools.setHorizontalHeaderLabels([self.tr("Tool"), self.tr("Ask before each call")])
        self.tools.verticalHeader().hide()
        self.tools.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.tools.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        self.tools.setWordWrap(True)
        header = self.tools.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.never_ask: dict[str, QCheckBox] = {}  # registry key -> its switch (read-only tools only)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.title)
        outer.addWidget(self.how)
        outer.addWidget(self.state)
        outer.addLayout(buttons)
        outer.addWidget(self.tools, 1)

    def _name(self) -> str:
        return self.config.name if self.config else ""

    def _on_enabled(self, on: bool) -> None:
        if self.config is not None and on != self.config.enabled:
            self.enabled_changed.emit(self.config.name, on)

    def show_server(
        self,
        config: McpServerConfig,
        state: str,
        error: str | None,
        entries: list[ToolEntry] | None,
        never_ask: frozenset[str],
    ) -> None:
        """`entries`: its tools as last listed (None: not listed yet)."""
        changed = self.config != config
        self.config = config
        self.title.setText(config.name)
        if config.transport == "http":
            secrets = ", ".join(config.secret_headers)
            how = self.tr("URL: {url}").format(url=config.url)
            if secrets:
                how += "  ·  " + self.tr("secret header {names} in the system keychain").format(names=secrets)
        else:
            how = self.tr("Command: {command}").format(command=shlex.join([config.command, *config.args]))
            if config.cwd:
                how += "  ·  " + self.tr("in {folder}").format(folder=config.cwd)
        self.how.setText(how)
        self.enabled.blockSignals(True)
        self.enabled.setChecked(config.enabled)
        self.enabled.blockSignals(False)
        self.show_state(state, error)
        if changed or entries is not None or not self.never_ask:
            self._show_tools(entries, never_ask, state)

    def show_state(self, state: str, error: str | None) -> None:
        c = active_colors()
        colour = {"running": c.success, "failed": c.error, "starting": c.warning}.get(state, c.secondary)
        words = state_words(state)
        text = f"<span style='color:{colour}'>● {html.escape(words, quote=False)}</span>"
        if error:
            text += f"<br><span style='color:{c.error}'>{html.escape(error, quote=False)}</span>"
        self.state.setText(text)
        self.retry_button.setEnabled(state in ("failed", "stopped"))

    def _show_tools(self, entries: list[ToolEntry] | None, never_ask: frozenset[str], state: str) -> None:
        self.never_ask = {}
        self.tools.clearSpans()
        self.tools.setRowCount(0)
        if entries is None:
            if state == "off":
                self._note(self.tr("The server is off: turn it on to see its tools."))
            elif state == "failed":
                self._note(self.tr("Its tools show here once it starts (see the error above and its log)."))
            else:
                self._note(self.tr("Its tools show here once it has started."))
            return
        if not entries:
            self._note(self.tr("This server offers no tools."))
            return
        self.tools.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            item = QTableWidgetItem(f"{entry.original_name}\n{entry.spec.description.strip()[:200]}")
            item.setToolTip(entry.spec.description)
            self.tools.setItem(row, 0, item)
            if entry.spec.read_only:
                box = QCheckBox(self.tr("Never ask (read-only)"))
                box.setAccessibleName(self.tr("Never ask before {tool}").format(tool=entry.original_name))
                box.setToolTip(self.tr("This tool only reads. Checked: it runs without asking, in every chat."))
                box.setChecked(entry.key in never_ask)
                box.toggled.connect(lambda on, key=entry.key: self.never_ask_changed.emit(key, on))
                self.never_ask[entry.key] = box
                self.tools.setCellWidget(row, 1, _padded(box))
            else:
                asks = QTableWidgetItem(self.tr("Always asks (it may change things)"))
                asks.setForeground(self.palette().placeholderText())
                self.tools.setItem(row, 1, asks)
        self.tools.resizeRowsToContents()

    def _note(self, text: str) -> None:
        self.tools.setRowCount(1)
        item = QTableWidgetItem(text)
        item.setForeground(self.palette().placeholderText())
        self.tools.setItem(0, 0, item)
        self.tools.setSpan(0, 0, 1, 2)


def _padded(widget: QWidget) -> QWidget:
    holder = QWidget()
    row = QHBoxLayout(holder)
    row.setContentsMargins(6, 0, 6, 0)
    row.addWidget(widget)
    return holder


class ServerLogDialog(QDialog):
    """A server's stderr, followed while the dialog is open (re-read from memory twice a second)."""

    def __init__(self, name: str, read: Callable[[], str | None], parent: QWidget | None = None) -> None:
        """`read()`: the log's text now ("" when there is none), or None when the server is off."""
        super().__init__(parent)
        self.setWindowTitle(self.tr("Log of {name}").format(name=name))
        self.resize(640, 400)
        self._read = read
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setAccessibleName(self.tr("Server log"))
        self.text.setAccessibleDescription(self.tr("What the server wrote to its error output, newest at the end"))
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        copy = QPushButton(self.tr("Copy"))
        copy.setToolTip(self.tr("Copy the whole log"))
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.text.toPlainText()))
        close = QPushButton(self.tr("Close"))
        close.setToolTip(self.tr("Close the log"))
        close.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(copy)
        buttons.addWidget(close)
        outer = QVBoxLayout(self)
        outer.addWidget(self.text, 1)
        outer.addLayout(buttons)
        self._timer = QTimer(self)
        self._timer.setInterval(500)
        self._timer.timeout.connect(self.reload)
        self._timer.start()
        self.reload()

    def reload(self) -> None:
        text = self._read()
        if text is None:
            text = self.tr("The server is off: it has no log.")
        elif not text:
            text = self.tr("The server has written nothing to its log yet.")
        if text != self.text.toPlainText():
            bar = self.text.verticalScrollBar()
            at_end = bar.value() >= bar.maximum() - 2
            self.text.setPlainText(text)
            if at_end:
                bar.setValue(bar.maximum())

    def done(self, result: int) -> None:  # Qt override
        self._timer.stop()
        super().done(result)
