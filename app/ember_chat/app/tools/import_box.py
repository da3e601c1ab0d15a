"""Settings ▸ Tools ▸ Paste JSON: the `mcpServers` block other apps use (Claude Desktop's
claude_desktop_config.json, Cursor's mcp.json, VS Code…), pasted whole or as the inner mapping.

What is pasted is read as it is typed (after a short pause): the box says which servers it found, or in
one sentence what is wrong and where; a name already taken is said before anything is added. Headers
that carry credentials (Authorization, tokens, keys, cookies) are moved to the system keychain when the
servers are added: they never reach tools.json."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from ember_chat.app.style.theme import active_colors
from ember_chat.engine.errors import EmberError
from ember_chat.engine.tools.config import McpServerConfig, looks_secret, parse_mcp_servers

PASTE_LIMIT = 1_000_000  # characters: a config file is a few KB; more is not one

EXAMPLE = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
    }
  }
}"""


class ImportBox(QWidget):
    """`imported(list[McpServerConfig])` when the user adds what was pasted (credential headers still in
    `headers`: the host moves them to the keychain)."""

    imported = Signal(object)
    cancelled = Signal()

    def __init__(self, taken: Callable[[], set[str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._taken = taken
        self.found: list[McpServerConfig] = []
        title = QLabel(self.tr("Paste the “mcpServers” JSON of Claude Desktop, Cursor or another app"))
        title.setStyleSheet("font-weight:600")
        title.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setAccessibleName(self.tr("mcpServers JSON"))
        self.text.setAccessibleDescription(self.tr("Paste the JSON here; what it holds is said below it"))
        self.text.setPlaceholderText(EXAMPLE)
        self.text.setTabChangesFocus(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.textChanged.connect(self._later)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.status.setAccessibleName(self.tr("What the pasted JSON holds"))
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.add_button = QPushButton(self.tr("Add these servers"))
        self.add_button.setDefault(True)
        self.add_button.setToolTip(self.tr("Add the servers found in the JSON (they start at once)"))
        self.add_button.setEnabled(False)
        self.add_button.clicked.connect(self.add)
        cancel = QPushButton(self.tr("Cancel"))
        cancel.setToolTip(self.tr("Add nothing"))
        cancel.clicked.connect(self.cancelled)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(cancel)
        buttons.addWidget(self.add_button)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(title)
        outer.addWidget(self.text, 1)
        outer.addWidget(self.status)
        outer.addLayout(buttons)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self.check)

    def reset(self) -> None:
        self.text.clear()
        self.check()
        self.text.setFocus()

    def _later(self) -> None:
        self.add_button.setEnabled(False)  # until what is there now is read
        self._timer.start()

    def _say(self, message: str, colour: str) -> None:
        self.status.setText(f"<span style='color:{colour}'>{html.escape(message, quote=False)}</span>")

    def say_error(self, message: str) -> None:
        self._say(message, _error())

    def check(self) -> bool:
        """Read what is pasted now; True when it can be added (the status line says why not)."""
        self._timer.stop()
        self.found = []
        self.add_button.setEnabled(False)
        text = self.text.toPlainText()
        if not text.strip():
            self.status.setText(self.tr("Servers already added keep their settings; names must differ."))
            return False
        if len(text) > PASTE_LIMIT:
            self._say(self.tr("That is too long for a server list; paste only the “mcpServers” part."), _error())
            return False
        try:
            servers = parse_mcp_servers(text)
        except EmberError as exc:
            self._say(str(exc), _error())
            return False
        if not servers:
            self._say(self.tr("The JSON holds no servers."), _error())
            return False
        names = [s.name for s in servers]
        taken_now = {n.casefold() for n in self._taken()}
        taken = sorted(n for n in names if n.casefold() in taken_now)
        if taken:
            self._say(
                self.tr(
                    "There is already a server called {names}: rename it in the JSON, or remove the one in "
                    "the list first."
                ).format(names=", ".join(repr(n) for n in taken)),
                _error(),
            )
            return False
        self.found = servers
        self.add_button.setEnabled(True)
        described = ", ".join(f"{s.name} ({_kind(s)})" for s in servers)
        found = self.tr("Found {count} server(s): {servers}.").format(count=len(servers), servers=described)
        if any(looks_secret(h) for s in servers for h in s.headers):
            found += " " + self.tr("Credential headers will be kept in the system keychain.")
        self._say(found, active_colors().success)
        return True

    def add(self) -> None:
        if self.check():
            self.imported.emit(list(self.found))


def _kind(config: McpServerConfig) -> str:
    return config.url if config.transport == "http" else " ".join([config.command, *config.args])[:60]


def _error() -> str:
    return active_colors().error
