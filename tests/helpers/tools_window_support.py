"""Helpers for the window's tools tests (Settings ▸ Tools, the Tools button): real stdio MCP servers from
tests/mcp_servers (the official SDK), tools.json written before the window starts, and a probe of the
GUI event loop (the longest time it went without running a timer)."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable

import pytest
from PySide6.QtCore import QPoint, QRect, Qt, QTimer
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from ember_chat.app.shell.main_window import MainWindow
from ember_chat.app.tools.settings_dialog import ToolsDialog
from ember_chat.app.tools.tools_button import ToolsButton
from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import BuiltinToolsConfig, McpServerConfig, ToolsConfig, ToolsConfigFile
from ember_chat.engine.tools.registry import tool_tokens_estimate
from tests.helpers.file_keyring import FileTestKeyring
from tests.helpers.paths import TESTS

SERVERS = TESTS / "mcp_servers"
WAIT_MS = 30_000

# Claude Desktop's own example (modelcontextprotocol.io, "Connect to local MCP servers"), as a user pastes it
CLAUDE_DESKTOP_EXAMPLE = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/username/Desktop",
        "/Users/username/Downloads"
      ]
    }
  }
}"""


def stdio_server(name: str, script: str, *args: str, **changes: object) -> McpServerConfig:
    """One of the test servers, run by this Python."""
    return McpServerConfig(name, "stdio", command=sys.executable, args=(str(SERVERS / script), *args), **changes)


def write_tools(paths: AppPaths, config: ToolsConfig) -> None:
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    ToolsConfigFile(paths.config_dir / "tools.json").save(config)


def read_tools(paths: AppPaths) -> ToolsConfig:
    return ToolsConfigFile(paths.config_dir / "tools.json").load()


def keychain_value(key: str) -> str | None:
    return FileTestKeyring().get_password("ember-chat", key)


class LoopProbe:
    """A GUI-thread timer every 5 ms: `longest_gap_ms` is the longest the event loop went without it (wall
    time: on 2 shared cores the system can keep the GUI thread waiting for a core for tens of ms while a
    server's interpreter starts), `longest_busy_ms` the most CPU time the GUI thread itself spent between
    two beats (what Ember's own work on that thread held the loop)."""

    def __init__(self) -> None:
        self.longest_gap_ms = 0.0
        self.longest_busy_ms = 0.0
        self.beats = 0
        self._last = time.perf_counter()
        self._last_cpu = time.thread_time()
        self.timer = QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._beat)

    def start(self) -> None:
        self._last, self._last_cpu = time.perf_counter(), time.thread_time()
        self.timer.start()

    def _beat(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        self.longest_gap_ms = max(self.longest_gap_ms, (now - self._last) * 1000)
        self.longest_busy_ms = max(self.longest_busy_ms, (cpu - self._last_cpu) * 1000)
        self._last, self._last_cpu = now, cpu
        self.beats += 1

    def stop(self) -> None:
        self.timer.stop()


LEFT = Qt.MouseButton.LeftButton
# the popup grabs the keyboard: the offscreen platform cannot (a real display does)
popup_grab = pytest.mark.qt_log_ignore("This plugin does not support grabbing the keyboard")
CALCULATOR = "Built-in/calculator"
CLOCK = "Built-in/current_datetime"


def tokens_of(w: MainWindow, *keys: str) -> int:
    return tool_tokens_estimate([w.tools.registry.entry(k).spec for k in keys])


def open_chat(qtbot: QtBot, w: MainWindow, cid: int) -> None:
    w.chats.open_conversation(cid)
    qtbot.waitUntil(lambda: w.controller.conversation_id == cid, timeout=WAIT_MS)


def two_chats_with_builtins(
    qtbot: QtBot, make_window: Callable[..., MainWindow], paths: AppPaths
) -> tuple[MainWindow, int, int]:
    """A window with the date/time and calculator tools on in Settings, two chats, the first open."""
    write_tools(paths, ToolsConfig(builtin=BuiltinToolsConfig(datetime=True, calculator=True)))
    w = make_window()
    qtbot.waitUntil(lambda: w.tools.registry.entry(CALCULATOR) is not None, timeout=WAIT_MS)
    a = w.store.create_conversation("A").id
    b = w.store.create_conversation("B").id
    w.chats.reload_conversations()
    open_chat(qtbot, w, a)
    return w, a, b


def global_rect(widget: QWidget) -> QRect:
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def servers_listed(w: MainWindow, *names: str) -> bool:
    return not w.tools.listing and all(w.tools.server_state(n)[0] in ("failed", "running") for n in names)


def assert_placed(w: MainWindow, button: ToolsButton) -> None:
    """On the window's screen, below the window's top (its title bar stays in view), beside its button."""
    frame = button.frame.geometry()
    assert button.screen().availableGeometry().contains(frame), frame
    assert frame.top() >= w.geometry().top(), (frame, w.geometry())
    anchor = global_rect(button)
    assert frame.bottom() < anchor.top() or frame.top() > anchor.bottom(), (frame, anchor)


def assert_rows_whole(button: ToolsButton) -> None:
    """Each row of the popup outside its scrolled list is inside the frame, as tall as its text needs,
    and overlaps no other row."""
    popup = button.popup
    assert popup is not None
    frame = global_rect(button.frame)
    rows = [popup.layout().itemAt(i).widget() for i in range(popup.layout().count())]
    rows = [r for r in rows if r is not None and r.isVisible()]
    for row in rows:
        assert frame.contains(global_rect(row)), (row, global_rect(row), frame)
        if row.hasHeightForWidth():
            assert row.height() >= row.heightForWidth(row.width()), row
    for a, b in itertools.pairwise(rows):
        assert global_rect(a).bottom() < global_rect(b).top(), (a, b)
    list_rows = [popup.body.layout().itemAt(i).widget() for i in range(popup.body.layout().count())]
    for row in (r for r in list_rows if r is not None):
        if row.hasHeightForWidth():  # (the failing server's error: its whole sentence)
            assert row.height() >= row.heightForWidth(row.width()), row


def open_tools(w: MainWindow) -> ToolsDialog:
    """Settings ▸ Tools…, as the user opens it."""
    settings = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Settings")
    next(a for a in settings.actions() if a.text() == "&Tools…").trigger()
    dialog = w.tools.dialog
    assert dialog is not None and dialog.isVisible()
    return dialog
