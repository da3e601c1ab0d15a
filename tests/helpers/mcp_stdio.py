"""An MCP server of tests/mcp_servers/ run over stdio, as the MCP tests configure one."""

from __future__ import annotations

import sys

from ember_chat.engine.tools.config import McpServerConfig
from tests.helpers.paths import TESTS

SERVERS = TESTS / "mcp_servers"


def stdio(name: str, script: str, *args: str, **settings: float) -> McpServerConfig:
    return McpServerConfig(
        name, command=sys.executable, args=(str(SERVERS / script), *args), start_timeout_s=20, **settings
    )
