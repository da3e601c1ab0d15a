"""Helpers for the window's tools tests (Settings ▸ Tools, the Tools button): real stdio MCP servers from
tests/mcp_servers (the official SDK), tools.json written before the window starts, and a probe of the
GUI event loop (the longest time it went without running a timer)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QTimer

from ember_chat.engine.storage.paths import AppPaths
from ember_chat.engine.tools.config import McpServerConfig, ToolsConfig, ToolsConfigFile
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
    """A GUI-thread timer every 5 ms: `longest_gap_ms` is the longest the event loop went without it."""

    def __init__(self) -> None:
        self.longest_gap_ms = 0.0
        self.beats = 0
        self._last = time.perf_counter()
        self.timer = QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._beat)

    def start(self) -> None:
        self._last = time.perf_counter()
        self.timer.start()

    def _beat(self) -> None:
        now = time.perf_counter()
        self.longest_gap_ms = max(self.longest_gap_ms, (now - self._last) * 1000)
        self._last = now
        self.beats += 1

    def stop(self) -> None:
        self.timer.stop()


@pytest.fixture
def probe() -> Iterator[LoopProbe]:
    p = LoopProbe()
    yield p
    p.stop()
