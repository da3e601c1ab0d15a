"""A well-behaved stdio MCP server for the tests (the official SDK's MCPServer): tools with schemas,
one read-only, one that fails as a tool, and `pid` so a test can tell a restarted server."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("normal")
NOTES = {"shopping": "eggs, flour", "todo": "write tests"}


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Read a note by its key.", annotations=ToolAnnotations(read_only_hint=True))
def read_note(key: str) -> str:
    return NOTES[key]


@server.tool(description="Fail on purpose with the reason given.")
def fail(reason: str) -> str:
    raise ToolError(reason)  # the SDK's way to fail with a message the client sees


@server.tool(description="The server's process id (and a log message over MCP, and its environment on stderr).")
async def pid(ctx: Context) -> int:
    await ctx.info("pid was asked")
    print(f"environment: {sorted(os.environ)}", file=sys.stderr, flush=True)
    return os.getpid()


if __name__ == "__main__":
    print("normal server: ready", file=sys.stderr, flush=True)
    server.run()
