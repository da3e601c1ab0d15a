"""The two ways to add (or edit) an MCP server by hand in Settings ▸ Tools: a local program spoken to over
stdio (command, arguments, environment, working folder) and a server at a URL (streamable HTTP, with
headers; a secret header's value goes to the system keychain, never into tools.json).

A form checks what it can on the spot and says what is wrong in one sentence under its fields; what it
gives back is a McpServerConfig and the secret header values to store (the caller stores them off the
GUI thread)."""

from __future__ import annotations

import html
import shlex
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ember_chat.app.style.theme import active_colors
from ember_chat.engine.errors import EmberError
from ember_chat.engine.tools.config import McpServerConfig


def _tr(text: str) -> str:
    return QCoreApplication.translate("ServerForm", text)


class FormError(ValueError):
    """What is wrong with the form, as a sentence for the user."""


def parse_env_lines(text: str) -> dict[str, str]:
    """`KEY=value` per line (blank lines and `#` comments skipped)."""
    env: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise FormError(_tr("Environment line {n} is not NAME=value: {line}.").format(n=n, line=repr(line[:60])))
        env[key.strip()] = value.strip()
    return env


def parse_header_lines(text: str) -> dict[str, str]:
    """`Name: value` per line, as headers are written."""
    headers: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        name, sep, value = line.partition(":")
        name = name.strip()
        if not sep or not name or any(c.isspace() for c in name):
            raise FormError(_tr("Header line {n} is not 'Name: value': {line}.").format(n=n, line=repr(line[:60])))
        headers[name] = value.strip()
    return headers


def env_lines(env: dict[str, str]) -> str:
    return "\n".join(f"{k}={v}" for k, v in env.items())


def header_lines(headers: dict[str, str]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in headers.items())


class ServerForm(QWidget):
    """What the stdio and HTTP forms share: the name, the timeouts, the error line and the buttons."""

    submitted = Signal(object, object)  # McpServerConfig, {secret header: value} to keep in the keychain
    cancelled = Signal()

    def __init__(self, taken: Callable[[], set[str]], parent: QWidget | None = None) -> None:
        """`taken`: the names of the servers already configured (a new one must differ)."""
        super().__init__(parent)
        self._taken = taken
        self.editing: McpServerConfig | None = None
        self.title = QLabel()
        self.title.setStyleSheet("font-weight:600")
        self.name = QLineEdit()
        self.name.setAccessibleName(self.tr("Server name"))
        self.name.setPlaceholderText(self.tr("e.g. filesystem"))
        self.name.setToolTip(self.tr("Shown on each tool call's card; letters, digits, spaces, '-' and '_'"))
        self.start_timeout = self._seconds(20, self.tr("How long the server may take to start and list its tools"))
        self.call_timeout = self._seconds(60, self.tr("How long one tool call may run before it is stopped"))
        self.form = QFormLayout()
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.form.addRow(self.tr("Name"), self.name)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setTextFormat(Qt.TextFormat.RichText)
        self.error.setAccessibleName(self.tr("What is wrong with the form"))
        self.error.hide()
        self.save_button = QPushButton()
        self.save_button.setDefault(True)
        self.save_button.setToolTip(self.tr("Save the server; it starts and lists its tools at once"))
        self.save_button.clicked.connect(self.submit)
        cancel = QPushButton(self.tr("Cancel"))
        cancel.setToolTip(self.tr("Leave the form; nothing is saved"))
        cancel.clicked.connect(self.cancelled)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(cancel)
        buttons.addWidget(self.save_button)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.title)
        outer.addLayout(self.form)
        outer.addWidget(self.error)
        outer.addStretch(1)
        outer.addLayout(buttons)

    def _seconds(self, value: float, tip: str) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setRange(1, 3600)
        box.setDecimals(0)
        box.setValue(value)
        box.setSuffix(self.tr(" s"))
        box.setToolTip(tip)
        return box

    def add_timeouts(self) -> None:
        row = QHBoxLayout()
        row.addWidget(QLabel(self.tr("start")))
        row.addWidget(self.start_timeout)
        row.addSpacing(12)
        row.addWidget(QLabel(self.tr("each call")))
        row.addWidget(self.call_timeout)
        row.addStretch(1)
        self.start_timeout.setAccessibleName(self.tr("Start timeout"))
        self.call_timeout.setAccessibleName(self.tr("Call timeout"))
        self.form.addRow(self.tr("Time limits"), row)

    def show_error(self, message: str) -> None:
        self.error.setText(f"<span style='color:{active_colors().error}'>{html.escape(message, quote=False)}</span>")
        self.error.setVisible(bool(message))

    def edit(self, config: McpServerConfig | None) -> None:
        """Fill the form with a server to change (None: a new server, empty fields)."""
        self.editing = config
        self.show_error("")
        self.name.setText(config.name if config else "")
        self.start_timeout.setValue(config.start_timeout_s if config else 20)
        self.call_timeout.setValue(config.call_timeout_s if config else 60)
        self.save_button.setText(self.tr("Save changes") if config else self.tr("Add server"))
        self.fill(config)
        self.name.setFocus()

    def fill(self, config: McpServerConfig | None) -> None:
        raise NotImplementedError

    def build(self, name: str) -> tuple[McpServerConfig, dict[str, str]]:
        raise NotImplementedError

    def checked_name(self) -> str:
        name = self.name.text().strip()
        if not name:
            raise FormError(self.tr("Give the server a name."))
        if "/" in name:
            raise FormError(self.tr("A server's name cannot contain '/'."))
        own = self.editing.name.casefold() if self.editing else None
        if name.casefold() != own and name.casefold() in {n.casefold() for n in self._taken()}:
            raise FormError(self.tr("There is already a server called {name}.").format(name=repr(name)))
        return name

    def submit(self) -> None:
        try:
            config, secrets = self.build(self.checked_name())
        except (FormError, EmberError) as exc:
            self.show_error(str(exc))
            return
        self.show_error("")
        self.submitted.emit(config, secrets)


class StdioServerForm(ServerForm):
    """A program Ember starts and speaks to over its stdin/stdout (most MCP servers: npx, uvx, python…)."""

    def __init__(self, taken: Callable[[], set[str]], parent: QWidget | None = None) -> None:
        super().__init__(taken, parent)
        self.title.setText(self.tr("A program on this computer (stdio)"))
        self.command = QLineEdit()
        self.command.setAccessibleName(self.tr("Command"))
        self.command.setPlaceholderText(self.tr("e.g. npx, uvx, python, or the program's full path"))
        self.args = QLineEdit()
        self.args.setAccessibleName(self.tr("Arguments"))
        self.args.setPlaceholderText(self.tr("-y @modelcontextprotocol/server-filesystem ~/Documents"))
        self.args.setToolTip(self.tr("As typed in a shell: quote an argument that has spaces"))
        self.env = QPlainTextEdit()
        self.env.setAccessibleName(self.tr("Environment"))
        self.env.setAccessibleDescription(self.tr("Variables the server gets: NAME=value, one per line"))
        self.env.setPlaceholderText(self.tr("NAME=value, one per line"))
        self.env.setTabChangesFocus(True)
        self.env.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 14)
        self.cwd = QLineEdit()
        self.cwd.setAccessibleName(self.tr("Working folder"))
        self.cwd.setPlaceholderText(self.tr("optional"))
        self.browse = QPushButton(self.tr("Choose…"))
        self.browse.setAccessibleName(self.tr("Choose the working folder"))
        self.browse.setToolTip(self.tr("The folder the server runs in"))
        self.browse.clicked.connect(self.pick_folder)
        self.folder_dialog: QFileDialog | None = None
        cwd_row = QHBoxLayout()
        cwd_row.addWidget(self.cwd, 1)
        cwd_row.addWidget(self.browse)
        self.form.addRow(self.tr("Command"), self.command)
        self.form.addRow(self.tr("Arguments"), self.args)
        self.form.addRow(self.tr("Environment"), self.env)
        self.form.addRow(self.tr("Working folder"), cwd_row)
        self.add_timeouts()
        self.edit(None)

    def pick_folder(self) -> QFileDialog:
        """A folder picker that does not block the window (its choice lands in the field)."""
        dialog = QFileDialog(self, self.tr("Working folder"), self.cwd.text())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.fileSelected.connect(self.cwd.setText)
        self.folder_dialog = dialog
        dialog.open()
        return dialog

    def fill(self, config: McpServerConfig | None) -> None:
        self.command.setText(config.command if config else "")
        self.args.setText(shlex.join(config.args) if config else "")
        self.env.setPlainText(env_lines(dict(config.env)) if config else "")
        self.cwd.setText(config.cwd or "" if config else "")

    def build(self, name: str) -> tuple[McpServerConfig, dict[str, str]]:
        command = self.command.text().strip()
        if not command:
            raise FormError(self.tr("Say which program to start (the command)."))
        try:
            args = tuple(shlex.split(self.args.text()))
        except ValueError:
            raise FormError(self.tr("The arguments have a quote that is not closed.")) from None
        env = parse_env_lines(self.env.toPlainText())
        config = McpServerConfig(
            name,
            "stdio",
            command=command,
            args=args,
            env=env,
            cwd=self.cwd.text().strip() or None,
            enabled=self.editing.enabled if self.editing else True,
            start_timeout_s=self.start_timeout.value(),
            call_timeout_s=self.call_timeout.value(),
        )
        return config, {}


class HttpServerForm(ServerForm):
    """A server at a URL (MCP's streamable HTTP), with plain headers and one secret header (a token)."""

    def __init__(self, taken: Callable[[], set[str]], parent: QWidget | None = None) -> None:
        super().__init__(taken, parent)
        self.title.setText(self.tr("A server at a URL (streamable HTTP)"))
        self.url = QLineEdit()
        self.url.setAccessibleName(self.tr("Server URL"))
        self.url.setPlaceholderText("https://example.com/mcp")
        self.headers = QPlainTextEdit()
        self.headers.setAccessibleName(self.tr("Headers"))
        self.headers.setAccessibleDescription(self.tr("Headers sent with every request: Name: value, one per line"))
        self.headers.setPlaceholderText(self.tr("Name: value, one per line (not secret)"))
        self.headers.setTabChangesFocus(True)
        self.headers.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 14)
        self.secret_name = QLineEdit()
        self.secret_name.setAccessibleName(self.tr("Secret header name"))
        self.secret_name.setPlaceholderText(self.tr("Authorization"))
        self.secret_value = QLineEdit()
        self.secret_value.setAccessibleName(self.tr("Secret header value"))
        self.secret_value.setEchoMode(QLineEdit.EchoMode.Password)
        self.secret_value.setPlaceholderText(self.tr("e.g. Bearer … (kept in the system keychain)"))
        secret_row = QHBoxLayout()
        secret_row.addWidget(self.secret_name, 1)
        secret_row.addWidget(self.secret_value, 2)
        self.secret_note = QLabel(self.tr("The secret header's value is kept in the system keychain, never in a file."))
        self.secret_note.setWordWrap(True)
        self.secret_note.setStyleSheet(f"color:{active_colors().secondary}")
        self.form.addRow(self.tr("URL"), self.url)
        self.form.addRow(self.tr("Headers"), self.headers)
        self.form.addRow(self.tr("Secret header"), secret_row)
        self.form.addRow("", self.secret_note)
        self.add_timeouts()
        self.edit(None)

    def fill(self, config: McpServerConfig | None) -> None:
        self.url.setText(config.url if config else "")
        self.headers.setPlainText(header_lines(dict(config.headers)) if config else "")
        secret = config.secret_headers[0] if config and config.secret_headers else ""
        self.secret_name.setText(secret)
        self.secret_value.clear()
        self.secret_value.setPlaceholderText(
            self.tr("stored in the system keychain; type to replace it")
            if secret
            else self.tr("e.g. Bearer … (kept in the system keychain)")
        )

    def build(self, name: str) -> tuple[McpServerConfig, dict[str, str]]:
        url = self.url.text().strip()
        if not url.lower().startswith(("http://", "https://")) or len(url) < 10:
            raise FormError(self.tr("The URL must start with http:// or https://, e.g. https://example.com/mcp."))
        headers = parse_header_lines(self.headers.toPlainText())
        secret_name = self.secret_name.text().strip()
        value = self.secret_value.text().strip()
        if value and not secret_name:
            raise FormError(self.tr("Name the secret header (e.g. Authorization)."))
        if secret_name and any(c.isspace() or c == ":" for c in secret_name):
            raise FormError(self.tr("A header's name has no spaces or ':' (e.g. Authorization)."))
        had = self.editing.secret_headers if self.editing else ()
        if secret_name and not value and secret_name not in had:
            raise FormError(self.tr("Type the secret header's value, or clear its name."))
        if secret_name in headers:
            raise FormError(
                self.tr("{header} is both a plain and a secret header; keep one.").format(header=secret_name)
            )
        config = McpServerConfig(
            name,
            "http",
            url=url,
            headers=headers,
            secret_headers=(secret_name,) if secret_name else (),
            enabled=self.editing.enabled if self.editing else True,
            start_timeout_s=self.start_timeout.value(),
            call_timeout_s=self.call_timeout.value(),
        )
        return config, ({secret_name: value} if secret_name and value else {})
