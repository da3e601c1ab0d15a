"""A stdio MCP server that exits in the middle of a call (`crash`), with a last word on stderr."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("crash")


@server.tool(description="Answer at once.")
def ok() -> str:
    return f"ok from {os.getpid()}"


@server.tool(description="Exit with this code while the call is running.")
def crash(code: int) -> str:
    print(f"crash server: exiting with {code}", file=sys.stderr, flush=True)
    os._exit(code)


if __name__ == "__main__":
    if "--exit-at-start" in sys.argv:
        print("crash server: missing configuration file settings.toml", file=sys.stderr, flush=True)
        sys.exit(2)
    server.run()
